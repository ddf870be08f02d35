-- increment.lua: the operator moves the serving position forward by n (seed 004
-- increment_serving_position), regardless of capacity and release rate; abandoned waiters are still
-- skipped. The serving position never passes the last assigned position.
-- KEYS: see lib.lua
-- ARGV[1] n, 1..100000
-- returns {code, serving}: code 0 ok, 1 queue not found
if redis.call('EXISTS', K_META) == 0 then return {1, 0} end
local now = now_ms()
expire_due(now)
local target = num(redis.call('GET', K_SERVING)) + tonumber(ARGV[1])
-- serve_next does at most MAX_ADVANCE steps a call; the caller bounds n.
repeat
  local before = num(redis.call('GET', K_SERVING))
  serve_next(now, math.huge, target)
until num(redis.call('GET', K_SERVING)) == before
return {0, num(redis.call('GET', K_SERVING))}
