-- advance.lua: the inlet tick every replica runs for every queue, and the snapshot it serves polls from.
-- KEYS: see lib.lua
-- ARGV[1] revocations since: ms; revocations with a later time are returned
-- ARGV[2] drawn offset: bytes of the drawn string the caller has read already
-- ARGV[3] sold out: "1" every product of sold_out_with has no stock left, "0" some has, "" unknown
-- ARGV[4] a random secret, kept only if the queue has none yet (queues created before it existed)
-- ARGV[5] "<epoch>:<floor>": the highest position the replica knows was handed out (raise_counter)
-- ARGV[6] "1" when the replica waits for replicas (redis.wait_replicas > 0): a lottery's draw then
--         serves nobody until the tick has seen it on them (ack_draws, draw_ack)
-- returns {code, counter, serving, active, unclaimed, now_ms, settings, revocations, deadlines, drawn}
--   code 0 ok; 1 queue not found
--   settings: {epoch, capacity, rate, ttl, pexp, abandon, turnstile, paused, title, method, opens_at,
--              join_from, closes_at, shuffle, opened, pre_lo, pre_n, seed, sold_out, sold_out_with,
--              pool_m, moved, early, renew, max_session, invite_only, inv_total, inv_used, draw_ack,
--              restored, places_per_ip, r_gave, r_exp, gone}
--   revocations: flat {position, time_ms, ...}
--   deadlines: flat {index, deadline_ms or "inf", ...}: a sample of the active set's deadlines, oldest
--              first, for the waiting time estimate
--   drawn: the drawn string from the offset on (at most 20,000 positions)
if redis.call('EXISTS', K_META) == 0 then return {1} end
local now = now_ms()
redis.call('HSETNX', K_META, 'secret', ARGV[4])
if ARGV[3] == '1' then
  redis.call('HSET', K_META, 'sold_out', '1')
elseif ARGV[3] == '0' and redis.call('HGET', K_META, 'sold_out') == '1' then
  -- A restock reopens the queue with every place kept: waiting pages stopped polling while it was
  -- sold out, so nobody is taken for gone for that time.
  redis.call('HSET', K_META, 'sold_out', '0', 'abandon_since', math.floor(now / 1000))
  redis.call('HDEL', K_META, 'r_end') -- the next sell-out's line is counted again (waitroom/leavers.go)
end
inlet(now)
local m = redis.call('HMGET', K_META, 'epoch', 'capacity', 'rate', 'ttl', 'pexp', 'abandon', 'turnstile',
  'paused', 'title', 'method', 'opens_at', 'join_from', 'closes_at', 'shuffle', 'opened', 'pre_lo', 'pre_n',
  'seed', 'sold_out', 'sold_out_with', 'pool_m', 'moved', 'early', 'renew', 'max_session', 'invite_only',
  'inv_total', 'inv_used', 'unclaimed', 'draw_ack', 'restored', 'ack_draws', 'places_per_ip', 'r_gave', 'r_exp',
  'gone')
-- ack_draws and the counter's floor are kept here, with what the tick reads anyway: every tick of every
-- replica runs this, so each command it saves counts.
if m[32] ~= ARGV[6] then
  redis.call('HSET', K_META, 'ack_draws', ARGV[6])
end
local settings = {}
for i = 1, 28 do settings[i] = m[i] or '' end
settings[29], settings[30], settings[31] = m[30] or '', m[31] or '', m[33] or ''
-- The report's counters that the scripts keep (lib.lua count_for_report): the replica's report flush
-- has something to move while either is not 0.
settings[32], settings[33] = m[34] or '', m[35] or ''
settings[34] = m[36] or ''
local revocations = redis.call('ZRANGEBYSCORE', K_REVOKED, '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, 10000)
local card = redis.call('ZCARD', K_ACTIVE)
local deadlines, last = {}, -1
if card > 0 then
  for j = 0, 7 do
    local idx = math.floor(j * (card - 1) / 7)
    if idx ~= last then
      local r = redis.call('ZRANGE', K_ACTIVE, idx, idx, 'WITHSCORES')
      if r[2] then
        deadlines[#deadlines + 1] = idx
        deadlines[#deadlines + 1] = r[2]
      end
      last = idx
    end
  end
end
local offset = tonumber(ARGV[2])
local drawn = ''
if offset < redis.call('STRLEN', K_DRAWN) then
  drawn = redis.call('GETRANGE', K_DRAWN, offset, offset + 5 * 20000 - 1)
end
local counter = num(redis.call('GET', K_COUNTER))
counter = counter + raise_counter(now, ARGV[5], counter)
-- The store's clock in microseconds, last: which of two snapshots was read later (queue.go, newer).
local clock = redis.call('TIME')
return {0, counter, num(redis.call('GET', K_SERVING)), card, num(m[29]), now,
  settings, revocations, deadlines, drawn, clock[1] .. string.format('%06d', tonumber(clock[2]))}
