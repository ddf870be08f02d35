-- finish.lua: end a visitor's session (update_token_status, or the origin's Edgeq-Command): COMPLETED or
-- ABANDONED. A token is revoked (recorded for replicas, which also hear it by pub/sub) and its capacity
-- is freed at once: the inlet runs before returning.
-- KEYS: see lib.lua
-- ARGV[1] position   ARGV[2] epoch   ARGV[3] final state: 3 completed, 4 abandoned
-- ARGV[4] oldest revocation worth keeping, in ms before now (the longest token lifetime plus leeway)
-- returns {code, state, revoked_at_ms}
--   code 0 done (revoked_at_ms > 0 when a token was revoked); 1 unknown; 2 a waiting visitor cannot
--   complete; 3 already finished (state says how; nothing changed but a touch: a WAIT after a call
--   made again, because the replicas did not confirm the first, then covers the first one's writes)
if redis.call('EXISTS', K_META) == 0 then return {1, 0, 0} end
local pos = tonumber(ARGV[1])
if redis.call('HGET', K_META, 'epoch') ~= ARGV[2] or pos > num(redis.call('GET', K_COUNTER)) then
  return {1, 0, 0}
end
local final = tonumber(ARGV[3])
local now = now_ms()
local st = get_state(pos)
if st == ST_WAITING then
  if final == ST_COMPLETED then return {2, st, 0} end
  -- An abandoning waiter is skipped when reached.
  set_state(pos, ST_SKIPPED)
  return {0, ST_SKIPPED, 0}
end
if st ~= ST_SERVED and st ~= ST_TOKEN then
  redis.call('HINCRBY', K_META, 'finish_touch', 1)
  return {3, st, 0}
end
leave_active(pos, final)
-- A session that ended before its deadline: the waiting time estimate no longer assumes every visitor
-- stays until the token expires.
redis.call('HINCRBY', K_META, 'early', 1)
local revoked = 0
if st == ST_TOKEN then
  redis.call('ZADD', K_REVOKED, now, pos)
  redis.call('ZREMRANGEBYSCORE', K_REVOKED, '-inf', now - tonumber(ARGV[4]))
  revoked = now
end
inlet(now)
return {0, final, revoked}
