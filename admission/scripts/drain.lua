-- drain.lua: the records of builds before the records moved under their owners' hash tags
-- (oldrecords.go) leave once past the retention, a bounded number per call. Those builds kept a
-- kind's admin records in one table of three keys under the {adm} hash tag: the records' JSON (hash:
-- id -> JSON), an index by time (sorted set: score the admission's time in ms) and an index by user
-- (hash: user -> ids, space-separated). When the last record has left, Redis removes the keys.
-- KEYS[1] the records   KEYS[2] the index by time   KEYS[3] the index by user
-- ARGV[1] the JSON field naming the user   ARGV[2] the cutoff (ms): older records go
-- ARGV[3] at most this many records
-- returns the number of records removed
local records, by_time, by_user = KEYS[1], KEYS[2], KEYS[3]
local ids = redis.call('ZRANGEBYSCORE', by_time, '-inf', '(' .. ARGV[2], 'LIMIT', '0', ARGV[3])
if #ids == 0 then return 0 end
local bodies = redis.call('HMGET', records, unpack(ids))
local gone, users, pattern = {}, {}, '"' .. ARGV[1] .. '":"([^"]*)"'
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
    local kept = {}
    for id in string.gmatch(lists[i] or '', '%S+') do
      if not gone[id] then kept[#kept + 1] = id end
    end
    if #kept == 0 then
      drop[#drop + 1] = user
    else
      keep[#keep + 1] = user
      keep[#keep + 1] = table.concat(kept, ' ')
    end
  end
  if #keep > 0 then redis.call('HSET', by_user, unpack(keep)) end
  if #drop > 0 then redis.call('HDEL', by_user, unpack(drop)) end
end
redis.call('HDEL', records, unpack(ids))
redis.call('ZREM', by_time, unpack(ids))
return #ids
