-- bid.lua: accept a bid only if it beats the highest, atomically: the auction exists and has
-- not ended (by Redis time), the bidder is not the owner, the amount is at least the starting price
-- and, once there is a highest bid, at least the highest plus min_increment; then history, highest, bidder count, bid record, event.
-- KEYS[1] info     hash   starting_price, min_increment (cents), ends_at (ms), owner (pseudonym or "")
-- KEYS[2] highest  hash   bid_id, bidder, amount (cents), at (ms)
-- KEYS[3] bids     zset   history: score = amount, member = "<bid id>:<at ms>:<bidder>"
-- KEYS[4] bidders  hash   bidder pseudonym -> live bids
-- KEYS[5] record   hash   this bid: member, bidder, amount, state (TTL: withdrawal must find it)
-- KEYS[6] events   stream bid events for the worker
-- ARGV[1] bid id   ARGV[2] bidder pseudonym   ARGV[3] amount (cents)   ARGV[4] record TTL (s)
-- returns {code, highest_amount}
--   0 accepted; 1 too low (highest_amount is the amount to beat); 2 no such auction; 3 ended;
--   4 the owner bid; 5 below the starting price; 6 the id has a record already (a compensation ran
--   before this call arrived: nothing is taken). The same bid sent again (a client library resends a
--   pipeline whose answer it lost) finds its own accepted record and is answered 0 again; the record is
--   written once more, so that a WAIT after this call covers the first one's writes too.
-- EXISTS first: a new bid (nearly every one) makes no table of three nils.
local held = redis.call('EXISTS', KEYS[5]) == 1 and redis.call('HMGET', KEYS[5], 'state', 'bidder', 'amount')
if held and held[1] then
  if held[1] == 'accepted' and held[2] == ARGV[2] and held[3] == ARGV[3] then
    redis.call('HSET', KEYS[5], 'state', 'accepted')
    return {0, tonumber(held[3])}
  end
  return {6, 0}
end
-- auction.lua writes every field of an auction's info: one without ends_at does not exist.
local info = redis.call('HMGET', KEYS[1], 'starting_price', 'min_increment', 'ends_at', 'owner')
if not info[3] then return {2, 0} end
local now = now_ms()
local ends_at = tonumber(info[3])
if now >= ends_at then return {3, 0} end
if info[4] and info[4] ~= '' and info[4] == ARGV[2] then return {4, 0} end
local amount = tonumber(ARGV[3])
if amount < tonumber(info[1]) then return {5, tonumber(info[1])} end
local top = redis.call('HMGET', KEYS[2], 'amount', 'expire_at')
local highest = tonumber(top[1])
if highest and amount < highest + tonumber(info[2]) then return {1, highest} end
-- Numbers go to redis.call (and into text) as strings made here ('%d'): Redis turns a Lua number
-- argument into text with snprintf("%.17g"), and Lua's own conversion is no cheaper.
local at, amount_s = string.format('%d', now), string.format('%d', amount)
local member = ARGV[1] .. ':' .. at .. ':' .. ARGV[2]
redis.call('ZADD', KEYS[3], amount_s, member)
redis.call('HINCRBY', KEYS[4], ARGV[2], '1')
redis.call('HSET', KEYS[5], 'member', member, 'bidder', ARGV[2], 'amount', amount_s, 'at', at, 'state', 'accepted')
redis.call('EXPIRE', KEYS[5], ARGV[4])
redis.call('XADD', KEYS[6], '*', 'type', 'bid', 'bid', ARGV[1], 'user', ARGV[2],
  'amount', amount_s, 'at', at)
-- History, bidder counts and events are kept a week past the end (the auction and its highest bid
-- stay): set once per end, not on every bid (the highest bid remembers the time it was set for;
-- withdraw.lua rewrites the highest without it, and the next bid sets them again).
local expire_at = string.format('%d', math.floor(ends_at / 1000) + 7 * 24 * 3600)
if top[2] == expire_at then
  redis.call('HSET', KEYS[2], 'bid_id', ARGV[1], 'bidder', ARGV[2], 'amount', amount_s, 'at', at)
else
  redis.call('HSET', KEYS[2], 'bid_id', ARGV[1], 'bidder', ARGV[2], 'amount', amount_s, 'at', at, 'expire_at', expire_at)
  redis.call('EXPIREAT', KEYS[3], expire_at)
  redis.call('EXPIREAT', KEYS[4], expire_at)
  redis.call('EXPIREAT', KEYS[6], expire_at)
end
return {0, amount}
