-- reserve.lua: admit one purchase atomically (seeds 000, 002, 003): the user's in-flight claim, the
-- per-user limit, the stock check and decrement, the buyer record, the admission record and the event.
-- KEYS[1] info     hash   product: name, price, image_url, per_user_limit, total_stock
-- KEYS[2] stock    string units left
-- KEYS[3] buyers   hash   user pseudonym -> units bought
-- KEYS[4] claim    string the user's in-flight claim (value: admission id), with a TTL
-- KEYS[5] record   hash   this admission: user, qty, state, at (TTL: release must find it)
-- KEYS[6] events   stream admission events for the worker
-- ARGV[1] admission id   ARGV[2] user pseudonym   ARGV[3] quantity
-- ARGV[4] claim TTL (ms)   ARGV[5] record TTL (s)   ARGV[6] stream length bound (approximate)
-- returns {code, remaining, per_user_limit}
--   0 admitted; 1 insufficient stock; 2 no such product; 3 the user has a purchase in flight;
--   4 the user reached per_user_limit; 5 quantity outside 1..per_user_limit; 6 the id has a record
--   already (a compensation ran before this call arrived: nothing is taken)
if redis.call('EXISTS', KEYS[5]) == 1 then return {6, 0, 0} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {2, 0, 0} end
local limit = tonumber(redis.call('HGET', KEYS[1], 'per_user_limit')) or 1
local qty = tonumber(ARGV[3])
local remaining = tonumber(redis.call('GET', KEYS[2])) or 0
if not qty or qty < 1 or qty > limit or qty ~= math.floor(qty) then return {5, remaining, limit} end
if not redis.call('SET', KEYS[4], ARGV[1], 'NX', 'PX', ARGV[4]) then return {3, remaining, limit} end
local bought = tonumber(redis.call('HGET', KEYS[3], ARGV[2])) or 0
local refuse = 0
if bought + qty > limit then
  refuse = 4
elseif remaining < qty then
  refuse = 1
end
if refuse ~= 0 then
  redis.call('DEL', KEYS[4])
  return {refuse, remaining, limit}
end
local at = now_ms()
remaining = redis.call('DECRBY', KEYS[2], qty)
redis.call('HINCRBY', KEYS[3], ARGV[2], qty)
redis.call('HSET', KEYS[5], 'user', ARGV[2], 'qty', qty, 'state', 'admitted', 'at', at)
redis.call('EXPIRE', KEYS[5], ARGV[5])
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[6], '*', 'type', 'admitted', 'admission', ARGV[1],
  'user', ARGV[2], 'qty', qty, 'at', at)
return {0, remaining, limit}
