-- assign.lua: give new visitors the next positions, gap-free and in arrival order, then run the inlet.
-- One visitor or a group (the replica's assigner sends the joins of a queue that queued up while its
-- last call was on its way): places are taken in order, then the inlet runs once for them all.
-- KEYS: see lib.lua
-- ARGV[1] "<epoch>:<floor>": the highest position the replica knows was handed out (raise_counter)
-- then per visitor: claim ("1" to issue the token at once if the new position is served by this very
--   call: the gate's "served at once" path, else "0"), tsv (unix time of the Turnstile check passed
--   to join, "0" if none)
-- returns {code, serving, epoch, then per visitor: position, state, iat, exp}
--   code 0 ok; 1 queue not found; 2 not open yet (joins start at join_from); 3 closed (closes_at has
--   passed, or the method is reject); 4 sold out. Only code 0 takes places (and lists them). state is
--   the new position's ST_ value; iat/exp are set when a token was issued (state 2).
if redis.call('EXISTS', K_META) == 0 then return {1, 0, ''} end
local now = now_ms()
local m = gate()
if num(m[1]) == 0 and num(m[7]) > now then return {2, 0, ''} end
if m[3] == '1' then return {4, 0, ''} end
if m[4] == 'reject' or (num(m[8]) > 0 and now >= num(m[8])) then return {3, 0, ''} end
raise_counter(now, ARGV[1])
local positions = {}
for i = 2, #ARGV, 2 do
  positions[#positions + 1] = take_place(now, m, tonumber(ARGV[i + 1]))
end
inlet(now, m)
local out = {0, 0, redis.call('HGET', K_META, 'epoch')}
for j, pos in ipairs(positions) do
  local st = get_state(pos)
  local iat, exp = 0, 0
  if ARGV[2 * j] == '1' and st == ST_SERVED then
    iat, exp = issue(pos, now)
    st = ST_TOKEN
  end
  out[#out + 1] = pos
  out[#out + 1] = st
  out[#out + 1] = iat
  out[#out + 1] = exp
end
out[2] = num(redis.call('GET', K_SERVING))
return out
