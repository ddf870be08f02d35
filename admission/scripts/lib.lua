-- lib.lua: shared by every admission script; the Go side prepends it to each operation's file, after
-- clock.lua (internal/store/luascript), which gives now_ms: every time comes from Redis.

-- Stock admission records. An admission's record is field <id> of its product's records hash for the
-- day of the id's time (keys.go recordsKey; KEYS[5] of the stock scripts): "<state> <user> <qty> <at
-- ms> <route>", then, once it is released or cancelled, " <when, ms>" (the route "-" when it has
-- none), or "released" alone (a tombstone: the release of an id never admitted). The orphan sweep's
-- mark is field "<id>:orphan". A field instead of a hash of its own: no key, no TTL and one write per
-- admission; the day's hash expires a record TTL after the day ends (or after the last write, when
-- that is later), so every record lives at least a record TTL. These are the admin records too
-- (records.go): the event worker indexes them, and removes them once past the retention.
-- Builds before this one wrote a hash per admission (fields state, user, qty, at, route, orphan; the
-- stock scripts' KEYS[8]): record_read finds one there when the day's hash has none, and
-- record_write writes back where the record was found, so both builds see one record during a
-- rolling update (docs/deploy.md).

-- record_read: state, user, qty, at, route of admission id, and whether it is an earlier build's;
-- nil when there is no record.
local function record_read(day, id, legacy)
  local v = redis.call('HGET', day, id)
  if v then
    local state, user, qty, at, route = string.match(v, '^(%S+) ?(%S*) ?(%S*) ?(%S*) ?(%S*)')
    return state, user, qty, at, route, false
  end
  if legacy and redis.call('EXISTS', legacy) == 1 then
    local h = redis.call('HMGET', legacy, 'state', 'user', 'qty', 'at', 'route')
    if h[1] then return h[1], h[2] or '', h[3] or '', h[4] or '', h[5] or '', true end
  end
  return nil
end

-- record_keep: the day's hash expires ttl seconds after the day ends, or after now when that is later.
local function record_keep(day, ttl)
  local d = tonumber(string.match(day, '@(%d+)$')) or 0
  local t = (d + 1) * 86400
  local now = math.floor(now_ms() / 1000)
  if t < now then t = now end
  redis.call('EXPIREAT', day, string.format('%d', t + tonumber(ttl)))
end

-- record_write: the record of admission id, where record_read found it (an earlier build's hash:
-- its fields, the TTL it had), else in the day's hash; settled (ms, text) when it was given back.
local function record_write(day, id, legacy, old, ttl, state, user, qty, at, route, settled)
  if old then
    redis.call('HSET', legacy, 'state', state, 'user', user, 'qty', qty, 'at', at)
    return
  end
  local v = state
  if user ~= '' then v = v .. ' ' .. user .. ' ' .. qty .. ' ' .. at end
  if settled then
    if not route or route == '' then route = '-' end
    v = v .. ' ' .. route .. ' ' .. settled
  elseif route and route ~= '' then
    v = v .. ' ' .. route
  end
  redis.call('HSET', day, id, v)
  record_keep(day, ttl)
end

-- end_claim: the user's in-flight claim ends with admission id (its settlement, or its refusal):
-- deleted when it still names id, so a product's claims hold the purchases in flight, not every buyer.
local function end_claim(claims, user, id)
  if user ~= '' and redis.call('HGET', claims, user) == id then redis.call('HDEL', claims, user) end
end

-- settle_committed: stock admissions the shop accepted (commits.lua, and the commits riding a
-- reserve.lua call), given as pairs in args[from..to]: admission id, user. Those still in the
-- unsettled set leave it in one ZREM, their users' claims that name them end (one HMGET, one HDEL),
-- and with the ledger on ("1") one committed entry names them on the admissions stream. Returns how
-- many were still unsettled.
local function settle_committed(unsettled, admits, claims, ledger, args, from, to)
  local ids, users, k = {}, {}, 0
  for i = from, to, 2 do
    k = k + 1
    ids[k], users[k] = args[i], args[i + 1]
  end
  if k == 0 then return 0 end
  local scores = redis.call('ZMSCORE', unsettled, unpack(ids, 1, k))
  local settle, who, seen, n = {}, {}, {}, 0
  for i = 1, k do
    local id = ids[i]
    if scores[i] and not seen[id] then
      seen[id] = true
      n = n + 1
      settle[n], who[n] = id, users[i]
    end
  end
  if n == 0 then return 0 end
  redis.call('ZREM', unsettled, unpack(settle, 1, n))
  local held, gone, ng = redis.call('HMGET', claims, unpack(who, 1, n)), {}, 0
  for i = 1, n do
    if held[i] == settle[i] then
      ng = ng + 1
      gone[ng] = who[i]
    end
  end
  if ng > 0 then redis.call('HDEL', claims, unpack(gone, 1, ng)) end
  if ledger == '1' then
    redis.call('XADD', admits, '*', 'type', 'committed', 'admissions', table.concat(settle, ' ', 1, n),
      'committed_at', string.format('%d', now_ms()))
  end
  return n
end

-- user_index_drop: takes id out of user's entry of a users index (a hash: user -> space-separated
-- ids), deleting the entry once it holds none (the admin records' deletions).
local function user_index_drop(index, user, id)
  local kept = {}
  for other in string.gmatch(redis.call('HGET', index, user) or '', '%S+') do
    if other ~= id then kept[#kept + 1] = other end
  end
  if #kept > 0 then
    redis.call('HSET', index, user, table.concat(kept, ' '))
  else
    redis.call('HDEL', index, user)
  end
end
