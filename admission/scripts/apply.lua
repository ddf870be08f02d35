-- apply.lua: the event worker applies a batch of events to the admin records (records.go). Every key
-- is under the {adm} hash tag (one Cluster slot). A kind's admin records are a table of three keys:
-- its records' JSON in one hash (id -> JSON), an index by time (sorted set: score the admission's time
-- in ms, member the id) and an index by user (hash: user -> the user's ids, space-separated; a
-- user's records are few). Each write below is one command for the whole batch: one HSET of the
-- records, one ZADD, one HSET of the users' lists.
-- KEYS: per table, its hash, its index by time and its index by user.
-- ARGV[1] record TTL (s; 0: records stay: the ledger is off); ARGV[2] with a record TTL, the time (ms)
--   before which records go; then per table, in the order of KEYS: the JSON field naming the user,
--   the number of records n, and n times: overwrite (1: the record is written even when it exists: a
--   release, a cancellation or a withdrawal), id, time (ms), user, JSON.
-- Applying an event twice (delivered again after a take-over, or a batch retried after a lost reply)
-- changes nothing: the record is the event's own, and an index member is added once. An event that
-- is not an overwrite never replaces a record that exists, or one an earlier event of the batch
-- wrote: when a take-over let the release land first, the admission stays released.
-- With a record TTL, each call also removes up to twice its own number of records older than the
-- cutoff, with their index entries (the ledger keeps them), so the tables stay a TTL long.
-- returns {records applied}
local ttl, cutoff = tonumber(ARGV[1]), ARGV[2]
local a, applied = 3, 0
-- without: list (space-separated ids) less the ids in gone.
local function without(list, gone)
  local kept = {}
  for id in string.gmatch(list or '', '%S+') do
    if not gone[id] then kept[#kept + 1] = id end
  end
  return table.concat(kept, ' ')
end
local function expire(records, by_time, by_user, field, limit)
  local ids = redis.call('ZRANGEBYSCORE', by_time, '-inf', '(' .. cutoff, 'LIMIT', '0', limit)
  if #ids == 0 then return end
  local bodies = redis.call('HMGET', records, unpack(ids))
  local gone, users, pattern = {}, {}, '"' .. field .. '":"([^"]*)"'
  for i, id in ipairs(ids) do
    gone[id] = true
    local user = bodies[i] and string.match(bodies[i], pattern)
    if user and not users[user] then
      users[user] = true
      users[#users + 1] = user
    end
  end
  if #users > 0 then
    local lists, keep, drop = redis.call('HMGET', by_user, unpack(users)), {}, {}
    for i, user in ipairs(users) do
      local list = without(lists[i], gone)
      if list == '' then
        drop[#drop + 1] = user
      else
        keep[#keep + 1] = user
        keep[#keep + 1] = list
      end
    end
    if #keep > 0 then redis.call('HSET', by_user, unpack(keep)) end
    if #drop > 0 then redis.call('HDEL', by_user, unpack(drop)) end
  end
  redis.call('HDEL', records, unpack(ids))
  redis.call('ZREM', by_time, unpack(ids))
end
-- The loops below keep their own counts and make no table or string per record where a batch of new
-- buyers needs none: the interpreter's work per record costs Redis more than the commands' (counted
-- with callgrind).
for t = 1, #KEYS, 3 do
  local records, by_time, by_user = KEYS[t], KEYS[t + 1], KEYS[t + 2]
  local field, n = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local check, nc = {}, 0
  for o = a, a + 5 * (n - 1), 5 do
    if ARGV[o] ~= '1' then
      nc = nc + 1
      check[nc] = ARGV[o + 1]
    end
  end
  local present = {}
  if nc > 0 then
    local got = redis.call('HMGET', records, unpack(check, 1, nc))
    for i = 1, nc do
      if got[i] then present[check[i]] = true end
    end
  end
  -- add: user -> the batch's ids of the user, space-separated; users: in order of first record.
  local writes, times, add, users, nw, nt, nu = {}, {}, {}, {}, 0, 0, 0
  for o = a, a + 5 * (n - 1), 5 do
    local id, user = ARGV[o + 1], ARGV[o + 3]
    if ARGV[o] == '1' or not present[id] then
      writes[nw + 1], writes[nw + 2], nw = id, ARGV[o + 4], nw + 2
      present[id] = true
      applied = applied + 1
    end
    times[nt + 1], times[nt + 2], nt = ARGV[o + 2], id, nt + 2
    local prev = add[user]
    if prev then
      if not string.find(' ' .. prev .. ' ', ' ' .. id .. ' ', 1, true) then add[user] = prev .. ' ' .. id end
    else
      add[user] = id
      nu = nu + 1
      users[nu] = user
    end
  end
  a = a + 5 * n
  if nw > 0 then redis.call('HSET', records, unpack(writes, 1, nw)) end
  if n > 0 then
    redis.call('ZADD', by_time, unpack(times, 1, nt))
    -- Each user's list gains the ids it does not hold yet (a new user's list is the batch's ids).
    local lists, set, ns = redis.call('HMGET', by_user, unpack(users, 1, nu)), {}, 0
    for i = 1, nu do
      local user, list = users[i], lists[i]
      if not list then
        set[ns + 1], set[ns + 2], ns = user, add[user], ns + 2
      else
        local padded, changed = ' ' .. list .. ' ', false
        for id in string.gmatch(add[user], '%S+') do
          if not string.find(padded, ' ' .. id .. ' ', 1, true) then
            list, padded, changed = list .. ' ' .. id, padded .. id .. ' ', true
          end
        end
        if changed then set[ns + 1], set[ns + 2], ns = user, list, ns + 2 end
      end
    end
    if ns > 0 then redis.call('HSET', by_user, unpack(set, 1, ns)) end
  end
  if ttl > 0 then expire(records, by_time, by_user, field, tostring(2 * n + 16)) end
end
return {applied}
