-- restock.lua: add units to a product (POST /api/products/{id}/restock).
-- KEYS[1] info   KEYS[2] stock
-- ARGV[1] amount >= 1
-- returns {code, remaining}: 0 ok, 1 no such product
if redis.call('EXISTS', KEYS[1]) == 0 then return {1, 0} end
redis.call('HINCRBY', KEYS[1], 'total_stock', ARGV[1])
return {0, redis.call('INCRBY', KEYS[2], ARGV[1])}
