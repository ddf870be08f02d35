-- commit.lua: the origin accepted an admission (or an operator commits it): keep the units. As
-- commits.lua, committing is leaving the unsettled set; the record keeps saying "admitted" (an
-- admitted record outside the set is committed), and the user's in-flight claim ends with it.
-- KEYS[1] info     hash   product (unused here; every stock script gets the same KEYS)
-- KEYS[2] stock    string (unused here)
-- KEYS[3] buyers   hash   (unused here)
-- KEYS[4] claims   hash   user pseudonym -> admission id: the user's claim ends if it names this one
-- KEYS[5] records  hash   the day's admission records (lib.lua)
-- KEYS[6] events   stream: with the ledger on, a committed event
-- KEYS[7] unsettled zset   admissions not settled yet (removed from it here)
-- KEYS[8] record   hash   an earlier build's record of this admission (lib.lua)
-- ARGV[1] admission id   ARGV[2] 1: add the committed event (the ledger is on)   ARGV[3] its user
-- returns 0 committed (now or before); 1 unknown admission; 2 already released or cancelled
if redis.call('ZREM', KEYS[7], ARGV[1]) == 1 then
  end_claim(KEYS[4], ARGV[3] or '', ARGV[1])
  if ARGV[2] == '1' then
    redis.call('XADD', KEYS[6], '*', 'type', 'committed', 'admission', ARGV[1], 'committed_at', now_ms())
  end
  return 0
end
local state = record_read(KEYS[5], ARGV[1], KEYS[8])
if not state then return 1 end
if state == 'released' or state == 'cancelled' then return 2 end
return 0
