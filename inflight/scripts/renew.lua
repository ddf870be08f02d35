-- renew.lua: extend a lease still held, while its request is at the origin.
-- KEYS: see lib.lua
-- ARGV[1] lease id
-- ARGV[2] lease ms
-- returns 1 renewed, 0 lost: the lease had expired (the replica could not renew in time) and its slot
-- may be someone else's now
local id, lease_ms = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local expiry = tonumber(redis.call('ZSCORE', K_HOLDERS, id))
if not expiry or expiry <= now then
  return 0
end
redis.call('ZADD', K_HOLDERS, now + lease_ms, id)
keep(now)
return 1
