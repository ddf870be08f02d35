-- apply.lua: the event worker applies a batch of events to the admin records (records.go), and removes
-- records past the retention. Every key of one call is under one owner's hash tag (a product's or an
-- auction's: one Cluster slot). An owner's admin records are, per day of the ids' time: the records
-- (hash: id -> record), the ids in the order applied (list); and per owner its users' ids (hash: user
-- -> ids, space-separated; a user's ids are few). A stock admission's record is the scripts' own
-- (lib.lua): the worker only indexes it; a bid's is the JSON the worker writes here.
-- KEYS: per write group (one owner, one day) its records, ids and users; then per trim (one owner,
--   the day of the cutoff) its records, ids, users and unsettled set (stock; another of its keys for
--   bids, unread).
-- ARGV[1] write groups g   ARGV[2] trims t   ARGV[3] the cutoff: the smallest id of the retention's
--   start (ids grow with time)   ARGV[4] how many ids a trim looks at   ARGV[5] when the users hashes
--   expire (unix s: the retention after today ends)
--   then per write group: when its day's keys expire (unix s: the retention after the day ends),
--   scripted (1: the records are the scripts': only indexed), the number of records n, and n times:
--   overwrite (1: a bid's withdrawal: the record is written even when it exists), id, user, record
--   (empty when scripted)
--   then per trim: the pattern of a record's user (its first capture), 1 when the unsettled set and
--   the orphan marks are the owner's (stock)
-- Applying an event twice (delivered again after a take-over, or a batch retried after a lost reply)
-- changes nothing: an id joins the lists once (its user's list says whether it has), and an event that
-- is not an overwrite never replaces a record that exists: when a take-over let the withdrawal land
-- first, the bid stays withdrawn.
-- A trim removes, from the head of the cutoff day's list (earlier days' keys have expired whole), the
-- ids older than the cutoff, at most ARGV[4]: their records (but not a stock admission's that is still
-- unsettled: its release and commit need it), and their entries in their users' lists. So the cost
-- of a call is bounded by its own records, whatever the size of the tables.
-- returns {records applied}
local groups, trims, cutoff, look, users_at = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local k, a, applied = 1, 6, 0

-- older: whether id is older than the cutoff (decimal ids: a shorter one is smaller).
local function older(id)
  return #id < #cutoff or (#id == #cutoff and id < cutoff)
end

-- without: list (space-separated ids) less the ids in gone.
local function without(list, gone)
  local kept = {}
  for id in string.gmatch(list or '', '%S+') do
    if not gone[id] then kept[#kept + 1] = id end
  end
  return table.concat(kept, ' ')
end

-- send: cmd on key with the first n values of args, and the key's expiry at at; nothing when n is 0.
local function send(cmd, key, args, n, at)
  if n == 0 then return end
  redis.call(cmd, key, unpack(args, 1, n))
  redis.call('EXPIREAT', key, at)
end

for _ = 1, groups do
  local records, ids, users = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local expire_at, scripted, n = ARGV[a], ARGV[a + 1] == '1', tonumber(ARGV[a + 2])
  k, a = k + 3, a + 3
  -- The records to write (not scripted): new ones, and overwrites.
  if not scripted then
    local check, nc = {}, 0
    for o = a, a + 4 * (n - 1), 4 do
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
    local writes, nw = {}, 0
    for o = a, a + 4 * (n - 1), 4 do
      local id = ARGV[o + 1]
      if ARGV[o] == '1' or not present[id] then
        writes[nw + 1], writes[nw + 2], nw = id, ARGV[o + 3], nw + 2
        present[id] = true
        applied = applied + 1
      end
    end
    send('HSET', records, writes, nw, expire_at)
  end
  -- who: the batch's users, in order of first record.
  local seen, who, nu = {}, {}, 0
  for o = a, a + 4 * (n - 1), 4 do
    local user = ARGV[o + 2]
    if not seen[user] then
      seen[user] = true
      nu = nu + 1
      who[nu] = user
    end
  end
  if nu > 0 then
    -- Each id its user's list does not hold yet joins it and the day's list, in the batch's order.
    local lists, padded, changed, push, np = redis.call('HMGET', users, unpack(who, 1, nu)), {}, {}, {}, 0
    for i = 1, nu do
      padded[who[i]] = lists[i] and (' ' .. lists[i] .. ' ') or ' '
    end
    for o = a, a + 4 * (n - 1), 4 do
      local id, user = ARGV[o + 1], ARGV[o + 2]
      if not string.find(padded[user], ' ' .. id .. ' ', 1, true) then
        padded[user] = padded[user] .. id .. ' '
        changed[user] = true
        np = np + 1
        push[np] = id
        if scripted then applied = applied + 1 end
      end
    end
    local set, ns = {}, 0
    for i = 1, nu do
      local user = who[i]
      if changed[user] then
        set[ns + 1], set[ns + 2], ns = user, string.sub(padded[user], 2, -2), ns + 2
      end
    end
    send('HSET', users, set, ns, users_at)
    send('RPUSH', ids, push, np, expire_at)
  end
  a = a + 4 * n
end

for _ = 1, trims do
  local records, ids, users, unsettled = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local pattern, owned = ARGV[a], ARGV[a + 1] == '1'
  k, a = k + 4, a + 2
  -- The head first: in a sale within its retention, that one read is all a trim costs.
  local first, head, n = redis.call('LINDEX', ids, 0), {}, 0
  if first and older(first) then head = redis.call('LRANGE', ids, 0, tonumber(look) - 1) end
  while n < #head and older(head[n + 1]) do n = n + 1 end
  if n > 0 then
    local bodies = redis.call('HMGET', records, unpack(head, 1, n))
    local held = {}
    if owned then
      local scores = redis.call('ZMSCORE', unsettled, unpack(head, 1, n))
      for i = 1, n do
        if scores[i] then held[head[i]] = true end
      end
    end
    local gone, of, who, del, nd = {}, {}, {}, {}, 0
    for i = 1, n do
      local id = head[i]
      gone[id] = true
      local user = bodies[i] and string.match(bodies[i], pattern)
      if user and not of[user] then
        of[user] = true
        who[#who + 1] = user
      end
      if not held[id] then
        nd = nd + 1
        del[nd] = id
        if owned then
          nd = nd + 1
          del[nd] = id .. ':orphan'
        end
      end
    end
    if #who > 0 then
      local lists, keep, drop = redis.call('HMGET', users, unpack(who)), {}, {}
      for i, user in ipairs(who) do
        local list = without(lists[i], gone)
        if list == '' then
          drop[#drop + 1] = user
        else
          keep[#keep + 1] = user
          keep[#keep + 1] = list
        end
      end
      if #keep > 0 then redis.call('HSET', users, unpack(keep)) end
      if #drop > 0 then redis.call('HDEL', users, unpack(drop)) end
    end
    if nd > 0 then redis.call('HDEL', records, unpack(del, 1, nd)) end
    redis.call('LTRIM', ids, n, -1)
  end
end
return {applied}
