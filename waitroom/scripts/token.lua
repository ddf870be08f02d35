-- token.lua: issue the access token of a served position (generate_token), or return its live one.
-- KEYS: see lib.lua
-- ARGV[1] position   ARGV[2] epoch the caller's request id was minted for
-- returns {code, state, iat, exp, tsv, fresh}
--   code 0 token (iat, exp, tsv; fresh 1 if issued by this call); 1 unknown (no queue, other epoch, position never assigned);
--   2 not yet served; 3 gone (state says why: completed, abandoned, expired, skipped)
if redis.call('EXISTS', K_META) == 0 then return {1, 0, 0, 0, 0, 0} end
local pos = tonumber(ARGV[1])
if redis.call('HGET', K_META, 'epoch') ~= ARGV[2] or pos > num(redis.call('GET', K_COUNTER)) then
  return {1, 0, 0, 0, 0, 0}
end
local now = now_ms()
inlet(now)
local st = get_state(pos)
if st == ST_TOKEN then
  local _, exp = get_tok(pos)
  if exp * 1000 <= now then
    leave_active(pos, ST_EXPIRED)
    count_for_report('r_exp', 1)
    st = ST_EXPIRED
  end
end
if st == ST_WAITING then return {2, st, 0, 0, 0, 0} end
if st ~= ST_SERVED and st ~= ST_TOKEN then return {3, st, 0, 0, 0, 0} end
local iat, exp, tsv, fresh = issue(pos, now)
return {0, ST_TOKEN, iat, exp, tsv, fresh}
