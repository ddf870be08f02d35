-- commits.lua: commit a batch of admissions that the origin accepted, all of one kind and one owner
-- (one hash tag). With the ledger on, what is committed now is told to the ledger by an event.
-- ARGV[1] 1: the ledger is on   ARGV[2] 1: a grouped kind's admissions (GroupedKind), 0: another
-- kind's   ARGV from ARGV[3]: the ids (a grouped kind's: pairs of admission id and user)
-- A grouped kind's admissions: KEYS[1] the owner's admissions stream, KEYS[2] its unsettled set,
--   KEYS[3] its claims (a committed admission's claim ends: lib.lua end_claim). An admission
--   is in the unsettled set exactly while it is neither committed nor given back (the kind's admit
--   script adds it; a release, a cancellation or an orphan release takes it out in the same call that
--   writes the record's new state), so committing one is taking it out of the set: its record keeps
--   saying "admitted", and an admitted record outside the set is committed (the kind's scripts and
--   reconcile read it so). One ZMSCORE tells which ids are still to commit, one ZREM takes them all
--   out, and one event names them all (type committed, admissions: the ids, space-separated,
--   committed_at), on the admissions stream, which builds before it do not read.
-- Another kind's: KEYS[1] the owner's event stream, KEYS[2] unused, KEYS from KEYS[3]: each
--   admission's record (Kind.Record), in the order of the ids; each record not given back or
--   committed becomes committed, with an event each that names the id in its field "bid" (the name
--   the field had when the only such kind was bid admission; the ledger reads it so).
-- returns {items committed now}
if ARGV[2] == '1' then
  return {settle_committed(KEYS[2], KEYS[1], KEYS[3], ARGV[1], ARGV, 3, #ARGV)}
end
local now
local function clock()
  now = now or string.format('%d', now_ms())
  return now
end
local n = 0
for i = 3, #ARGV do
  local id, record = ARGV[i], KEYS[i]
  local state = redis.call('HGET', record, 'state')
  if state and state ~= 'withdrawn' and state ~= 'committed' and state ~= 'released' and state ~= 'cancelled' then
    redis.call('HSET', record, 'state', 'committed')
    n = n + 1
    if ARGV[1] == '1' then
      redis.call('XADD', KEYS[1], '*', 'type', 'committed', 'bid', id, 'committed_at', clock())
    end
  end
end
return {n}
