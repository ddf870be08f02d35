-- increment.lua: the operator moves the serving position forward by n (the admin API's
-- increment_serving_position), regardless of capacity and release rate; abandoned waiters are still
-- skipped. The serving position never passes the last assigned position.
-- KEYS: see lib.lua
-- ARGV[1] n, 1..100000
-- returns {code, serving}: code 0 ok, 1 queue not found, 2 not open yet (nobody is served before
-- opens_at, not even by the operator: open the queue by moving opens_at), 3 a lottery's draw waits for
-- the store's replicas (redis.wait_replicas: nobody is served in an order a failover could lose)
if redis.call('EXISTS', K_META) == 0 then return {1, 0} end
local now = now_ms()
expire_due(now)
if not drops().open_if_due(now) then
  if redis.call('HGET', K_META, 'draw_ack') == '0' then return {3, num(redis.call('GET', K_SERVING))} end
  return {2, num(redis.call('GET', K_SERVING))}
end
local target = num(redis.call('GET', K_SERVING)) + tonumber(ARGV[1])
-- serve_next does at most MAX_ADVANCE steps a call; the caller bounds n.
local served, skipped = 0, 0
repeat
  local before = num(redis.call('GET', K_SERVING))
  local a, b = serve_next(now, math.huge, target)
  served, skipped = served + a, skipped + b
until num(redis.call('GET', K_SERVING)) == before
if served > 0 then redis.call('HINCRBY', K_META, 'unclaimed', served) end
redis.call('HINCRBY', K_META, 'moved', served + skipped)
return {0, num(redis.call('GET', K_SERVING))}
