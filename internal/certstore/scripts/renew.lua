-- renew.lua: extend a lock only while it is still the caller's (it may have expired and been taken by
-- another replica while this one was paused).
-- KEYS[1] the lock   ARGV[1] the caller's token   ARGV[2] the new time to live, ms
-- returns 1 renewed, 0 not the caller's
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
