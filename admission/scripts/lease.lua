-- lease.lua: a replica's liveness lease (lease.go), on the store's clock.
-- KEYS[1] live  hash   node number -> when its lease runs out (ms)
-- ARGV[1] node number   ARGV[2] lease length (ms)
-- The hash outlives the last renewal by a day: a node that never held a lease is taken for alive.
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now_ms() + tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], '86400000')
return 0
