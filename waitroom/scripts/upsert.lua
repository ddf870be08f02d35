-- upsert.lua: create or update a queue's settings, then run the inlet (a raised capacity serves at once).
-- KEYS: see lib.lua
-- ARGV[1] mode: "create" (fails if the queue exists), "update" (fails if it does not), "file" (the
--   configuration file's entry: created when absent, written when ARGV[11] differs from the
--   fingerprint of the entry written last, otherwise left as it is, with any admin API change)
-- ARGV[2] capacity   ARGV[3] release per minute   ARGV[4] token ttl (s)   ARGV[5] position expiry (s, 0 never)
-- ARGV[6] abandon after (s, 0 off)   ARGV[7] turnstile (0/1)   ARGV[8] title
-- ARGV[9] epoch for a new queue (random, from the caller)
-- ARGV[10] paused: "" keeps the current state (new queues start running), "0" runs, "1" pauses
-- ARGV[11] fingerprint of the file's entry (mode "file" only)
-- ARGV[12] opens_at (ms, 0 none)   ARGV[13] join_from: opens_at - prequeue (ms, 0 none)
-- ARGV[14] shuffle (0/1)   ARGV[15] closes_at (ms, 0 none)   ARGV[16] method
-- ARGV[17] sold_out_with: product ids joined by ","   ARGV[18] a random secret for a queue without one
-- ARGV[19] session renewal (0/1)   ARGV[20] max session (s)   ARGV[21] invite only (0/1)
-- ARGV[22] places per ip (0 no limit; lowering it takes no place away: assign.lua only counts)
-- ARGV[23] gone after (s, 0 off)
--
-- A queue opens once (open_if_due). Moving opens_at into the future schedules it again only when nobody
-- is waiting; otherwise the queue stays open.
-- returns {code, epoch, created}: code 0 ok, 1 exists (create), 2 not found (update)
local mode = ARGV[1]
local exists = redis.call('EXISTS', K_META) == 1
if mode == 'create' and exists then return {1, '', 0} end
if mode == 'update' and not exists then return {2, '', 0} end
if mode == 'file' and exists and redis.call('HGET', K_META, 'file_fp') == ARGV[11] then
  -- An entry written before gone_after existed: its fingerprint did not change with the default.
  redis.call('HSETNX', K_META, 'gone', ARGV[23])
  return {0, redis.call('HGET', K_META, 'epoch'), 0}
end
local now = now_ms()
redis.call('HSETNX', K_META, 'secret', ARGV[18])
local abandon = tonumber(ARGV[6])
if exists then
  -- Turning abandonment on counts every waiter as seen now: heartbeats were not needed before.
  if abandon > 0 and meta_num('abandon') == 0 then
    redis.call('HSET', K_META, 'abandon_since', math.floor(now / 1000))
  end
else
  redis.call('HSET', K_META, 'epoch', ARGV[9], 'created_at', now, 'unclaimed', 0,
    'abandon_since', math.floor(now / 1000))
  redis.call('SETNX', K_COUNTER, 0)
  redis.call('SETNX', K_SERVING, 0)
end
redis.call('HSET', K_META, 'capacity', ARGV[2], 'rate', ARGV[3], 'ttl', ARGV[4], 'pexp', ARGV[5],
  'abandon', ARGV[6], 'turnstile', ARGV[7], 'title', ARGV[8])
if ARGV[10] == '0' or ARGV[10] == '1' then
  redis.call('HSET', K_META, 'paused', ARGV[10])
end
if mode == 'file' then
  redis.call('HSET', K_META, 'file_fp', ARGV[11])
end
local method_before = redis.call('HGET', K_META, 'method') or 'fifo'
redis.call('HSET', K_META, 'opens_at', ARGV[12], 'join_from', ARGV[13], 'shuffle', ARGV[14],
  'closes_at', ARGV[15], 'method', ARGV[16], 'sold_out_with', ARGV[17], 'renew', ARGV[19],
  'max_session', ARGV[20], 'invite_only', ARGV[21], 'places_per_ip', ARGV[22], 'gone', ARGV[23])
if ARGV[16] == 'random' and (method_before ~= 'random' or not exists) then
  drops().pool_reset()
end
if ARGV[17] == '' then
  redis.call('HSET', K_META, 'sold_out', '0')
end
if tonumber(ARGV[12]) > now and meta_num('opened') > 0 and
    num(redis.call('GET', K_SERVING)) >= num(redis.call('GET', K_COUNTER)) then
  redis.call('HSET', K_META, 'opened', 0)
  redis.call('HDEL', K_META, 'pre_lo', 'pre_n', 'seed')
end
inlet(now)
local created = 0
if not exists then created = 1 end
return {0, redis.call('HGET', K_META, 'epoch'), created}
