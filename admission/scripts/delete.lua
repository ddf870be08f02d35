-- delete.lua: an operator deletes an admin record (records.go) with its index entries. Every key is
-- under the owner's hash tag.
-- KEYS[1] the records of the id's day   KEYS[2] the ids of that day   KEYS[3] the owner's users
-- KEYS[4] stock: the unsettled set (bids: another of the keys, unread)
-- ARGV[1] id   ARGV[2] the record's user   ARGV[3] 1: stock (the record is the scripts' own, with its
--   orphan mark; an unsettled admission's is not deleted: its release and commit need it)
-- returns 1 deleted, 0 there was no record, -1 the admission is unsettled
local id, user = ARGV[1], ARGV[2]
if ARGV[3] == '1' and redis.call('ZSCORE', KEYS[4], id) then return -1 end
local n = redis.call('HDEL', KEYS[1], id)
if ARGV[3] == '1' then redis.call('HDEL', KEYS[1], id .. ':orphan') end
redis.call('LREM', KEYS[2], -1, id)
user_index_drop(KEYS[3], user, id)
return n
