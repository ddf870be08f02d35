-- 0001: admissions and bids, one row per id. Every event of an id is merged into its row: the
-- state only moves forward (edgeq_state_rank), a time or a field once known is kept. Applying an
-- event twice, or two events in either order, gives the same row.

CREATE FUNCTION edgeq_state_rank(state text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE state
    WHEN 'admitted' THEN 0 WHEN 'accepted' THEN 0
    WHEN 'committed' THEN 1
    WHEN 'released' THEN 2 WHEN 'withdrawn' THEN 2
    WHEN 'cancelled' THEN 3
    ELSE -1 END
$$;

CREATE TABLE edgeq_admissions (
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
CREATE INDEX edgeq_admissions_by_time ON edgeq_admissions (admitted_at DESC, id DESC);
CREATE INDEX edgeq_admissions_by_buyer ON edgeq_admissions (buyer, admitted_at DESC, id DESC);
CREATE INDEX edgeq_admissions_by_product ON edgeq_admissions (product_id, state);

CREATE TABLE edgeq_bids (
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
CREATE INDEX edgeq_bids_by_bidder ON edgeq_bids (bidder, bid_at DESC, id DESC);
CREATE INDEX edgeq_bids_by_auction ON edgeq_bids (auction_id, state);
