-- lookup.lua: a position's state, for status and queue_pos of visitors already reached.
-- KEYS: see lib.lua
-- ARGV[1] position   ARGV[2] epoch
-- returns {code, state, serving, exp}: code 0 ok, 1 unknown; exp is the token expiry (s) if any
if redis.call('EXISTS', K_META) == 0 then return {1, 0, 0, 0} end
local pos = tonumber(ARGV[1])
if redis.call('HGET', K_META, 'epoch') ~= ARGV[2] or pos > num(redis.call('GET', K_COUNTER)) then
  return {1, 0, 0, 0}
end
local _, exp = get_tok(pos)
return {0, get_state(pos), num(redis.call('GET', K_SERVING)), exp}
