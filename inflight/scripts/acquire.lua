-- acquire.lua: take a slot of a route, or wait in line for one; a waiter polls with the same call.
-- KEYS: see lib.lua
-- ARGV[1] ticket id
-- ARGV[2] limit: the route's max_in_flight
-- ARGV[3] lease ms: how long a slot is held without a renewal
-- ARGV[4] presence ms: how long a waiter counts as present after a poll (also the grant window)
-- ARGV[5] 1: wait in line when no slot is free; 0: take a free slot or nothing
-- ARGV[6] channel on which granted ticket ids are published
-- ARGV[7] per client: > 0, the tickets of one client (the tag in the ticket id) that may wait in line
-- returns {code, ahead}: code 0 the ticket holds a slot (its lease renewed to ARGV[3]); 1 it waits,
-- `ahead` tickets before it; 2 no slot is free and it does not wait; 3 no slot is free and its client
-- has ARGV[7] tickets in line already: it does not wait
local id, limit, lease_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local presence_ms, wait, channel = tonumber(ARGV[4]), ARGV[5] == '1', ARGV[6]
local per_client = tonumber(ARGV[7])
local now = now_ms()
sweep(now, limit, presence_ms, channel)

-- Held already: granted while it waited (maybe just now, by the sweep), or a repeated call.
if redis.call('ZSCORE', K_HOLDERS, id) then
  redis.call('ZADD', K_HOLDERS, now + lease_ms, id)
  keep(now)
  return {0, 0}
end
local ahead = redis.call('ZRANK', K_WAITERS, id)
if ahead then
  redis.call('ZADD', K_ALIVE, now + presence_ms, id)
  keep(now)
  return {1, ahead}
end
-- A new request. After the sweep either every slot is taken or nobody waits, so a free slot is
-- nobody's turn but this request's.
if redis.call('ZCARD', K_HOLDERS) < limit then
  redis.call('ZADD', K_HOLDERS, now + lease_ms, id)
  keep(now)
  return {0, 0}
end
if not wait then
  return {2, redis.call('ZCARD', K_WAITERS)}
end
local client = client_of(id)
if client then
  if per_client > 0 and tonumber(redis.call('HGET', K_CLIENTS, client) or '0') >= per_client then
    return {3, redis.call('ZCARD', K_WAITERS)}
  end
  redis.call('HINCRBY', K_CLIENTS, client, 1)
end
redis.call('ZADD', K_WAITERS, redis.call('INCR', K_SEQ), id)
redis.call('ZADD', K_ALIVE, now + presence_ms, id)
keep(now)
return {1, redis.call('ZCARD', K_WAITERS) - 1}
