-- heartbeat.lua: record that visitors are still there (a batch from one replica's polls and pages).
-- KEYS: see lib.lua
-- ARGV[1] the hidden grace (s): how long a page gone into the background counts as there
-- ARGV[2..] a position, then what was heard: nothing (a poll), "h" (the page went into the
--   background), "l" (the page is closing); then "r" when the caller saw the place reached
-- returns the number recorded
--
-- hb is when the visitor counts as seen until (lib.lua): the last word heard sets it. A reached place
-- without a token (gone_after on) gets its deadline moved to gone_after past that, within
-- position_expiry. Most of a batch is waiters' polls: a plain number, one SETRANGE each.
if redis.call('EXISTS', K_META) == 0 then return 0 end
local now_s = math.floor(now_ms() / 1000)
local counter = num(redis.call('GET', K_COUNTER))
local gone = meta_num('gone')
local hidden = tonumber(ARGV[1]) or 0
local now_hb = string.char(math.floor(now_s / 16777216) % 256, math.floor(now_s / 65536) % 256,
  math.floor(now_s / 256) % 256, now_s % 256)
local n = 0
for i = 2, #ARGV do
  local pos, kind, reached = tonumber(ARGV[i]), '', ''
  if not pos then
    local p
    p, kind, reached = string.match(ARGV[i], '^(%d+)([hl]?)(r?)$')
    pos = tonumber(p)
  end
  if pos and pos > 0 and pos <= counter then
    local seen = now_s
    if kind == 'h' then
      seen = now_s + hidden
      set_hb(pos, seen)
    else
      redis.call('SETRANGE', K_HB, int(pos * 4), now_hb)
    end
    if reached == 'r' and gone > 0 and get_state(pos) == ST_SERVED then
      local _, cap = get_tok(pos)
      local d = (seen + gone) * 1000
      if cap > 0 and d > cap * 1000 then d = cap * 1000 end
      redis.call('ZADD', K_ACTIVE, 'XX', int(d), int(pos))
    end
    n = n + 1
  end
end
return n
