-- bidcommit.lua: the origin accepted a bid: it can no longer be withdrawn.
-- KEYS[1] info     hash   (unused here; every bid script gets the same KEYS)
-- KEYS[2] highest  hash   (unused here)
-- KEYS[3] bids     zset   (unused here)
-- KEYS[4] bidders  hash   (unused here)
-- KEYS[5] record   hash   this bid: state
-- KEYS[6] events   stream (unused here)
-- ARGV[1] bid id
-- returns 0 committed; 1 unknown; 2 already withdrawn
local state = redis.call('HGET', KEYS[5], 'state')
if not state then return 1 end
if state == 'withdrawn' then return 2 end
redis.call('HSET', KEYS[5], 'state', 'committed')
return 0
