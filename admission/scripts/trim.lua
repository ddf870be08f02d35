-- trim.lua: trim one event stream (docs/reference.md "Event streams"): first what every consumer group
-- that is read has acknowledged, then, past the bound, the oldest entries whatever was read of them.
-- KEYS[1] stream
-- ARGV[1] min id: every entry below it is acknowledged by every group that is read ("" when that is
--         not known for this stream: a group that is read has not been created on it yet)
-- ARGV[2] bound: the most entries the stream may keep
-- returns {entries trimmed that were acknowledged, entries trimmed unread (past the bound)}
local acked, unread = 0, 0
if ARGV[1] ~= '' then
  acked = redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
end
if redis.call('XLEN', KEYS[1]) > tonumber(ARGV[2]) then
  unread = redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[2])
end
return {acked, unread}
