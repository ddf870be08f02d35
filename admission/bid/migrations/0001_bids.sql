-- 0001: bids, one row per id, merged from its events (edgeq_state_rank, edgeq's own).
-- IF NOT EXISTS: ledgers migrated by older builds have this table and its indexes already (edgeq's
-- own migration 0001 made them then); they keep them as they are.

CREATE TABLE IF NOT EXISTS edgeq_bids (
  id           text PRIMARY KEY,
  auction_id   text NOT NULL,
  bidder       text NOT NULL DEFAULT '',   -- pseudonym
  amount_cents bigint NOT NULL DEFAULT 0,
  state        text NOT NULL,              -- accepted, committed, withdrawn
  bid_at       timestamptz,
  committed_at timestamptz,
  withdrawn_at timestamptz,
  written_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS edgeq_bids_by_bidder ON edgeq_bids (bidder, bid_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS edgeq_bids_by_auction ON edgeq_bids (auction_id, state);
