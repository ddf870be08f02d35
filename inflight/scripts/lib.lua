-- lib.lua: shared by every in-flight script; the Go side prepends it to each operation's file, after
-- clock.lua (internal/store/luascript: now_ms).
--
-- KEYS (every script, one route; all five share the route's hash tag {f:<route>}):
--   KEYS[1] <prefix>:{f:<route>}:holders  sorted set: lease id -> lease expiry (ms, Redis TIME)
--   KEYS[2] <prefix>:{f:<route>}:waiters  sorted set: ticket id -> ticket number (arrival order)
--   KEYS[3] <prefix>:{f:<route>}:alive    sorted set: ticket id -> until when its waiter counts as
--                                          present (ms); every poll of the waiter renews it
--   KEYS[4] <prefix>:{f:<route>}:seq      string: the last ticket number given out
--   KEYS[5] <prefix>:{f:<route>}:clients  hash: client tag -> how many of its tickets wait in line
-- A ticket id is also the id of the lease it becomes. The id of a request from a known client is
-- "<client tag>.<random>" (the tag: hex, a hash of the client); any other is "<random>".
local K_HOLDERS, K_WAITERS, K_ALIVE, K_SEQ, K_CLIENTS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

-- client_of returns the client tag in a ticket id, nil for a ticket of no known client.
local function client_of(id)
  return string.match(id, '^(%x+)%.')
end

-- drop_waiter removes a ticket from the line, and from its client's count if it was in line.
local function drop_waiter(id)
  if redis.call('ZREM', K_WAITERS, id) == 1 then
    local client = client_of(id)
    if client and redis.call('HINCRBY', K_CLIENTS, client, -1) <= 0 then
      redis.call('HDEL', K_CLIENTS, client)
    end
  end
  redis.call('ZREM', K_ALIVE, id)
end

-- sweep frees the slots of expired leases (a replica that died, or stopped renewing) and forgets
-- waiters that stopped polling, then hands free slots to the first present waiters in ticket order
-- (first come, first served across replicas). A granted ticket holds its slot for grant_ms, time for
-- its waiter to poll and turn it into a full lease; its id is published on channel so that the
-- waiter's replica polls at once instead of at its next interval. Bounded work per call: a long line
-- of absent waiters is cleared over several calls.
local function sweep(now, limit, grant_ms, channel)
  redis.call('ZREMRANGEBYSCORE', K_HOLDERS, '-inf', now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_ALIVE, '-inf', now, 'LIMIT', 0, 100)) do
    drop_waiter(id)
  end
  local free = limit - redis.call('ZCARD', K_HOLDERS)
  local budget = 100
  while free > 0 and budget > 0 do
    local head = redis.call('ZRANGE', K_WAITERS, 0, 0)[1]
    if not head then break end
    local present = tonumber(redis.call('ZSCORE', K_ALIVE, head))
    drop_waiter(head)
    if present and present > now then
      redis.call('ZADD', K_HOLDERS, now + grant_ms, head)
      redis.call('PUBLISH', channel, head)
      free = free - 1
    end
    budget = budget - 1
  end
end

-- keep gives every key a TTL just past the latest expiry it holds, so nothing outlives the leases and
-- waiters in it (an emptied sorted set is deleted by Redis itself). The client counts go with an empty
-- line: whatever they held (a ticket dropped by a replica running older scripts, during a rolling
-- upgrade) cannot outlast the line.
local function keep(now)
  local last = redis.call('ZRANGE', K_HOLDERS, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', K_HOLDERS, math.max(tonumber(last[2]) - now, 0) + 1000)
  end
  last = redis.call('ZRANGE', K_ALIVE, -1, -1, 'WITHSCORES')
  if last[2] then
    local ttl = math.max(tonumber(last[2]) - now, 0) + 1000
    redis.call('PEXPIRE', K_ALIVE, ttl)
    redis.call('PEXPIRE', K_WAITERS, ttl)
    redis.call('PEXPIRE', K_SEQ, ttl)
    redis.call('PEXPIRE', K_CLIENTS, ttl)
  end
  if redis.call('EXISTS', K_WAITERS) == 0 then
    redis.call('DEL', K_CLIENTS)
  end
end
