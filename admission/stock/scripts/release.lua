-- release.lua: give an admission's units back after the origin refused or failed (release_on): stock
-- back, buyer record reduced, released event (the user's claim ends with the unsettled entry).
-- Idempotent per admission id.
-- KEYS[1] info     hash   product (unused here; every stock script gets the same KEYS)
-- KEYS[2] stock    string units left
-- KEYS[3] buyers   hash   user pseudonym -> units bought
-- KEYS[4] claims   hash   user pseudonym -> admission id: the user's claim ends if it names this one
-- KEYS[5] records  hash   the day's admission records (lib.lua)
-- KEYS[6] events   stream admission events for the worker
-- KEYS[7] unsettled zset   admissions not settled yet (removed from it here)
-- KEYS[8] record   hash   an earlier build's record of this admission (lib.lua)
-- ARGV[1] admission id   ARGV[2] record TTL (s)
-- ARGV[3] why, when it is not the origin's answer: "orphaned" (the orphan sweep gives back what a dead
--         replica left unsettled, orphans.go); the record and the released event say so
-- returns {code, remaining}: 0 released; 1 unknown admission; 2 already released (or cancelled by an
--   operator: its units are back already); 3 already committed
-- An unknown admission gets a tombstone (a released record), so that a reserve.lua call with this id
-- still on its way (the caller gave up on its answer) is refused when it arrives.
local id = ARGV[1]
local state, user, qty, admitted_at, route, old = record_read(KEYS[5], id, KEYS[8])
if not state then
  record_write(KEYS[5], id, KEYS[8], false, ARGV[2], 'released', '')
  return {1, 0}
end
if state == 'released' or state == 'cancelled' then return {2, 0} end
-- Committed: "committed" in records of builds before commits left the record alone, and an
-- admitted record whose admission is no longer unsettled (commits.lua).
if state == 'committed' or not redis.call('ZSCORE', KEYS[7], id) then return {3, 0} end
local at = now_ms()
local remaining = redis.call('INCRBY', KEYS[2], qty)
if redis.call('HINCRBY', KEYS[3], user, '-' .. qty) <= 0 then
  redis.call('HDEL', KEYS[3], user)
end
redis.call('ZREM', KEYS[7], id)
end_claim(KEYS[4], user, id)
record_write(KEYS[5], id, KEYS[8], old, ARGV[2], 'released', user, qty, admitted_at, route, string.format('%d', at))
if ARGV[3] and ARGV[3] ~= '' then
  if old then
    redis.call('HSET', KEYS[8], 'orphan', 'released')
  else
    redis.call('HSET', KEYS[5], id .. ':orphan', 'released')
  end
  redis.call('XADD', KEYS[6], '*', 'type', 'released', 'admission', id,
    'user', user, 'qty', qty, 'at', admitted_at, 'released_at', at, 'reason', ARGV[3])
else
  redis.call('XADD', KEYS[6], '*', 'type', 'released', 'admission', id,
    'user', user, 'qty', qty, 'at', admitted_at, 'released_at', at)
end
return {0, remaining}
