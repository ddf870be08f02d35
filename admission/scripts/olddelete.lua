-- olddelete.lua: an operator deletes an admin record of the builds before the records moved under
-- their owners' hash tags (oldrecords.go), with its index entries. Every key is under the {adm} tag.
-- KEYS[1] the records hash   KEYS[2] the index by time   KEYS[3] the index by user (user -> ids)
-- KEYS[4] the record's key of earlier builds   KEYS[5] the user's index of earlier builds
-- ARGV[1] id   ARGV[2] the record's user
-- returns the number of records deleted (0: there was none)
local id, user = ARGV[1], ARGV[2]
local n = redis.call('HDEL', KEYS[1], id) + redis.call('DEL', KEYS[4])
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[5], id)
user_index_drop(KEYS[3], user, id)
return n
