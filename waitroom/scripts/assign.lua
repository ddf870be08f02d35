-- assign.lua: give new visitors the next positions, gap-free and in arrival order, then run the inlet.
-- One visitor or a group (the replica's assigner sends the joins of a queue that queued up while its
-- last call was on its way): places are taken in order, then the inlet runs once for them all.
-- KEYS: see lib.lua; then KEYS[13..]: the places of the client addresses joining in this call (one key
--   per address, waitroom/places.go), a zset each of "<epoch>:<position>" scored by position: the places
--   the address took by joining while the queue had places_per_ip (never an invitation's), until they
--   are found to wait no more; and the single-use records of the bot checks the joins passed (bitmaps,
--   a bit per solution, waitroom/keys.go)
-- ARGV[1] "<epoch>:<floor>": the highest position the replica knows was handed out (raise_counter)
-- ARGV[2] TTL in ms of an address's places key, renewed by each place it takes
-- then per visitor: claim ("1" to issue the token at once if the new position is served by this very
--   call: the gate's "served at once" path, else "0"), tsv (unix time of the Turnstile check passed
--   to join, "0" if none), address (the index in KEYS of its address's places, "0" when it has none:
--   not counted), record (the index in KEYS of the bitmap of its check's single-use record, "0" for
--   none), the record's bit, and the bitmap's expiry (unix ms)
-- returns {code, serving, epoch, then per visitor: position, state, iat, exp}
--   code 0 ok; 1 queue not found; 2 not open yet (joins start at join_from); 3 closed (closes_at has
--   passed, or the method is reject); 4 sold out. Only code 0 takes places (and lists them). state is
--   the new position's ST_ value; iat/exp are set when a token was issued (state 2). Position 0: that
--   visitor took nothing, its address holds places_per_ip unserved places already. Position -1: that
--   visitor took nothing, its check's record was there already (a replayed solution).
if redis.call('EXISTS', K_META) == 0 then return {1, 0, ''} end
local now = now_ms()
local m = gate()
if num(m[1]) == 0 and num(m[7]) > now then return {2, 0, ''} end
if m[3] == '1' then return {4, 0, ''} end
if m[4] == 'reject' or (num(m[8]) > 0 and now >= num(m[8])) then return {3, 0, ''} end
raise_counter(now, ARGV[1])
local epoch = redis.call('HGET', K_META, 'epoch')

-- places_per_ip. A place counts while it waits (ST_WAITING: not reached by the serving rank, whatever
-- the lottery drew, nor drawn by the random method, nor given up): the state string says so whoever
-- moved it, so serving, expiring and finishing never touch these keys. held counts each address's
-- places once per call, dropping those that no longer count (or belong to a deleted queue's epoch, or
-- to positions a failover lost); places the call takes are added to it. A count stops at the limit:
-- the address is refused whatever the rest, and a set holds at most the limit it was filled under.
local limit = num(m[11])
local counter = limit > 0 and num(redis.call('GET', K_COUNTER)) or 0
local held = {}
local function waiting_places(key)
  local n, gone = 0, {}
  for _, member in ipairs(redis.call('ZRANGE', key, '0', '-1')) do
    local e, p = string.match(member, '^(.*):(%d+)$')
    p = tonumber(p)
    if e == epoch and p and p <= counter and get_state(p) == ST_WAITING then
      n = n + 1
      if n >= limit then break end
    else
      gone[#gone + 1] = member
    end
  end
  for i = 1, #gone, 1000 do -- unpack takes a bounded number of values
    redis.call('ZREM', key, unpack(gone, i, math.min(i + 999, #gone)))
  end
  return n
end

local positions = {}
-- The bot checks' single-use records: a join sets its solution's bit before it takes a place; a bit
-- set already (by an earlier join, or by one before it in this call) is a replay, which takes none.
-- So is a solution whose challenge has expired by the store's clock (a replica that was paused
-- after checking it): its bitmap may be gone, and with it the record of an earlier use.
local stamped = {}
for i = 3, #ARGV, 6 do
  local tsv, k, rec = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local pos = 0
  if rec > 0 and (now >= tonumber(ARGV[i + 5]) - 1000 or redis.call('SETBIT', KEYS[rec], ARGV[i + 4], 1) == 1) then
    pos = -1
  elseif limit > 0 and k > 0 then
    local key = KEYS[k]
    held[k] = held[k] or waiting_places(key)
    if held[k] < limit then
      pos = take_place(now, m, tsv)
      held[k] = held[k] + 1
      redis.call('ZADD', key, int(pos), epoch .. ':' .. int(pos))
      redis.call('PEXPIRE', key, ARGV[2])
    end
  else
    pos = take_place(now, m, tsv)
  end
  if rec > 0 and not stamped[rec] then
    redis.call('PEXPIREAT', KEYS[rec], ARGV[i + 5])
    stamped[rec] = true
  end
  positions[#positions + 1] = pos
end
inlet(now, m)
local out = {0, 0, epoch}
for j, pos in ipairs(positions) do
  local st, iat, exp = 0, 0, 0
  if pos > 0 then
    st = get_state(pos)
    if ARGV[6 * j - 3] == '1' and st == ST_SERVED then
      iat, exp = issue(pos, now)
      st = ST_TOKEN
    end
  end
  out[#out + 1] = pos
  out[#out + 1] = st
  out[#out + 1] = iat
  out[#out + 1] = exp
end
out[2] = num(redis.call('GET', K_SERVING))
return out
