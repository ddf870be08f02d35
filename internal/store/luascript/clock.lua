-- clock.lua: prepended to every script before its package's lib.lua (internal/store/luascript).
--
-- now_ms: Redis TIME in milliseconds. Time inside scripts always comes from Redis: one clock for
-- every replica.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
