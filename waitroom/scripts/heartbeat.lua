-- heartbeat.lua: record that waiting visitors are still there (a batch from one replica's polls).
-- KEYS: see lib.lua
-- ARGV: positions
-- returns the number recorded
if redis.call('EXISTS', K_META) == 0 then return 0 end
local now_s = math.floor(now_ms() / 1000)
local counter = num(redis.call('GET', K_COUNTER))
local n = 0
for _, p in ipairs(ARGV) do
  local pos = tonumber(p)
  -- The caller sends waiters only; a position reached since is harmless (decided ones never read it).
  if pos and pos > 0 and pos <= counter then
    set_hb(pos, now_s)
    n = n + 1
  end
end
return n
