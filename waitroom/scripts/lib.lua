-- lib.lua: shared by every waiting-room script; the Go side prepends it to each operation's file, after
-- clock.lua (internal/store/luascript: now_ms).
--
-- Every script of a queue receives the same KEYS, all under the queue's hash tag {q:<id>}:
--   KEYS[1] meta     hash   settings (capacity, rate, ttl, pexp, abandon, abandon_since, turnstile, title,
--                           paused, epoch, secret, method, opens_at, join_from, shuffle, closes_at,
--                           sold_out_with, renew, max_session, invite_only, places_per_ip), rate
--                           bucket (bucket, bucket_at), unclaimed (served, no token), the drop's state:
--                           opened (ms, 0 not yet), the lottery (pre_lo, pre_n, seed), sold_out, the random
--                           method's pool (pool_base, pool_m), draws, moved, early; invitations:
--                           inv_total, inv_used; failover (waitroom/failover.go): ack_draws (the tick's
--                           redis.wait_replicas > 0), draw_ack ("0" while a lottery's draw waits for the
--                           replicas), restored; the report's counters r_gave and r_exp
--                           (count_for_report)
--   KEYS[2] counter  string last assigned position (positions start at 1, in arrival order)
--   KEYS[3] serving  string serving rank (starts at 0, never decreases): ranks 1..serving were reached in
--                           serving order (see rank below)
--   KEYS[4] active   zset   served and unfinished positions; score = deadline in ms (token expiry, or the
--                           position-expiry deadline before a token is issued; +inf for never)
--   KEYS[5] state    string one byte per position (offset = position), see the ST_ constants
--   KEYS[6] hb       string four bytes per position (offset = 4 * position): last heartbeat, unix seconds
--   KEYS[7] tok      hash   position -> "iat:exp:tsv" for positions with a token or a Turnstile time
--   KEYS[8] revoked  zset   position -> revocation time in ms, for replicas catching up on revocations
--   KEYS[9] pool     string method random: five bytes per slot, the positions a draw picks from (0 = the
--                           position of rank pool_base + slot + 1)
--   KEYS[10] drawn   string five bytes per position served out of turn, in order: by a draw (method
--                           random) or a front invitation; replicas read it from where they left off,
--                           so polls know who was served
--   KEYS[11] inv     hash   invitations: SHA-256 of the code (hex) -> "created:expires:front:position:used"
--                           (seconds; position and used 0 until it is used); codes are never stored
--   KEYS[12] gone    string nine bytes per visitor who left before being served, for the report's
--                           waits: the position (five bytes) and when it was last seen (four, unix
--                           seconds); the report's tick takes it (GETDEL, waitroom/report.go)
-- assign.lua receives more KEYS after these: the places of the joining visitors' addresses (see there).
--
-- Heartbeats. hb holds when a visitor counts as seen until: a poll writes now, a page going into the
-- background writes now + the hidden grace (its timers may be throttled or frozen), a page closing
-- writes now again (heartbeat.lua). With gone_after (meta 'gone', seconds, 0 off) a reached place
-- holds its capacity until gone_after past that, within position_expiry: its tok entry is
-- "0:<position_expiry deadline, s, 0 none>:<tsv>" until the token is issued.
--
-- Ranks. A position is a visitor's place in arrival order; its rank is its place in serving order. They
-- are equal except in a lottery: at the opening of a queue with shuffle, the pre-queue's positions
-- pre_lo+1 .. pre_lo+pre_n get their ranks from a keyed pseudo-random permutation (an 8-round Feistel
-- network over the smallest square power of two, with cycle walking), keyed by a seed drawn once, at the
-- opening, from the queue's secret. Go computes rank(position) the same way for polls (lottery.go).
--
-- Time always comes from Redis TIME: one clock for every replica.

local K_META, K_COUNTER, K_SERVING, K_ACTIVE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_STATE, K_HB, K_TOK, K_REVOKED = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_POOL, K_DRAWN, K_INV, K_GONE = KEYS[9], KEYS[10], KEYS[11], KEYS[12]

local ST_WAITING, ST_SERVED, ST_TOKEN, ST_COMPLETED = 0, 1, 2, 3
local ST_ABANDONED, ST_EXPIRED, ST_SKIPPED = 4, 5, 6

-- Bounds on the work one call may do; the inlet ticker picks up whatever is left.
local MAX_EXPIRE = '1000' -- text: a redis.call argument (see int)
local MAX_ADVANCE = 1000

local function num(v)
  return tonumber(v) or 0
end

-- int is an integer as the text Redis reads. Redis turns a Lua number argument of redis.call into
-- text with snprintf("%.17g"), which costs more than the command itself on a join's path.
local function int(n)
  return string.format('%d', n)
