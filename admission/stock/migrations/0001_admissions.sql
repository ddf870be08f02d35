-- 0001: stock admissions, one row per id, merged from its events (edgeq_state_rank, edgeq's own).
-- IF NOT EXISTS: ledgers migrated by older builds have this table and its indexes already (edgeq's
-- own migration 0001 made them then); they keep them as they are.

CREATE TABLE IF NOT EXISTS edgeq_admissions (
  id           text PRIMARY KEY,
  product_id   text NOT NULL,
  buyer        text NOT NULL DEFAULT '',   -- pseudonym: never the shop's user id
  quantity     bigint NOT NULL DEFAULT 0,
  state        text NOT NULL,              -- admitted, committed, released, cancelled
  admitted_at  timestamptz,
  committed_at timestamptz,
  released_at  timestamptz,
  cancelled_at timestamptz,
  written_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS edgeq_admissions_by_time ON edgeq_admissions (admitted_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS edgeq_admissions_by_buyer ON edgeq_admissions (buyer, admitted_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS edgeq_admissions_by_product ON edgeq_admissions (product_id, state);
