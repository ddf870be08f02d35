-- apply.lua: the event worker applies a batch of events to the admin indexes, each exactly once.
-- Every key is an admin index under the {adm} hash tag (one Cluster slot).
-- ARGV[1] marker TTL (s); ARGV[2] record TTL (s; 0: records stay: the ledger is off); ARGV[3] with a
--   record TTL, the time (ms) before which index entries go (their records have expired); then per event: number of sorted-set additions (nz), of increments (ni),
--   overwrite (1: the record is written even when it exists: a release or a withdrawal), the record's
--   JSON, then nz pairs (score, member) and ni pairs (increment, member).
-- KEYS per event, in the same order: its marker, its record, the nz sorted sets, the ni sorted sets.
-- An event whose marker exists (delivered again after a take-over) changes nothing. An event that is
-- not an overwrite never replaces a record that exists: when a take-over let the release land first,
-- the admission stays released.
-- returns {events applied now}
local ttl, cutoff = tonumber(ARGV[2]), ARGV[3]
local k, a, applied = 1, 4, 0
while a <= #ARGV do
  local nz, ni, overwrite, body = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3]
  local marker, record = KEYS[k], KEYS[k + 1]
  a, k = a + 4, k + 2
  local fresh = redis.call('EXISTS', marker) == 0
  if fresh and (overwrite == '1' or redis.call('EXISTS', record) == 0) then
    if ttl > 0 then
      redis.call('SET', record, body, 'EX', ttl)
    else
      redis.call('SET', record, body)
    end
  end
  for _ = 1, nz do
    if fresh then
      redis.call('ZADD', KEYS[k], ARGV[a], ARGV[a + 1])
      if ttl > 0 then
        redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', '(' .. cutoff)
        redis.call('EXPIRE', KEYS[k], ttl)
      end
    end
    a, k = a + 2, k + 1
  end
  for _ = 1, ni do
    if fresh then redis.call('ZINCRBY', KEYS[k], ARGV[a], ARGV[a + 1]) end
    a, k = a + 2, k + 1
  end
  if fresh then
    redis.call('SET', marker, '1', 'EX', ARGV[1])
    applied = applied + 1
  end
end
return {applied}
