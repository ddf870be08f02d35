-- lib.lua: prepended to the report's scripts, after clock.lua (internal/store/luascript).
--
-- A series field of a day hash (series.go) holds one four-byte big-endian number per minute of the
-- day. get_slot and set_slot read and write minute i of such a string.

local function get_slot(v, i)
  local o = i * 4
  if not v or string.len(v) < o + 4 then return 0 end
  local a, b, c, d = string.byte(v, o + 1, o + 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function set_slot(v, i, n)
  v = v or ''
  local o = i * 4
  if n > 4294967295 then n = 4294967295 end
  if n < 0 then n = 0 end
  local bytes = string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256)
  if string.len(v) < o then v = v .. string.rep('\0', o - string.len(v)) end
  return string.sub(v, 1, o) .. bytes .. string.sub(v, o + 5)
end

-- Waiting times are records of eight bytes: the minute of the day and the bucket (two bytes each),
-- then the count (four).
local function get_u16(v, o)
  local a, b = string.byte(v, o + 1, o + 2)
  return a * 256 + b
end

local function put_u16(n)
  return string.char(math.floor(n / 256) % 256, n % 256)
end