end

local function meta_num(field)
  return num(redis.call('HGET', K_META, field))
end

local function get_state(pos)
  local p = int(pos)
  local s = redis.call('GETRANGE', K_STATE, p, p)
  if s == '' then return ST_WAITING end
  return string.byte(s)
end

local function set_state(pos, st)
  redis.call('SETRANGE', K_STATE, int(pos), string.char(st))
end

local function get_hb(pos)
  local s = redis.call('GETRANGE', K_HB, int(pos * 4), int(pos * 4 + 3))
  if string.len(s) < 4 then return 0 end
  local a, b, c, d = string.byte(s, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function set_hb(pos, seconds)
  redis.call('SETRANGE', K_HB, int(pos * 4), string.char(
    math.floor(seconds / 16777216) % 256, math.floor(seconds / 65536) % 256,
    math.floor(seconds / 256) % 256, seconds % 256))
end

-- tok values are "iat:exp:tsv" (seconds).
local function get_tok(pos)
  local v = redis.call('HGET', K_TOK, int(pos))
  if not v then return 0, 0, 0 end
  local iat, exp, tsv = string.match(v, '^(%d+):(%d+):(%d+)$')
  return num(iat), num(exp), num(tsv)
end

-- leave_active ends a served position: removes it from the active set and records its final state.
-- Returns the state it left.
local function leave_active(pos, final)
  local st = get_state(pos)
  if st == ST_SERVED then
    redis.call('HINCRBY', K_META, 'unclaimed', -1)
  end
  local p = int(pos)
  redis.call('ZREM', K_ACTIVE, p)
  redis.call('HDEL', K_TOK, p)
  set_state(pos, final)
  return st
end

-- The report (report) counts what the scripts decide by themselves in two meta fields, added
-- to once per call; the report's tick moves them into its minute (flush.lua), zeroing them:
--   r_gave  places reached and never claimed before position_expiry, places skipped by abandon_after
--   r_exp   tokens that ran out
local function count_for_report(field, n)
  if n > 0 then redis.call('HINCRBY', K_META, field, int(n)) end
end

-- Five-byte big-endian numbers (positions), for the pool, drawn and gone strings.
local function encode5(v)
  return string.char(math.floor(v / 4294967296) % 256, math.floor(v / 16777216) % 256,
    math.floor(v / 65536) % 256, math.floor(v / 256) % 256, v % 256)
end

-- note_gone keeps a visitor who left before being served, and when it was last seen, for the
-- report's waits; past MAX_GONE records (the report's tick not taking them) they are only counted.
local MAX_GONE = 9 * 100000
local function note_gone(pos, seen)
  if redis.call('STRLEN', K_GONE) < MAX_GONE then
    redis.call('APPEND', K_GONE, encode5(pos) .. string.char(math.floor(seen / 16777216) % 256,
      math.floor(seen / 65536) % 256, math.floor(seen / 256) % 256, seen % 256))
  end
end

