-- apply.lua: the event worker applies a batch of events to the admin indexes. Every key is an admin
-- index under the {adm} hash tag (one Cluster slot).
-- ARGV[1] record TTL (s; 0: records stay: the ledger is off); ARGV[2] with a record TTL, the time (ms)
--   before which index entries go (their records have expired); ARGV[3] the number of records (nr);
--   then per record: overwrite (1: the record is written even when it exists: a release, a
--   cancellation or a withdrawal) and its JSON; then per sorted set: the number of additions and
--   that many (score, member) pairs.
-- KEYS: the nr records, in the same order, then the sorted sets (each once: the additions of every
--   event of the batch to one index go in one ZADD).
-- Applying an event twice (delivered again after a take-over, or a batch retried after a lost reply)
-- changes nothing: the record is the event's own, and a sorted-set member is added once. An event
-- that is not an overwrite never replaces a record that exists: when a take-over let the release land
-- first, the admission stays released.
-- returns {records applied}
local ttl, cutoff, nr = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local a = 4
for k = 1, nr do
  local overwrite, record, body = ARGV[a], KEYS[k], ARGV[a + 1]
  a = a + 2
  -- One SET: NX keeps a record that exists.
  if overwrite == '1' then
    if ttl > 0 then redis.call('SET', record, body, 'EX', ARGV[1]) else redis.call('SET', record, body) end
  elseif ttl > 0 then
    redis.call('SET', record, body, 'NX', 'EX', ARGV[1])
  else
    redis.call('SET', record, body, 'NX')
  end
end
for k = nr + 1, #KEYS do
  local n = tonumber(ARGV[a])
  redis.call('ZADD', KEYS[k], unpack(ARGV, a + 1, a + 2 * n))
  a = a + 1 + 2 * n
  if ttl > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', '(' .. cutoff)
    redis.call('EXPIRE', KEYS[k], ARGV[1])
  end
end
return {nr}
