-- reserve.lua: admit purchases of one product atomically, one or a batch (the
-- reserve batcher sends what queued up while its last call was on its way). For each, in order: the
-- user's in-flight claim, the per-user limit, the stock check and decrement, the buyer record and
-- the admission record; one event names every purchase the call admitted.
-- KEYS[1] info     hash   product: name, price, image_url, per_user_limit, total_stock
-- KEYS[2] stock    string units left
-- KEYS[3] buyers   hash   user pseudonym -> units bought
-- KEYS[4] admits   stream one entry per call that admitted anything, for the workers: type admitted,
--                         at (ms), and space-separated lists admissions, users, qtys (in call order)
-- KEYS[5] unsettled zset admissions neither committed nor given back yet, by admission time (ms)
-- KEYS[6] claims   hash   user pseudonym -> admission id: the user's in-flight claim
-- then per purchase: its day's records hash (lib.lua: the record is a field; release must find it)
-- ARGV[1] claim TTL (ms)   ARGV[2] when the records hashes expire (unix s: a record TTL after the end
-- of the latest purchase's day, keys.go recordsExpireAt)   ARGV[3] 1: the ledger is on
-- ARGV[4] the number of commits c, then c pairs (admission id, user): commits riding this call
-- (reserver.go), done first, as commits.lua does them: the admissions still unsettled leave the
-- unsettled set and their claims end (so a buyer's next purchase later in this call is not refused as
-- in progress) and, with the ledger on, one committed entry names them on the admissions stream
-- then per purchase: admission id, user pseudonym, quantity (an integer, as text), route name (what
-- the orphan sweep reads)
-- The units taken, the unsettled entries and the event are written once per call, after the loop (one
-- DECRBY, one ZADD, one XADD): a call is atomic, so the stock each purchase sees is the one left by
-- the purchases before it, and every purchase of a call has the same time. One entry per call rather
-- than per purchase: adding, reading and acknowledging a stream entry cost more than the rest of an
-- admission's commands, and under load a call carries dozens of purchases.
-- returns per purchase {code, remaining, per_user_limit}, flat:
--   0 admitted; 1 insufficient stock; 2 no such product; 3 the user has a purchase in flight;
--   4 the user reached per_user_limit; 5 quantity outside 1..per_user_limit; 6 the id has a record
--   already (a compensation ran before this call arrived: nothing is taken). The same purchase sent
--   again (a client library resends a pipeline whose answer it lost) finds its own admitted record and
--   is answered 0 again, taking nothing more; the record is written once more, so that a WAIT after
--   this call covers the first one's writes too (the replication stream is ordered).
-- take_claim: the user's in-flight claim, for admission id. A claim counts only while its admission
-- is unsettled (in the unsettled set, or admitted earlier in this call: that ZADD comes after the
-- loop) and younger than the claim TTL (the TTL covers a replica that died before the shop answered).
-- The settlement deletes it (a commit, a release, a cancellation: lib.lua end_claim), and so does a
-- refusal after it was taken; a purchase refused for want of stock takes none (claim_held). A claim
-- an earlier build left, or one whose settlement was lost, no longer counts, and the next purchase
-- takes it over. One field of one hash per purchase in flight: no key, no TTL per purchase. The hash
-- itself expires a claim TTL after the last claim written to it (once per call, at the end).
-- Numbers go to redis.call as strings made here ('%d'): Redis turns a Lua number argument into text
-- with snprintf("%.17g"), which costs more than most of the commands of an admission.
local admitted, at, at_s, claimed, kept = {}, nil, nil, false, {}
-- counts: whether the claim held (an admission id) still counts.
local function counts(held)
  if admitted[held] then return true end
  local since = redis.call('ZSCORE', KEYS[5], held)
  if not since then return false end
  at = at or now_ms()
  return tonumber(since) > at - tonumber(ARGV[1])
end
local function take_claim(user, id)
  if redis.call('HSETNX', KEYS[6], user, id) == 1 then
    claimed = true
    return true
  end
  local held = redis.call('HGET', KEYS[6], user)
  if held == id then return 'own' end
  if counts(held) then return false end
  redis.call('HSET', KEYS[6], user, id)
  claimed = true
  return true
end
-- claim_held: take_claim's answer without taking one (for a purchase the stock refuses anyway).
local function claim_held(user, id)
  local held = redis.call('HGET', KEYS[6], user)
  if not held then return true end
  if held == id then return 'own' end
  return not counts(held)
end
-- resent: this purchase was admitted already (its claim holds its id): a client library resent the
-- call whose answer it lost. Its record is written once more (for a WAIT after this call), and
-- nothing more is taken.
local function resent(records, id, user, qty)
  local held = redis.call('HGET', records, id)
  if not held then return false end
  local state, u, n = string.match(held, '^(%S+) (%S+) (%S+)')
  if state ~= 'admitted' or u ~= user or tonumber(n) ~= qty then return false end
  redis.call('HSET', records, id, held)
  return true
end
local commits = tonumber(ARGV[4])
if commits > 0 then settle_committed(KEYS[5], KEYS[4], KEYS[6], ARGV[3], ARGV, 5, 4 + 2 * commits) end
local first = 5 + 2 * commits
local out, no = {}, 0
local limit = tonumber(redis.call('HGET', KEYS[1], 'per_user_limit'))
local remaining = tonumber(redis.call('GET', KEYS[2])) or 0
-- The loop keeps its own counts (no # per append) and passes the quantity on as the caller's text
-- (reserveNow formats an integer): the interpreter's work per purchase is part of Redis's cost.
local taken, unsettled, ids, users, qtys, nu, na = 0, {}, {}, {}, {}, 0, 0
for i = 0, (#ARGV - first + 1) / 4 - 1 do
  local p = first + 4 * i
  local id, user, q, route = ARGV[p], ARGV[p + 1], ARGV[p + 2], ARGV[p + 3]
  local qty = tonumber(q)
  local records = KEYS[7 + i]
  local code, claim = 0, nil
  if not limit then
    code = 2
  elseif not qty or qty < 1 or qty > limit or qty ~= math.floor(qty) then
    code = 5
  elseif remaining < qty then
    claim = claim_held(user, id)
  else
    claim = take_claim(user, id)
  end
  if code ~= 0 or (claim == 'own' and resent(records, id, user, qty)) then
    -- refused before the claim, or admitted already
  elseif not claim then
    code = 3
  elseif remaining < qty then
    -- Refused either way; the per-user limit is the reason given when both refuse.
    local bought = tonumber(redis.call('HGET', KEYS[3], user)) or 0
    code = (bought + qty > limit) and 4 or 1
  else
    -- Count the units first and take them back if that passes the limit: one call for an admission
    -- instead of a read and an increment. qty <= limit, so a purchase that passes the limit finds
    -- the buyer's field there already, and taking the units back never leaves a 0 behind.
    if redis.call('HINCRBY', KEYS[3], user, q) > limit then
      redis.call('HINCRBY', KEYS[3], user, '-' .. q)
      redis.call('HDEL', KEYS[6], user)
      code = 4
    else
      at = at or now_ms()
      at_s = at_s or string.format('%d', at)
      local v = 'admitted ' .. user .. ' ' .. q .. ' ' .. at_s
      if route ~= '' then v = v .. ' ' .. route end
      -- The record is written only if the id has none: one that has (a release that ran before
      -- this call arrived left a tombstone; or a resent call whose claim was taken over since)
      -- takes back the units counted above.
      if redis.call('HSETNX', records, id, v) == 0 then
        if redis.call('HINCRBY', KEYS[3], user, '-' .. q) <= 0 then
          redis.call('HDEL', KEYS[3], user)
        end
        code = resent(records, id, user, qty) and 0 or 6
        if code == 6 then redis.call('HDEL', KEYS[6], user) end
      else
        if not kept[records] then
          kept[records] = true
          redis.call('EXPIREAT', records, ARGV[2])
        end
        remaining, taken = remaining - qty, taken + qty
        unsettled[nu + 1], unsettled[nu + 2], nu = at_s, id, nu + 2
        admitted[id] = true
        na = na + 1
        ids[na], users[na], qtys[na] = id, user, q
      end
    end
  end
  out[no + 1], out[no + 2], out[no + 3], no = code, remaining, limit or 0, no + 3
end
if taken > 0 then
  redis.call('DECRBY', KEYS[2], string.format('%d', taken))
  redis.call('ZADD', KEYS[5], unpack(unsettled, 1, nu))
  redis.call('XADD', KEYS[4], '*', 'type', 'admitted', 'at', at_s,
    'admissions', table.concat(ids, ' '), 'users', table.concat(users, ' '), 'qtys', table.concat(qtys, ' '))
end
if claimed then redis.call('PEXPIRE', KEYS[6], ARGV[1]) end
return out
