-- raffle.lua: a raffle entry, one per user per drawing while the drawing is open. An entry can be
-- given back once, and committed once the shop has accepted it.
-- KEYS[1] drawing  hash   the drawing (exists while it is open): entries (the entries held)
-- KEYS[2] entrants hash   user pseudonym -> entry id
-- KEYS[3] record   hash   this entry: user, state, at (ms)
-- KEYS[4] events   stream the drawing's events
-- ARGV[1] enter | release | commit   ARGV[2] entry id   ARGV[3] user pseudonym (enter)
-- ARGV[4] (commit) 1: the ledger is on, and is told by a committed event
-- returns enter: 0 entered, 1 no such drawing, 2 already entered, 3 given back before it came;
--         release: 0 released, 1 unknown (a tombstone is written), 2 already released, 3 committed;
--         commit: 0 committed, 1 unknown, 2 released
local op, id = ARGV[1], ARGV[2]
local state = redis.call('HGET', KEYS[3], 'state')
if op == 'enter' then
  if state then return 3 end
  if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
  if redis.call('HSETNX', KEYS[2], ARGV[3], id) == 0 then return 2 end
  local now = now_ms()
  redis.call('HSET', KEYS[3], 'user', ARGV[3], 'state', 'admitted', 'at', now)
  redis.call('EXPIRE', KEYS[3], 86400)
  redis.call('HINCRBY', KEYS[1], 'entries', 1)
  redis.call('XADD', KEYS[4], '*', 'type', 'admitted', 'entry', id, 'user', ARGV[3], 'at', now)
  return 0
end
if op == 'release' then
  if not state then
    redis.call('HSET', KEYS[3], 'state', 'released')
    redis.call('EXPIRE', KEYS[3], 86400)
    return 1
  end
  if state == 'released' then return 2 end
  if state == 'committed' then return 3 end
  redis.call('HSET', KEYS[3], 'state', 'released')
  local user = redis.call('HGET', KEYS[3], 'user')
  if redis.call('HGET', KEYS[2], user) == id then redis.call('HDEL', KEYS[2], user) end
  redis.call('HINCRBY', KEYS[1], 'entries', -1)
  redis.call('XADD', KEYS[4], '*', 'type', 'released', 'entry', id, 'user', user, 'at', now_ms())
  return 0
end
if not state then return 1 end
if state == 'released' then return 2 end
if state == 'committed' then return 0 end
redis.call('HSET', KEYS[3], 'state', 'committed')
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[4], '*', 'type', 'committed', 'entry', id, 'committed_at', now_ms())
end
return 0
