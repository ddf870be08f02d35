-- cancel.lua: an operator cancels an admission (the shop cancelled the order, or an unsettled one
-- whose order never came): its units go back to stock, the buyer's count goes down, a cancelled event
-- is appended. Once per admission: a released or cancelled one is refused.
-- KEYS: as release.lua (info, stock, buyers, claims, records, events, unsettled, an earlier build's record)
-- ARGV[1] admission id   ARGV[2] user pseudonym   ARGV[3] quantity   ARGV[4] admitted at (ms)
-- ARGV[5] record TTL (s)
-- (user, quantity and time come from the admission's record in the admin indexes: the record here
-- expires after a day or two, and a cancel re-creates it, cancelled, so that a second cancel is refused.)
-- returns {code, remaining}: 0 cancelled; 2 already released; 4 already cancelled
local state, _, _, _, route, old = record_read(KEYS[5], ARGV[1], KEYS[8])
if state == 'released' then return {2, 0} end
if state == 'cancelled' then return {4, 0} end
local remaining = redis.call('INCRBY', KEYS[2], ARGV[3])
if redis.call('HINCRBY', KEYS[3], ARGV[2], '-' .. ARGV[3]) <= 0 then
  redis.call('HDEL', KEYS[3], ARGV[2])
end
local at = string.format('%d', now_ms())
record_write(KEYS[5], ARGV[1], KEYS[8], old, ARGV[5], 'cancelled', ARGV[2], ARGV[3], ARGV[4], route, at)
redis.call('ZREM', KEYS[7], ARGV[1])
end_claim(KEYS[4], ARGV[2], ARGV[1])
redis.call('XADD', KEYS[6], '*', 'type', 'cancelled', 'admission', ARGV[1],
  'user', ARGV[2], 'qty', ARGV[3], 'at', ARGV[4], 'cancelled_at', at)
return {0, remaining}
