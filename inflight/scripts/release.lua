-- release.lua: give a slot back (the origin answered), or leave the line (hold ran out, the visitor
-- left); the freed slot goes to the first waiter at once.
-- KEYS: see lib.lua
-- ARGV[1] lease or ticket id
-- ARGV[2] limit: the route's max_in_flight
-- ARGV[3] presence ms: the grant window of a waiter handed the slot
-- ARGV[4] channel on which granted ticket ids are published
-- returns 1 if the id held a slot, 0 if it did not (it waited, or its lease had expired)
local id, limit, presence_ms, channel = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
local held = redis.call('ZREM', K_HOLDERS, id)
drop_waiter(id)
sweep(now, limit, presence_ms, channel)
keep(now)
return held
