-- 0001: raffle entries, one row per id, merged like edgeq's own rows: the state only moves forward
-- (edgeq_state_rank), a time or a field once known is kept.
CREATE TABLE edgeq_raffle_entries (
  id           text PRIMARY KEY,
  drawing_id   text NOT NULL,
  entrant      text NOT NULL DEFAULT '',   -- pseudonym: never the shop's user id
  state        text NOT NULL,              -- admitted, committed, released
  entered_at   timestamptz,
  committed_at timestamptz,
  released_at  timestamptz,
  written_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edgeq_raffle_entries_by_entrant ON edgeq_raffle_entries (entrant, entered_at DESC, id DESC);
CREATE INDEX edgeq_raffle_entries_by_drawing ON edgeq_raffle_entries (drawing_id, state);
