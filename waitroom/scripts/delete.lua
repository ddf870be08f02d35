-- delete.lua: remove a queue and everything of its visitors. Tokens of the queue stop verifying: a new
-- queue with the same id gets a new epoch.
-- KEYS: see lib.lua
-- returns 1 if the queue existed, else 0. UNLINK: a large queue's keys are freed in the background.
return redis.call('UNLINK', K_META, K_COUNTER, K_SERVING, K_ACTIVE, K_STATE, K_HB, K_TOK, K_REVOKED, K_POOL,
  K_DRAWN, K_INV, K_GONE) > 0 and 1 or 0
