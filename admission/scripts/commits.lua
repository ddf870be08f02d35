-- commits.lua: commit a batch of admissions or bids that the origin accepted, all of one owner (one
-- hash tag): each record not released or withdrawn becomes committed, and a stock admission's
-- in-flight claim ends when it is still this admission's. With the ledger on, each commit adds a
-- "committed" event to the owner's stream (the ledger's settlement record).
-- KEYS[1] the owner's event stream
-- ARGV[1] 1: add committed events (the ledger is on)   ARGV[2] stream length bound
-- ARGV per item from ARGV[3]: id, stock (1 for a stock admission, 0 for a bid)
-- KEYS per item from KEYS[2], in the same order: its record, then for a stock admission its claim
--   and its product's unsettled set
-- Settled stock admissions leave their unsettled set with one ZREM per set, after the loop.
-- returns {items committed now}
local k, n, now = 2, 0, nil
local settled, sets = {}, {}
for a = 3, #ARGV, 2 do
  local id, record = ARGV[a], KEYS[k]
  k = k + 1
  local state = redis.call('HGET', record, 'state')
  if state and state ~= 'released' and state ~= 'withdrawn' and state ~= 'committed' and state ~= 'cancelled' then
    redis.call('HSET', record, 'state', 'committed')
    n = n + 1
    if ARGV[1] == '1' then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local field = 'bid'
      if ARGV[a + 1] == '1' then field = 'admission' end
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'type', 'committed', field, id, 'committed_at', now)
    end
  end
  if ARGV[a + 1] == '1' then
    if redis.call('GET', KEYS[k]) == id then redis.call('DEL', KEYS[k]) end
    if state ~= 'released' and state ~= 'cancelled' then
      local set = KEYS[k + 1]
      if not settled[set] then
        settled[set] = {}
        sets[#sets + 1] = set
      end
      table.insert(settled[set], id)
    end
    k = k + 2
  end
end
for _, set in ipairs(sets) do
  redis.call('ZREM', set, unpack(settled[set]))
end
return {n}
