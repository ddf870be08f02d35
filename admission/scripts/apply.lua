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
for t = 1, #KEYS, 3 do
  local records, by_time, by_user = KEYS[t], KEYS[t + 1], KEYS[t + 2]
  local field, n = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local check = {}
  for i = 0, n - 1 do
    if ARGV[a + 5 * i] ~= '1' then check[#check + 1] = ARGV[a + 5 * i + 1] end
  end
  local present = {}
  if #check > 0 then
    local got = redis.call('HMGET', records, unpack(check))
    for i = 1, #check do
      if got[i] then present[check[i]] = true end
    end
  end
  local writes, times, added, users = {}, {}, {}, {}
  for i = 0, n - 1 do
    local o = a + 5 * i
    local overwrite, id, at, user = ARGV[o], ARGV[o + 1], ARGV[o + 2], ARGV[o + 3]
    if overwrite == '1' or not present[id] then
      writes[#writes + 1] = id
      writes[#writes + 1] = ARGV[o + 4]
      present[id] = true
      applied = applied + 1
    end
    times[#times + 1] = at
    times[#times + 1] = id
    if not added[user] then
      added[user] = {}
      users[#users + 1] = user
    end
    added[user][#added[user] + 1] = id
  end
  a = a + 5 * n
  if #writes > 0 then redis.call('HSET', records, unpack(writes)) end
  if n > 0 then
    redis.call('ZADD', by_time, unpack(times))
    -- Each user's list gains the ids it does not hold yet.
    local lists, set = redis.call('HMGET', by_user, unpack(users)), {}
    for i, user in ipairs(users) do
      local list, changed = lists[i] or '', false
      local padded = ' ' .. list .. ' '
      for _, id in ipairs(added[user]) do
        if not string.find(padded, ' ' .. id .. ' ', 1, true) then
          list = (list == '') and id or (list .. ' ' .. id)
          padded = padded .. id .. ' '
          changed = true
        end
      end
      if changed then
        set[#set + 1] = user
        set[#set + 1] = list
      end
    end
    if #set > 0 then redis.call('HSET', by_user, unpack(set)) end
  end
  if ttl > 0 then expire(records, by_time, by_user, field, tostring(2 * n + 16)) end
end
return {applied}
