-- index.lua: add a product or auction id to its kind's index and its spellings index, or remove it,
-- in one step (spellings.go).
-- KEYS[1] edgeq:{adm}:products or :auctions               the ids (set)
-- KEYS[2] edgeq:{adm}:spellings:products or :auctions     key (idmatch.GuardedKeys) -> ids, space-separated
-- ARGV[1] "add" or "remove"   ARGV[2] the id   ARGV[3..] the id's keys
-- returns 1
local id = ARGV[2]
local function without(list)
  local kept = {}
  for other in string.gmatch(list or '', '%S+') do
    if other ~= id then kept[#kept + 1] = other end
  end
  return kept
end
if ARGV[1] == 'add' then
  redis.call('SADD', KEYS[1], id)
else
  redis.call('SREM', KEYS[1], id)
end
for i = 3, #ARGV do
  local ids = without(redis.call('HGET', KEYS[2], ARGV[i]))
  if ARGV[1] == 'add' then ids[#ids + 1] = id end
  if #ids > 0 then
    redis.call('HSET', KEYS[2], ARGV[i], table.concat(ids, ' '))
  else
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return 1
