-- flush.lua: one tick's counts and gauges of one scope (a queue, a product, an auction), written into
-- the minute of the store's clock in the scope's day hash (series.go describes its fields).
-- KEYS[1] the scope's day hash ({q:<id>}:rep@<day>, ...)
-- KEYS[2] optional, under the same hash tag: a hash whose counters ARGV[4] moves here (a queue's meta,
--         where its scripts count what they decide themselves), or a key whose number is the gauge
--         ARGV[5] (a product's stock)
-- ARGV[1] the day's start, ms   ARGV[2] when the hash expires (unix seconds)
-- ARGV[3] gauges "name=value;name=value" ("" none)
-- ARGV[4] moves "series=field;..." (fields of KEYS[2] added to series, then zeroed; "" none)
-- ARGV[5] the gauge read from KEYS[2] ("" none)
-- ARGV[6] series whose first count of the day is timed (first:<series>), "," separated; "" none
-- ARGV[7] gauges whose fall to zero is timed (zero:<gauge>), "," separated; "" none
-- ARGV[8..] pairs: series, count to add ("w:<bucket>" adds to the minute's waiting-time bucket)
-- returns the minute of the day written
local K = KEYS[1]
local now = now_ms()
local minute = math.floor((now - tonumber(ARGV[1])) / 60000)
-- A replica's clock sits within moments of the store's: at midnight the day it named wins.
if minute < 0 then minute = 0 end
if minute > 1439 then minute = 1439 end
local wrote = false

local firsts = {}
for name in string.gmatch(ARGV[6], '[^,]+') do firsts[name] = true end

local function add(series, n)
  if n <= 0 then return end
  local b = string.match(series, '^w:(%d+)$')
  if b then
    redis.call('HINCRBY', K, 'w:' .. minute .. ':' .. b, n)
  else
    local v = redis.call('HGET', K, series)
    redis.call('HSET', K, series, set_slot(v, minute, get_slot(v, minute) + n))
    if firsts[series] then redis.call('HSETNX', K, 'first:' .. series, string.format('%d', now)) end
  end
  wrote = true
end

for i = 8, #ARGV - 1, 2 do
  add(ARGV[i], tonumber(ARGV[i + 1]) or 0)
end

if ARGV[4] ~= '' then
  for series, field in string.gmatch(ARGV[4], '([^=;]+)=([^;]+)') do
    local n = tonumber(redis.call('HGET', KEYS[2], field)) or 0
    if n ~= 0 then
      add(series, n)
      redis.call('HDEL', KEYS[2], field)
    end
  end
end

local gauges = ARGV[3]
if ARGV[5] ~= '' then
  local g = tonumber(redis.call('GET', KEYS[2])) or 0
  if gauges ~= '' then gauges = gauges .. ';' end
  gauges = gauges .. ARGV[5] .. '=' .. string.format('%d', g)
end
if gauges ~= '' then
  local last = redis.call('HGET', K, 'g')
  if last ~= gauges then
    local before = {}
    for name, value in string.gmatch(last or '', '([^=;]+)=(%-?%d+)') do before[name] = tonumber(value) end
    for name, value in string.gmatch(gauges, '([^=;]+)=(%-?%d+)') do
      local n = tonumber(value)
      if n ~= before[name] then
        local v = redis.call('HGET', K, name)
        redis.call('HSET', K, name, set_slot(v, minute, n + 1))
        if n == 0 and (before[name] or 0) > 0 and string.find(',' .. ARGV[7] .. ',', ',' .. name .. ',', 1, true) then
          local times = redis.call('HGET', K, 'zero:' .. name)
          local at = string.format('%d', now)
          if times then times = times .. ',' .. at else times = at end
          redis.call('HSET', K, 'zero:' .. name, times)
        end
      end
    end
    redis.call('HSET', K, 'g', gauges)
    wrote = true
  end
end

if wrote then redis.call('EXPIREAT', K, ARGV[2]) end
return minute
