-- advance.lua: the inlet tick every replica runs for every queue, and the snapshot it serves polls from.
-- KEYS: see lib.lua
-- ARGV[1] revocations since: ms; revocations with a later time are returned
-- returns {code, counter, serving, active, unclaimed, now_ms, settings, revocations}
--   code 0 ok; 1 queue not found
--   settings: {epoch, capacity, rate, ttl, pexp, abandon, turnstile, paused, title}
--   revocations: flat {position, time_ms, ...}
if redis.call('EXISTS', K_META) == 0 then return {1} end
local now = now_ms()
inlet(now)
local m = redis.call('HMGET', K_META, 'epoch', 'capacity', 'rate', 'ttl', 'pexp', 'abandon', 'turnstile',
  'paused', 'title', 'unclaimed')
local revocations = redis.call('ZRANGEBYSCORE', K_REVOKED, '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, 10000)
return {0, num(redis.call('GET', K_COUNTER)), num(redis.call('GET', K_SERVING)), redis.call('ZCARD', K_ACTIVE),
  num(m[10]), now, {m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8] or '0', m[9]}, revocations}
