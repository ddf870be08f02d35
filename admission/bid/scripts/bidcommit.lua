-- bidcommit.lua: the origin accepted a bid: it can no longer be withdrawn.
-- KEYS[1] info     hash   (unused here; every bid script gets the same KEYS)
-- KEYS[2] highest  hash   (unused here)
-- KEYS[3] bids     zset   (unused here)
-- KEYS[4] bidders  hash   (unused here)
-- KEYS[5] record   hash   this bid: state
-- KEYS[6] events   stream: with the ledger on, a committed event
-- ARGV[1] bid id   ARGV[2] 1: add the committed event (the ledger is on)
-- returns 0 committed; 1 unknown; 2 already withdrawn
local state = redis.call('HGET', KEYS[5], 'state')
if not state then return 1 end
if state == 'withdrawn' then return 2 end
if state ~= 'committed' then
  redis.call('HSET', KEYS[5], 'state', 'committed')
  if ARGV[2] == '1' then
    redis.call('XADD', KEYS[6], '*', 'type', 'committed', 'bid', ARGV[1], 'committed_at', now_ms())
  end
end
return 0
