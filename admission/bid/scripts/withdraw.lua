-- withdraw.lua: take back a bid the origin refused or failed (release_on): it leaves the history and,
-- if it is still the highest, the next one down becomes the highest again. Idempotent per bid id.
-- KEYS[1] info     hash   (unused here; every bid script gets the same KEYS)
-- KEYS[2] highest  hash   bid_id, bidder, amount (cents), at (ms)
-- KEYS[3] bids     zset   history: score = amount, member = "<bid id>:<at ms>:<bidder>"
-- KEYS[4] bidders  hash   bidder pseudonym -> live bids
-- KEYS[5] record   hash   this bid: member, bidder, amount, at, state
-- KEYS[6] events   stream bid events for the worker
-- ARGV[1] bid id   ARGV[2] record TTL (s)
-- returns 0 withdrawn; 1 unknown bid; 2 already withdrawn; 3 already committed
-- An unknown bid gets a tombstone (a withdrawn record), so that a bid.lua call with this id still on
-- its way is refused when it arrives.
local state = redis.call('HGET', KEYS[5], 'state')
if not state then
  redis.call('HSET', KEYS[5], 'state', 'withdrawn')
  redis.call('EXPIRE', KEYS[5], ARGV[2])
  return 1
end
if state == 'withdrawn' then return 2 end
if state == 'committed' then return 3 end
local member = redis.call('HGET', KEYS[5], 'member')
local bidder = redis.call('HGET', KEYS[5], 'bidder')
redis.call('ZREM', KEYS[3], member)
if redis.call('HINCRBY', KEYS[4], bidder, -1) <= 0 then
  redis.call('HDEL', KEYS[4], bidder)
end
if redis.call('HGET', KEYS[2], 'bid_id') == ARGV[1] then
  local top = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #top == 0 then
    redis.call('DEL', KEYS[2])
  else
    local id, at, who = string.match(top[1], '^(%d+):(%d+):(.+)$')
    redis.call('HSET', KEYS[2], 'bid_id', id, 'bidder', who, 'amount', top[2], 'at', at)
  end
end
redis.call('HSET', KEYS[5], 'state', 'withdrawn')
redis.call('XADD', KEYS[6], '*', 'type', 'withdrawn', 'bid', ARGV[1], 'user', bidder,
  'amount', redis.call('HGET', KEYS[5], 'amount'), 'at', redis.call('HGET', KEYS[5], 'at'), 'withdrawn_at', now_ms())
return 0
