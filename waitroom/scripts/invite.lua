-- invite.lua: a visit of an invitation link (docs/reference.md "Waiting room"): the code's first use
-- takes a place in the queue; a front invitation is served at once, with its token, whatever the line,
-- the opening, a pause or closes_at (a sold-out queue still refuses it).
-- KEYS: see lib.lua
-- ARGV[1] SHA-256 of the code (hex)   ARGV[2] "<epoch>:<floor>" (raise_counter)
-- returns {code, position, serving, epoch, state, iat, exp, front}
--   code 0 ok (the invitation is used now); 1 queue not found; 2 not open yet; 3 closed; 4 sold out;
--   5 unknown invitation; 6 used already (position: the place it took); 7 expired.
--   Only code 0 uses the invitation. state is the new position's ST_ value; iat/exp are set when a token
--   was issued (state 2).
if redis.call('EXISTS', K_META) == 0 then return {1, 0, 0, '', 0, 0, 0, 0} end
local v = redis.call('HGET', K_INV, ARGV[1])
if not v then return {5, 0, 0, '', 0, 0, 0, 0} end
local created, expires, front, used_pos = string.match(v, '^(%d+):(%d+):(%d):(%d+):%d+$')
local now = now_ms()
local epoch = redis.call('HGET', K_META, 'epoch')
if num(used_pos) > 0 then return {6, num(used_pos), 0, epoch, 0, 0, 0, num(front)} end
if num(expires) * 1000 <= now then return {7, 0, 0, '', 0, 0, 0, num(front)} end
local m = gate()
if m[3] == '1' then return {4, 0, 0, '', 0, 0, 0, 0} end
if front ~= '1' then
  if num(m[1]) == 0 and num(m[7]) > now then return {2, 0, 0, '', 0, 0, 0, 0} end
  if m[4] == 'reject' or (num(m[8]) > 0 and now >= num(m[8])) then return {3, 0, 0, '', 0, 0, 0, 0} end
end
raise_counter(now, ARGV[2])
local pos = take_place(now, m, 0)
redis.call('HSET', K_INV, ARGV[1], created .. ':' .. expires .. ':' .. front .. ':' .. pos .. ':' .. math.floor(now / 1000))
redis.call('HINCRBY', K_META, 'inv_used', 1)
local iat, exp = 0, 0
if front == '1' then
  -- Served now, ahead of everyone: the place is decided, so the serving rank passes over it later.
  -- It is in the drawn string, as a draw's would be, so polls and waiting counts know it was served.
  set_state(pos, ST_SERVED)
  redis.call('APPEND', K_DRAWN, drops().encode5(pos))
  redis.call('HINCRBY', K_META, 'unclaimed', 1)
  iat, exp = issue(pos, now)
  inlet(now, m)
else
  inlet(now, m)
  if get_state(pos) == ST_SERVED then iat, exp = issue(pos, now) end
end
return {0, pos, num(redis.call('GET', K_SERVING)), epoch, get_state(pos), iat, exp, num(front)}
