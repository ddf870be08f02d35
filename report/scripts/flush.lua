-- flush.lua: one tick's counts and gauges of one scope (a queue, a product, an auction, an owner of a
-- registered scope: the same script for every kind), written into the minute of the store's clock in
-- the scope's day hashes (series.go describes their fields): the minute hash, and the quarter-hour
-- hash that long ranges read instead.
-- KEYS[1] the scope's minute hash of the day ({q:<id>}:rep@<day>, {p:<id>}, {a:<id>}, {<kind>:<id>})
-- KEYS[2] its quarter-hour hash of the day ({q:<id>}:repq@<day>, ...)
-- KEYS[3] optional, under the same hash tag: a hash whose counters ARGV[4] moves here (a queue's meta,
--         where its scripts count what they decide themselves), or a key whose number is the gauge
--         ARGV[5] (a product's stock)
-- ARGV[1] the day's start, ms   ARGV[2] when the hashes expire (unix seconds)
-- ARGV[3] gauges "name=value;name=value" ("" none)
-- ARGV[4] moves "series=field;..." (fields of KEYS[3] added to series, then zeroed; "" none)
-- ARGV[5] the gauge read from KEYS[3] ("" none)
-- ARGV[6] series whose first count of the day is timed (first:<series>), "," separated; "" none
-- ARGV[7] gauges whose fall to zero is timed (zero:<gauge>), "," separated; "" none
-- ARGV[8] peaks: gauges whose minute and quarter keep their highest value (the others keep their
--         last), "," separated; "" none
-- ARGV[9..] pairs: series, count to add ("w:<bucket>" adds served visitors to the minute's
--         waiting-time bucket, "u:<bucket>" visitors never served)
-- returns the minute of the day written
local K, Q = KEYS[1], KEYS[2]
local now = now_ms()
local minute = math.floor((now - tonumber(ARGV[1])) / 60000)
-- A replica's clock sits within moments of the store's: at midnight the day it named wins.
if minute < 0 then minute = 0 end
if minute > 1439 then minute = 1439 end
local quarter = math.floor(minute / 15)
local wrote = false

local firsts = {}
for name in string.gmatch(ARGV[6], '[^,]+') do firsts[name] = true end

-- count adds n to the series' minute and quarter; set_gauge writes a gauge's value (plus one) into both.
local function count(series, n)
  local v = redis.call('HGET', K, series)
  redis.call('HSET', K, series, set_slot(v, minute, get_slot(v, minute) + n))
  v = redis.call('HGET', Q, series)
  redis.call('HSET', Q, series, set_slot(v, quarter, get_slot(v, quarter) + n))
end

local function set_gauge(name, n)
  redis.call('HSET', K, name, set_slot(redis.call('HGET', K, name), minute, n + 1))
  redis.call('HSET', Q, name, set_slot(redis.call('HGET', Q, name), quarter, n + 1))
end

-- set_peak keeps the highest value of the minute and of the quarter; fresh tells, for each, whether
-- nothing of this minute (quarter) was written yet.
local function set_peak(name, n, fresh_minute, fresh_quarter)
  local v = redis.call('HGET', K, name)
  if fresh_minute or get_slot(v, minute) < n + 1 then
    redis.call('HSET', K, name, set_slot(v, minute, n + 1))
  end
  v = redis.call('HGET', Q, name)
  if fresh_quarter or get_slot(v, quarter) < n + 1 then
    redis.call('HSET', Q, name, set_slot(v, quarter, n + 1))
  end
end

-- waits holds this tick's waiting times by family: "w" the served visitors', "u" those of visitors
-- never served (they gave up, or were turned away), kept apart so that the served percentiles stay
-- what they were and everyone's are the two merged.
local waits = {w = {}, u = {}}
local function add(series, n)
  if n <= 0 then return end
  local family, b = string.match(series, '^([wu]):(%d+)$')
  if family then
    local list = waits[family]
    list[#list + 1] = {tonumber(b), n}
  else
    count(series, n)
    if firsts[series] then redis.call('HSETNX', Q, 'first:' .. series, string.format('%d', now)) end
  end
  wrote = true
end

for i = 9, #ARGV - 1, 2 do
  add(ARGV[i], tonumber(ARGV[i + 1]) or 0)
end

if ARGV[4] ~= '' then
  for series, field in string.gmatch(ARGV[4], '([^=;]+)=([^;]+)') do
    local n = tonumber(redis.call('HGET', KEYS[3], field)) or 0
    if n ~= 0 then
      add(series, n)
      redis.call('HDEL', KEYS[3], field)
    end
  end
end

-- Waiting times, in the quarter-hour hash: the hour's field of a family ("w:<hour>", "u:<hour>")
-- holds records of (minute of the day, bucket, count), appended in time order, so this minute's
-- records are at its end.
local function write_waits(family, list)
  if #list == 0 then return end
  local field = family .. ':' .. math.floor(minute / 60)
  local v = redis.call('HGET', Q, field) or ''
  local found = {}
  local i = string.len(v) - 8
  while i >= 0 do
    if get_u16(v, i) ~= minute then break end
    found[get_u16(v, i + 2)] = i
    i = i - 8
  end
  for _, w in ipairs(list) do
    local at = found[w[1]]
    if at then
      local n = get_slot(string.sub(v, at + 5, at + 8), 0) + w[2]
      v = string.sub(v, 1, at + 4) .. set_slot('', 0, n) .. string.sub(v, at + 9)
    else
      found[w[1]] = string.len(v)
      v = v .. put_u16(minute) .. put_u16(w[1]) .. set_slot('', 0, w[2])
    end
  end
  redis.call('HSET', Q, field, v)
end
write_waits('w', waits.w)
write_waits('u', waits.u)

local gauges = ARGV[3]
if ARGV[5] ~= '' then
  local g = tonumber(redis.call('GET', KEYS[3])) or 0
  if gauges ~= '' then gauges = gauges .. ';' end
  gauges = gauges .. ARGV[5] .. '=' .. string.format('%d', g)
end
-- "g" is "<minute>|name=value;...": the gauges last written and their minute. Nothing is written while
-- they stand still within a minute; a new minute writes the peaks again.
if gauges ~= '' then
  local state = minute .. '|' .. gauges
  local last = redis.call('HGET', K, 'g')
  if last ~= state then
    local last_minute, last_list = string.match(last or '', '^(%d+)|(.*)$')
    last_minute = tonumber(last_minute)
    local fresh_minute = last_minute ~= minute
    local fresh_quarter = last_minute == nil or math.floor(last_minute / 15) ~= quarter
    local peaks = {}
    for name in string.gmatch(ARGV[8], '[^,]+') do peaks[name] = true end
    local before = {}
    for name, value in string.gmatch(last_list or '', '([^=;]+)=(%-?%d+)') do before[name] = tonumber(value) end
    for name, value in string.gmatch(gauges, '([^=;]+)=(%-?%d+)') do
      local n = tonumber(value)
      if peaks[name] then
        if fresh_minute or n ~= before[name] then set_peak(name, n, fresh_minute, fresh_quarter) end
      elseif n ~= before[name] then
        set_gauge(name, n)
      end
      if n == 0 and (before[name] or 0) > 0 and string.find(',' .. ARGV[7] .. ',', ',' .. name .. ',', 1, true) then
        local times = redis.call('HGET', Q, 'zero:' .. name)
        local at = string.format('%d', now)
        if times then times = times .. ',' .. at else times = at end
        redis.call('HSET', Q, 'zero:' .. name, times)
      end
    end
    redis.call('HSET', K, 'g', state)
    wrote = true
  end
end

if wrote then
  redis.call('EXPIREAT', K, ARGV[2])
  redis.call('EXPIREAT', Q, ARGV[2])
end
return minute
