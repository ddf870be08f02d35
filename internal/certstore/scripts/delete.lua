-- delete.lua: remove a key and every key under it as a directory ("a" holds "a/b", not "ab/c"), in
-- one step.
-- KEYS[1] the values (hash)   KEYS[2] when each was written (hash)
-- ARGV[1] the key
-- returns how many keys went
local n = 0
local dir = ARGV[1] .. '/'
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if f == ARGV[1] or string.sub(f, 1, string.len(dir)) == dir then
    redis.call('HDEL', KEYS[1], f)
    redis.call('HDEL', KEYS[2], f)
    n = n + 1
  end
end
return n
