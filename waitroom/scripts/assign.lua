-- assign.lua: give a new visitor the next position, gap-free and in arrival order, then run the inlet.
-- KEYS: see lib.lua
-- ARGV[1] claim: "1" to issue the token at once if the new position is served by this very call
--         (the gate's "served at once" path), else "0"
-- ARGV[2] tsv: unix time of the Turnstile check passed to join, "0" if none
-- returns {code, position, serving, epoch, state, iat, exp}
--   code 0 ok; 1 queue not found; 2 not open yet (joins start at join_from); 3 closed (closes_at has
--   passed, or the method is reject); 4 sold out. Only code 0 takes a place. state is the new
--   position's ST_ value; iat/exp are set when a token was issued (state 2).
if redis.call('EXISTS', K_META) == 0 then return {1, 0, 0, '', 0, 0, 0} end
local now = now_ms()
local m = gate()
if num(m[1]) == 0 and num(m[7]) > now then return {2, 0, 0, '', 0, 0, 0} end
if m[3] == '1' then return {4, 0, 0, '', 0, 0, 0} end
if m[4] == 'reject' or (num(m[8]) > 0 and now >= num(m[8])) then return {3, 0, 0, '', 0, 0, 0} end
local pos = take_place(now, m, tonumber(ARGV[2]))
inlet(now, m)
local st = get_state(pos)
local iat, exp = 0, 0
if ARGV[1] == '1' and st == ST_SERVED then
  iat, exp = issue(pos, now)
  st = ST_TOKEN
end
return {0, pos, num(redis.call('GET', K_SERVING)), redis.call('HGET', K_META, 'epoch'), st, iat, exp}
