-- auction.lua: create or update an auction (configuration seeding and PUT /api/auctions/{id}).
-- KEYS[1] info
-- ARGV[1] starting_price (cents)   ARGV[2] min_increment (cents)   ARGV[3] ends_at (ms)
-- ARGV[4] owner pseudonym ("" for none)
-- returns 1 if created, 0 if updated
local created = redis.call('EXISTS', KEYS[1]) == 0 and 1 or 0
redis.call('HSET', KEYS[1], 'starting_price', ARGV[1], 'min_increment', ARGV[2], 'ends_at', ARGV[3], 'owner', ARGV[4])
return created
