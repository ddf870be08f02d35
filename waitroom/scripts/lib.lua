-- lib.lua: shared by every waiting-room script; the Go side prepends it to each operation's file.
--
-- Every script of a queue receives the same KEYS, all under the queue's hash tag {q:<id>}:
--   KEYS[1] meta     hash   settings (capacity, rate, ttl, pexp, abandon, abandon_since, turnstile, title,
--                           paused, epoch), rate bucket (bucket, bucket_at) and unclaimed (served, no token)
--   KEYS[2] counter  string last assigned position (positions start at 1)
--   KEYS[3] serving  string serving position (starts at 0, never decreases)
--   KEYS[4] active   zset   served and unfinished positions; score = deadline in ms (token expiry, or the
--                           position-expiry deadline before a token is issued; +inf for never)
--   KEYS[5] state    string one byte per position (offset = position), see the ST_ constants
--   KEYS[6] hb       string four bytes per position (offset = 4 * position): last heartbeat, unix seconds
--   KEYS[7] tok      hash   position -> "iat:exp:tsv" for positions with a token or a Turnstile time
--   KEYS[8] revoked  zset   position -> revocation time in ms, for replicas catching up on revocations
--
-- Time always comes from Redis TIME: one clock for every replica.

local K_META, K_COUNTER, K_SERVING, K_ACTIVE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_STATE, K_HB, K_TOK, K_REVOKED = KEYS[5], KEYS[6], KEYS[7], KEYS[8]

local ST_WAITING, ST_SERVED, ST_TOKEN, ST_COMPLETED = 0, 1, 2, 3
local ST_ABANDONED, ST_EXPIRED, ST_SKIPPED = 4, 5, 6

-- Bounds on the work one call may do; the inlet ticker picks up whatever is left.
local MAX_EXPIRE = 1000
local MAX_ADVANCE = 1000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function num(v)
  return tonumber(v) or 0
end

local function meta_num(field)
  return num(redis.call('HGET', K_META, field))
end

local function get_state(pos)
  local s = redis.call('GETRANGE', K_STATE, pos, pos)
  if s == '' then return ST_WAITING end
  return string.byte(s)
end

local function set_state(pos, st)
  redis.call('SETRANGE', K_STATE, pos, string.char(st))
end

local function get_hb(pos)
  local s = redis.call('GETRANGE', K_HB, pos * 4, pos * 4 + 3)
  if string.len(s) < 4 then return 0 end
  local a, b, c, d = string.byte(s, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function set_hb(pos, seconds)
  redis.call('SETRANGE', K_HB, pos * 4, string.char(
    math.floor(seconds / 16777216) % 256, math.floor(seconds / 65536) % 256,
    math.floor(seconds / 256) % 256, seconds % 256))
end

-- tok values are "iat:exp:tsv" (seconds).
local function get_tok(pos)
  local v = redis.call('HGET', K_TOK, pos)
  if not v then return 0, 0, 0 end
  local iat, exp, tsv = string.match(v, '^(%d+):(%d+):(%d+)$')
  return num(iat), num(exp), num(tsv)
end

-- leave_active ends a served position: removes it from the active set and records its final state.
local function leave_active(pos, final)
  local st = get_state(pos)
  if st == ST_SERVED then
    redis.call('HINCRBY', K_META, 'unclaimed', -1)
  end
  redis.call('ZREM', K_ACTIVE, pos)
  redis.call('HDEL', K_TOK, pos)
  set_state(pos, final)
end

-- expire_due ends served positions and tokens whose deadline has passed.
local function expire_due(now)
  local due = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', now, 'LIMIT', 0, MAX_EXPIRE)
  for _, member in ipairs(due) do
    leave_active(tonumber(member), ST_EXPIRED)
  end
  return #due
end

-- serve_next moves the serving position forward until n visitors are served, or it reaches stop_at
-- (never past the last assigned position). A waiter who abandoned, or whose last heartbeat is older
-- than abandon_after (when set), is skipped: it takes no capacity. Returns served, skipped.
local function serve_next(now, n, stop_at)
  local serving = num(redis.call('GET', K_SERVING))
  stop_at = math.min(stop_at, num(redis.call('GET', K_COUNTER)))
  local pexp = meta_num('pexp')
  local abandon = meta_num('abandon')
  local abandon_since = meta_num('abandon_since')
  local now_s = math.floor(now / 1000)
  local deadline = '+inf'
  if pexp > 0 then deadline = now + pexp * 1000 end
  local served, skipped, steps = 0, 0, 0
  while served < n and serving < stop_at and steps < MAX_ADVANCE do
    serving = serving + 1
    steps = steps + 1
    if get_state(serving) == ST_SKIPPED then
      skipped = skipped + 1
    elseif abandon > 0 and now_s - math.max(get_hb(serving), abandon_since) > abandon then
      set_state(serving, ST_SKIPPED)
      skipped = skipped + 1
    else
      set_state(serving, ST_SERVED)
      redis.call('ZADD', K_ACTIVE, deadline, serving)
      served = served + 1
    end
  end
  redis.call('SET', K_SERVING, serving)
  if served > 0 then
    redis.call('HINCRBY', K_META, 'unclaimed', served)
  end
  return served, skipped
end

-- inlet is the capacity inlet: expire what is due, then serve as many as capacity and the release
-- rate allow. It is idempotent: replicas calling it at once serve each free slot once.
local function inlet(now)
  local expired = expire_due(now)
  local free = meta_num('capacity') - redis.call('ZCARD', K_ACTIVE)
  if meta_num('paused') == 1 then free = 0 end
  local rate = meta_num('rate')
  local available = free
  local tokens, size
  if rate > 0 then
    -- Token bucket: refills at rate per minute, holds at most one second's worth (at least 1), so no
    -- window of a minute ever serves much more than rate.
    size = math.max(1, math.ceil(rate / 60))
    local at = meta_num('bucket_at')
    tokens = size
    if at > 0 then
      tokens = math.min(size, meta_num('bucket') + (now - at) * rate / 60000)
    end
    available = math.min(free, math.floor(tokens))
  end
  local served, skipped = 0, 0
  if available > 0 then
    served, skipped = serve_next(now, available, math.huge)
  end
  if rate > 0 then
    redis.call('HSET', K_META, 'bucket', tostring(tokens - served), 'bucket_at', now)
  end
  return served, skipped, expired
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
  redis.call('HSET', K_TOK, pos, iat .. ':' .. exp .. ':' .. tsv)
  redis.call('ZADD', K_ACTIVE, exp * 1000, pos)
  redis.call('HINCRBY', K_META, 'unclaimed', -1)
  set_state(pos, ST_TOKEN)
  return iat, exp, tsv, 1
end
