-- bidcommit.lua: the origin accepted a bid: it can no longer be withdrawn.
-- KEYS: as bid.lua
-- ARGV[1] bid id
-- returns 0 committed; 1 unknown; 2 already withdrawn
local state = redis.call('HGET', KEYS[5], 'state')
if not state then return 1 end
if state == 'withdrawn' then return 2 end
redis.call('HSET', KEYS[5], 'state', 'committed')
return 0