-- expire_due ends served positions and tokens whose deadline has passed.
local function expire_due(now)
  local due = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', int(now), 'LIMIT', '0', MAX_EXPIRE)
  local unclaimed = 0
  for _, member in ipairs(due) do
    local pos = tonumber(member)
    if leave_active(pos, ST_EXPIRED) == ST_SERVED then
      unclaimed = unclaimed + 1
      note_gone(pos, math.min(get_hb(pos), math.floor(now / 1000)))
    end
  end
  count_for_report('r_gave', unclaimed)
  count_for_report('r_exp', #due - unclaimed)
  return #due
end

-- waiter reads what deciding waiters needs: abandonment settings, the deadline of a new serve, and the
-- lottery (lot.n is 0 without one).
local function waiter(now)
  local m = redis.call('HMGET', K_META, 'pexp', 'abandon', 'abandon_since', 'pre_lo', 'pre_n', 'seed', 'gone')
  local w = {abandon = num(m[2]), since = num(m[3]), now_s = math.floor(now / 1000), deadline = '+inf',
    lot = {lo = num(m[4]), n = num(m[5]), seed = m[6] or ''}, gave = 0, gone = num(m[7]), cap = 0}
  if num(m[1]) > 0 then
    w.deadline = int(now + num(m[1]) * 1000)
    w.cap = math.floor((now + num(m[1]) * 1000) / 1000)
  end
  return w
end

-- reached_deadline is when a place reached now frees its capacity unless claimed (ms, as text): the
-- position_expiry deadline, or sooner, gone_after past when its visitor was last seen (from now at
-- the earliest: a client that only watches serving_pos has gone_after to notice its turn).
local function reached_deadline(w, pos)
  if w.gone <= 0 then return w.deadline end
  local _, _, tsv = get_tok(pos)
  redis.call('HSET', K_TOK, int(pos), '0:' .. int(w.cap) .. ':' .. int(tsv))
  local d = (math.max(get_hb(pos), w.now_s) + w.gone) * 1000
  if w.cap > 0 and d > w.cap * 1000 then return w.deadline end
  return int(d)
end

-- decide serves a waiting position, or skips it when the visitor abandoned, or has not been heard
-- from for abandon_after (when set): a skipped visitor takes no capacity. Returns 1 if served.
local function decide(w, pos)
  if w.abandon > 0 and w.now_s - math.max(get_hb(pos), w.since) > w.abandon then
    set_state(pos, ST_SKIPPED)
    w.gave = w.gave + 1 -- counted by the caller, once (count_for_report)
    note_gone(pos, math.max(get_hb(pos), w.since))
    return 0
  end
  set_state(pos, ST_SERVED)
  redis.call('ZADD', K_ACTIVE, reached_deadline(w, pos), int(pos))
  return 1
end

-- drops builds, on first use within a call, what only drops need: the lottery's permutation and the
-- random method's pool. Every function defined at the top level costs each script call a closure
-- (Redis runs the whole script body per call), so the everyday path (a fifo queue without a lottery)
-- does not pay for these.
local drop_parts
local function drops()
  if drop_parts then return drop_parts end
  local d = {}
  d.encode5 = encode5
  function d.decode5(str)
    local a, b, c, e, f = string.byte(str, 1, 5)
    return (((a * 256 + b) * 256 + c) * 256 + e) * 256 + f
  end
  -- The lottery's permutation. prf is the round function: the first 32 bits of SHA-1 over the seed,
  -- the round and the half block, reduced to the half block's size; 8 rounds. Go's lottery.go is the
  -- same function, forwards; unpermute returns the x in [0, n) that the permutation maps to y.
  local function prf(seed, round, x, half)
    return tonumber(string.sub(redis.sha1hex(seed .. ':' .. round .. ':' .. x), 1, 8), 16) % half
  end
  function d.unpermute(seed, n, y)
    local half = 2
    while half * half < n do half = half * 2 end
    repeat
      local l, r = math.floor(y / half), y % half
      for i = 8, 1, -1 do
        -- One step at a time: the embedded store's Lua gets "l, r = f(l), l" wrong.
        local prev = (r - prf(seed, i, l, half)) % half
        r = l
        l = prev
      end
      y = l * half + r
    until y < n
    return y
  end
  -- pos_of_rank returns the position served at a rank of the lottery lot ({lo, n, seed}).
  function d.pos_of_rank(lot, rank)
    if lot.n > 0 and rank > lot.lo and rank <= lot.lo + lot.n then
      return lot.lo + 1 + d.unpermute(lot.seed, lot.n, rank - lot.lo - 1)
    end
    return rank
  end
  -- The random method's pool: slots 0 .. pool_m-1 hold the positions a draw picks from.
  function d.pool_get(i, base, lot)
    local str = redis.call('GETRANGE', K_POOL, i * 5, i * 5 + 4)
    local v = 0
    if string.len(str) == 5 then v = d.decode5(str) end
    if v == 0 then return d.pos_of_rank(lot, base + i + 1) end
    return v
  end
  function d.pool_set(i, v)
    redis.call('SETRANGE', K_POOL, i * 5, d.encode5(v))
  end
  -- pool_reset makes every visitor behind the serving rank the pool (switching to the random method).
  function d.pool_reset()
    redis.call('DEL', K_POOL)
    local serving, counter = num(redis.call('GET', K_SERVING)), num(redis.call('GET', K_COUNTER))
    redis.call('HSET', K_META, 'pool_base', serving, 'pool_m', math.max(0, counter - serving))
  end
  -- serve_random serves up to n visitors, each drawn uniformly from the pool (a draw takes a slot and
  -- moves the last slot into it). Positions no longer waiting are dropped from the pool as they are
  -- drawn. Randomness: SHA-1 over the queue's secret and a draw counter, unknown to visitors.
  function d.serve_random(now, n)
    local m = redis.call('HMGET', K_META, 'pool_base', 'pool_m', 'secret', 'draws')
    local base, size, secret, draws = num(m[1]), num(m[2]), m[3] or '', num(m[4])
    local w = waiter(now)
    local served, skipped, steps = 0, 0, 0
    while served < n and size > 0 and steps < MAX_ADVANCE do
      steps = steps + 1
      draws = draws + 1
      local i = tonumber(string.sub(redis.sha1hex(secret .. ':draw:' .. draws), 1, 13), 16) % size
      local pos = d.pool_get(i, base, w.lot)
      if i ~= size - 1 then d.pool_set(i, d.pool_get(size - 1, base, w.lot)) end
      size = size - 1
      if get_state(pos) == ST_WAITING then
        if decide(w, pos) == 1 then
          served = served + 1
          redis.call('APPEND', K_DRAWN, d.encode5(pos))
        else
          skipped = skipped + 1
        end
      end
    end
    if size == 0 then redis.call('DEL', K_POOL) end
    redis.call('HSET', K_META, 'pool_m', size, 'draws', draws)
    count_for_report('r_gave', w.gave)
    return served, skipped
  end

  -- open_if_due opens a scheduled queue once opens_at has come (store clock): with shuffle, the pre-queue
  -- (everyone behind the serving rank) gets its lottery order. Returns whether the queue is open and may
  -- serve. The seed is the queue's secret over the pre-queue's bounds: unknown to visitors, and the same
  -- for the same pre-queue, so a draw a failover lost is drawn again alike. With redis.wait_replicas
  -- (ack_draws) the draw serves nobody until the tick has seen it on the replicas (draw_ack, failover.go):
  -- a draw lost before then was never acted on.
  function d.open_if_due(now)
    local m = redis.call('HMGET', K_META, 'opened', 'opens_at', 'shuffle', 'secret', 'draw_ack', 'ack_draws')
    if num(m[1]) > 0 then return m[5] ~= '0' end
    if num(m[2]) > now then return false end
    local counter, serving = num(redis.call('GET', K_COUNTER)), num(redis.call('GET', K_SERVING))
    redis.call('HSET', K_META, 'opened', now)
    if m[3] == '1' and counter - serving > 1 then
      redis.call('HSET', K_META, 'pre_lo', serving, 'pre_n', counter - serving,
        'seed', redis.sha1hex((m[4] or '') .. ':lottery:' .. serving .. ':' .. (counter - serving)))
      if m[6] == '1' then
        redis.call('HSET', K_META, 'draw_ack', '0')
        return false
      end
    end
    return true
  end

  drop_parts = d
  return d
end

-- serve_next moves the serving rank forward until n visitors are served, or it reaches stop_at (never
-- past the last assigned position). Positions already decided (drawn by the random method, or
-- abandoned while waiting) are passed over. Returns served, skipped.
local function serve_next(now, n, stop_at)
  local serving = num(redis.call('GET', K_SERVING))
  stop_at = math.min(stop_at, num(redis.call('GET', K_COUNTER)))
  if serving >= stop_at or n <= 0 then return 0, 0 end
  local w = waiter(now)
  local served, skipped, steps = 0, 0, 0
  while served < n and serving < stop_at and steps < MAX_ADVANCE do
    serving = serving + 1
    steps = steps + 1
    local pos = serving
    if w.lot.n > 0 then pos = drops().pos_of_rank(w.lot, serving) end
    if get_state(pos) ~= ST_WAITING then
      skipped = skipped + 1
    elseif decide(w, pos) == 1 then
      served = served + 1
    else
      skipped = skipped + 1
    end
  end
  redis.call('SET', K_SERVING, int(serving))
  count_for_report('r_gave', w.gave)
  return served, skipped
end

-- gate reads the settings the inlet and a join decide on, in one call (each field read costs):
-- opened, paused, sold_out, method, capacity, rate, join_from, closes_at, pool_m, draw_ack,
-- places_per_ip.
local function gate()
  return redis.call('HMGET', K_META, 'opened', 'paused', 'sold_out', 'method', 'capacity', 'rate',
    'join_from', 'closes_at', 'pool_m', 'draw_ack', 'places_per_ip')
end

-- inlet is the capacity inlet: expire what is due, open a scheduled queue when its time has come, then
-- serve as many as the method, capacity and release rate allow. Nobody is served before the opening,
-- while the queue is paused or while it is sold out. It is idempotent: replicas calling it at once serve
-- each free slot once. m is gate()'s answer when the caller has read it already.
local function inlet(now, m)
  local expired = expire_due(now)
  m = m or gate()
  if num(m[1]) == 0 and not drops().open_if_due(now) then return 0, 0, expired end
  if m[2] == '1' or m[3] == '1' or m[10] == '0' then return 0, 0, expired end
  local method = m[4] or 'fifo'
  local served, skipped = 0, 0
  if method == 'passthrough' then
    -- Everyone is served at once, whatever the capacity and rate.
    served, skipped = serve_next(now, math.huge, math.huge)
  else
    local free = num(m[5]) - redis.call('ZCARD', K_ACTIVE)
    local rate = num(m[6])
    local available = free
    local tokens, size
    if rate > 0 then
      -- Token bucket: refills at rate per minute, holds at most one second's worth (at least 1), so no
      -- window of a minute ever serves much more than rate.
      size = math.max(1, math.ceil(rate / 60))
      local b = redis.call('HMGET', K_META, 'bucket', 'bucket_at')
      local at = num(b[2])
      tokens = size
      if at > 0 then
        tokens = math.min(size, num(b[1]) + (now - at) * rate / 60000)
      end
      available = math.min(free, math.floor(tokens))
    end
    if available > 0 then
      if method == 'random' then
        served, skipped = drops().serve_random(now, available)
      else
        served, skipped = serve_next(now, available, math.huge)
      end
    end
    if rate > 0 then
      redis.call('HSET', K_META, 'bucket', tostring(tokens - served), 'bucket_at', now)
    end
  end
  if served > 0 then redis.call('HINCRBY', K_META, 'unclaimed', int(served)) end
  if served + skipped > 0 then redis.call('HINCRBY', K_META, 'moved', int(served + skipped)) end
  return served, skipped, expired
end

-- raise_counter: after a failover the store may have lost the last positions it handed out (replication
-- is asynchronous), though their visitors hold them: a request id carries its position. arg is
-- "<epoch>:<floor>", floor the highest position the calling replica knows was handed out in that
-- incarnation of the queue (its own joins, what its snapshots read, the request ids visitors showed it):
-- the counter resumes above it, so no place is handed out twice. The restored places count as joined
-- now (a heartbeat, and a slot in the random method's pool); past MAX_RESTORE places they are only
-- counted. Returns how many were restored. counter is the counter when the caller has read it already.
local MAX_RESTORE = 10000
local function raise_counter(now, arg, counter)
  local epoch, f = string.match(arg or '', '^(.*):(%d+)$')
  local floor = tonumber(f) or 0
  if floor == 0 then return 0 end
  counter = counter or num(redis.call('GET', K_COUNTER))
  if floor <= counter or floor > 1099511627775 then return 0 end
  if redis.call('HGET', K_META, 'epoch') ~= epoch then return 0 end
  redis.call('SET', K_COUNTER, int(floor))
  local n = floor - counter
  if n <= MAX_RESTORE then
    local s = math.floor(now / 1000)
    local hb = string.char(math.floor(s / 16777216) % 256, math.floor(s / 65536) % 256,
      math.floor(s / 256) % 256, s % 256)
    redis.call('SETRANGE', K_HB, int((counter + 1) * 4), string.rep(hb, n))
    if redis.call('HGET', K_META, 'method') == 'random' then
      local slot = meta_num('pool_m')
      for pos = counter + 1, floor do
        drops().pool_set(slot, pos)
        slot = slot + 1
      end
      redis.call('HSET', K_META, 'pool_m', slot)
    end
  end
  redis.call('HINCRBY', K_META, 'restored', int(n))
  return n
end

-- take_place gives a new visitor the next position (assign, invite): m is gate()'s answer, tsv the time
-- of the Turnstile check passed to join (0 none).
local function take_place(now, m, tsv)
  local pos = redis.call('INCR', K_COUNTER)
  set_hb(pos, math.floor(now / 1000))
  if tsv > 0 then
    redis.call('HSET', K_TOK, int(pos), '0:0:' .. int(tsv))
  end
  if m[4] == 'random' then
    drops().pool_set(num(m[9]), pos)
    m[9] = num(m[9]) + 1 -- the next place of the same call goes after this one
    redis.call('HSET', K_META, 'pool_m', m[9])
  end
  return pos
end

-- issue gives a served position (ST_SERVED) its token, or returns the token of an ST_TOKEN position,
-- which the caller has checked is still live. Returns iat, exp, tsv, and 1 if the token is new.
local function issue(pos, now)
  local iat, exp, tsv = get_tok(pos)
  if get_state(pos) == ST_TOKEN then
    return iat, exp, tsv, 0
  end
  iat = math.floor(now / 1000)
  exp = iat + meta_num('ttl')
  local p = int(pos)
  redis.call('HSET', K_TOK, p, int(iat) .. ':' .. int(exp) .. ':' .. int(tsv))
  redis.call('ZADD', K_ACTIVE, int(exp * 1000), p)
  redis.call('HINCRBY', K_META, 'unclaimed', -1)
  set_state(pos, ST_TOKEN)
  return iat, exp, tsv, 1
end
