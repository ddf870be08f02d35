-- commits.lua: commit a batch of admissions or bids that the origin accepted, all of one owner (one
-- hash tag): each record not released or withdrawn becomes committed, and a stock admission's
-- in-flight claim ends when it is still this admission's.
-- ARGV per item: id, stock (1 for a stock admission, 0 for a bid)
-- KEYS per item, in the same order: its record, then for a stock admission its claim and its
--   product's unsettled set
-- returns {items committed now}
local k, n = 1, 0
for a = 1, #ARGV, 2 do
  local id, record = ARGV[a], KEYS[k]
  k = k + 1
  local state = redis.call('HGET', record, 'state')
  if state and state ~= 'released' and state ~= 'withdrawn' and state ~= 'committed' and state ~= 'cancelled' then
    redis.call('HSET', record, 'state', 'committed')
    n = n + 1
  end
  if ARGV[a + 1] == '1' then
    if redis.call('GET', KEYS[k]) == id then redis.call('DEL', KEYS[k]) end
    if state ~= 'released' and state ~= 'cancelled' then redis.call('ZREM', KEYS[k + 1], id) end
    k = k + 2
  end
end
return {n}
