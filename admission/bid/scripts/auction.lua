-- auction.lua: create or update an auction (configuration seeding and PUT /api/auctions/{id}), or
-- create it only (an auction fetched from the shop: auctions_source never overwrites one that was
-- configured or pushed, even one that arrived while the shop was being asked).
-- KEYS[1] info
-- ARGV[1] starting_price (cents)   ARGV[2] min_increment (cents)   ARGV[3] ends_at (ms)
-- ARGV[4] owner pseudonym ("" for none)   ARGV[5] "1": create only (optional)
-- returns 1 if created, 0 if updated, -1 if create-only found it existing (nothing written)
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[5] == '1' then return -1 end
redis.call('HSET', KEYS[1], 'starting_price', ARGV[1], 'min_increment', ARGV[2], 'ends_at', ARGV[3], 'owner', ARGV[4])
return exists and 0 or 1
