-- invites.lua: the admin API's changes to a queue's invitations, and the undoing of a use.
-- KEYS: see lib.lua
-- ARGV[1] "add": ARGV[2] created (s), ARGV[3] expires (s), ARGV[4] front (0/1), ARGV[5..] code hashes
--         "delete": ARGV[2] code hash
--         "unuse": ARGV[2] code hash, ARGV[3] the position its use took: the store's replicas did not
--         confirm the use (redis.wait_replicas, failover.go), so it is undone: the invitation is unused
--         again and the place it took is given up (a visitor never saw it)
-- returns {code}: 0 ok; 1 queue not found; 2 no such invitation (delete, or unuse of another use)
if redis.call('EXISTS', K_META) == 0 then return {1} end
if ARGV[1] == 'unuse' then
  local v = redis.call('HGET', K_INV, ARGV[2])
  if not v then return {2} end
  local created, expires, front, used_pos = string.match(v, '^(%d+):(%d+):(%d):(%d+):%d+$')
  if used_pos ~= ARGV[3] then return {2} end
  redis.call('HSET', K_INV, ARGV[2], created .. ':' .. expires .. ':' .. front .. ':0:0')
  redis.call('HINCRBY', K_META, 'inv_used', -1)
  local pos = tonumber(ARGV[3])
  local st = get_state(pos)
  if st == ST_SERVED or st == ST_TOKEN then
    leave_active(pos, ST_ABANDONED)
    inlet(now_ms())
  elseif st == ST_WAITING then
    set_state(pos, ST_SKIPPED)
  end
  return {0}
end
if ARGV[1] == 'add' then
  local value = ARGV[2] .. ':' .. ARGV[3] .. ':' .. ARGV[4] .. ':0:0'
  local added = 0
  for i = 5, #ARGV do
    added = added + redis.call('HSETNX', K_INV, ARGV[i], value)
  end
  redis.call('HINCRBY', K_META, 'inv_total', added)
  return {0}
end
local v = redis.call('HGET', K_INV, ARGV[2])
if not v then return {2} end
redis.call('HDEL', K_INV, ARGV[2])
redis.call('HINCRBY', K_META, 'inv_total', -1)
if not string.match(v, ':0:%d+$') then
  redis.call('HINCRBY', K_META, 'inv_used', -1)
end
return {0}
