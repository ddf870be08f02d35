-- renew.lua: store the new deadlines of renewed sessions (session_renewal), a batch from one replica's
-- gate: the gate re-issues tokens without a store call and the tick sends them here.
-- KEYS: see lib.lua
-- ARGV[1] the queue epoch the tokens were issued in; then per session: position, iat, exp (s), tsv
-- A live session gets the later deadline and is counted once, as before. One the store expired while its
-- renewal was on the way is live again (its renewed token is valid). A completed or abandoned session
-- (revoked) stays ended.
-- returns {number of sessions extended}
if redis.call('EXISTS', K_META) == 0 or redis.call('HGET', K_META, 'epoch') ~= ARGV[1] then return {0} end
local now_s = math.floor(now_ms() / 1000)
local counter = num(redis.call('GET', K_COUNTER))
local n = 0
for i = 2, #ARGV - 3, 4 do
  local pos, exp = tonumber(ARGV[i]), tonumber(ARGV[i + 2])
  if pos and exp and pos > 0 and pos <= counter and exp > now_s then
    local st = get_state(pos)
    local _, old = get_tok(pos)
    if (st == ST_TOKEN and exp > old) or st == ST_EXPIRED then
      redis.call('HSET', K_TOK, pos, ARGV[i + 1] .. ':' .. exp .. ':' .. ARGV[i + 3])
      redis.call('ZADD', K_ACTIVE, exp * 1000, pos)
      set_state(pos, ST_TOKEN)
      n = n + 1
    end
  end
end
return {n}
