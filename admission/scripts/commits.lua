-- commits.lua: commit a batch of admissions or bids that the origin accepted, all of one kind and one
-- owner (one hash tag): each record not released, cancelled or withdrawn becomes committed. With the
-- ledger on, each commit adds a "committed" event to the owner's stream (the ledger's settlement
-- record).
-- KEYS[1] the owner's event stream
-- KEYS[2] stock: the product's unsettled set (admissions neither committed nor given back); bids: unused
-- KEYS from KEYS[3]: each item's record, in the order of the ids
-- ARGV[1] 1: add committed events (the ledger is on)   ARGV[2] 1: stock admissions, 0: bids
-- ARGV from ARGV[3]: the ids
-- A stock admission is in the unsettled set exactly while its record is "admitted" (reserve.lua adds
-- it, and whatever settles it takes it out in the same call), so taking it out of the set tells
-- whether it is still to commit, without reading the record's state. The user's in-flight claim
-- needs nothing: a claim whose admission is settled no longer counts (reserve.lua).
-- returns {items committed now}
local stock, n, now = ARGV[2] == '1', 0, nil
local function committed(id)
  n = n + 1
  if ARGV[1] == '1' then
    if not now then
      local t = redis.call('TIME')
      now = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
    end
    local field = 'bid'
    if stock then field = 'admission' end
    redis.call('XADD', KEYS[1], '*', 'type', 'committed', field, id, 'committed_at', now)
  end
end
for i = 3, #ARGV do
  local id, record = ARGV[i], KEYS[i]
  if stock then
    if redis.call('ZREM', KEYS[2], id) == 1 then
      -- HSET answers how many fields it added: 1 means the record had expired (a commit more than a
      -- day late) and HSET made a new one, without a TTL, which goes.
      if redis.call('HSET', record, 'state', 'committed') == 1 then
        redis.call('DEL', record)
      else
        committed(id)
      end
    end
  else
    local state = redis.call('HGET', record, 'state')
    if state and state ~= 'withdrawn' and state ~= 'committed' and state ~= 'released' and state ~= 'cancelled' then
      redis.call('HSET', record, 'state', 'committed')
      committed(id)
    end
  end
end
return {n}
