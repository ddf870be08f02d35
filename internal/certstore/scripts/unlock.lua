-- unlock.lua: delete a lock only while it is still the caller's.
-- KEYS[1] the lock   ARGV[1] the caller's token
-- returns 1 deleted, 0 not the caller's
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
