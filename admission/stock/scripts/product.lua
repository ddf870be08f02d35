-- product.lua: create a product, or seed one from the configuration file.
-- KEYS[1] info   KEYS[2] stock
-- ARGV[1] mode: "create" (fails if it exists) or "seed" (creates it if absent, else updates its
--         metadata and never touches live stock)
-- ARGV[2] name   ARGV[3] price (cents)   ARGV[4] image_url   ARGV[5] per_user_limit   ARGV[6] stock
-- returns {code, created}: code 0 ok, 1 exists (create)
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[1] == 'create' then return {1, 0} end
redis.call('HSET', KEYS[1], 'name', ARGV[2], 'price', ARGV[3], 'image_url', ARGV[4], 'per_user_limit', ARGV[5])
if exists then return {0, 0} end
redis.call('HSET', KEYS[1], 'total_stock', ARGV[6])
redis.call('SET', KEYS[2], ARGV[6])
return {0, 1}
