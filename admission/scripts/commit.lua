-- commit.lua: the origin accepted an admission: keep the units (the user's in-flight claim ends with
-- the unsettled entry).
-- KEYS[1] info     hash   product (unused here; every stock script gets the same KEYS)
-- KEYS[2] stock    string (unused here)
-- KEYS[3] buyers   hash   (unused here)
-- KEYS[4] claims   hash   (unused here: a claim whose admission is settled no longer counts)
-- KEYS[5] record   hash   this admission: state
-- KEYS[7] unsettled zset   admissions not settled yet (removed from it here)
-- KEYS[6] events   stream: with the ledger on, a committed event
-- ARGV[1] admission id   ARGV[2] 1: add the committed event (the ledger is on)
-- returns 0 committed; 1 unknown admission; 2 already released
-- Committed or given back, or its record long gone: it is settled either way.
redis.call('ZREM', KEYS[7], ARGV[1])
local state = redis.call('HGET', KEYS[5], 'state')
if not state then return 1 end
if state == 'released' or state == 'cancelled' then return 2 end
if state ~= 'committed' then
  redis.call('HSET', KEYS[5], 'state', 'committed')
  if ARGV[2] == '1' then
    redis.call('XADD', KEYS[6], '*', 'type', 'committed', 'admission', ARGV[1], 'committed_at', now_ms())
  end
end
return 0
