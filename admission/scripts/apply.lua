-- apply.lua: the event worker applies a batch of events to the admin indexes. Every key is an admin
-- index under the {adm} hash tag (one Cluster slot).
-- ARGV[1] record TTL (s; 0: records stay: the ledger is off); ARGV[2] with a record TTL, the time (ms)
--   before which index entries go (their records have expired); then per event: the number of
--   sorted-set additions (nz), overwrite (1: the record is written even when it exists: a release, a
--   cancellation or a withdrawal), the record's JSON, then nz pairs (score, member).
-- KEYS per event, in the same order: its record, then the nz sorted sets.
-- Applying an event twice (delivered again after a take-over, or a batch retried after a lost reply)
-- changes nothing: the record is the event's own, and a sorted-set member is added once. An event
-- that is not an overwrite never replaces a record that exists: when a take-over let the release land
-- first, the admission stays released.
-- returns {events applied}
local ttl, cutoff = tonumber(ARGV[1]), ARGV[2]
local k, a, applied = 1, 3, 0
while a <= #ARGV do
  local nz, overwrite, body = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2]
  local record = KEYS[k]
  a, k = a + 3, k + 1
  -- One SET: NX keeps a record that exists (a release that landed first stays released).
  if overwrite == '1' then
    if ttl > 0 then redis.call('SET', record, body, 'EX', ttl) else redis.call('SET', record, body) end
  elseif ttl > 0 then
    redis.call('SET', record, body, 'NX', 'EX', ttl)
  else
    redis.call('SET', record, body, 'NX')
  end
  for _ = 1, nz do
    redis.call('ZADD', KEYS[k], ARGV[a], ARGV[a + 1])
    if ttl > 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', '(' .. cutoff)
      redis.call('EXPIRE', KEYS[k], ttl)
    end
    a, k = a + 2, k + 1
  end
  applied = applied + 1
end
return {applied}
