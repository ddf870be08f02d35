-- gcra.lua: GCRA (generic cell rate algorithm) limiter, as in go-redis/redis_rate.
-- KEYS[1] the theoretical arrival time (TAT) of the limited thing, in ms
-- ARGV[1] emission interval in ms (60000 / per-minute limit)   ARGV[2] burst (requests allowed at once)
-- returns {allowed, retry_after_ms}
local now = now_ms()
local interval = tonumber(ARGV[1])
local burst_offset = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - burst_offset
if now < allow_at then
  return {0, allow_at - now}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.max(1, new_tat - now))
return {1, 0}
