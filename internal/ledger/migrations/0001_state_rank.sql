-- 0001: what every kind's table shares. A row is merged from its id's events: its state only moves
-- forward, by edgeq_state_rank; a time or a field once known is kept. Applying an event twice, or
-- two events in either order, gives the same row. The kinds create their tables in their own
-- migrations (ledger.RegisterTable).
--
-- Databases migrated by builds older than that (this file was 0001_records.sql) have the stock
-- and bid tables from here already: those kinds' migrations create them only where they are
-- missing, so both schemas end the same.

CREATE FUNCTION edgeq_state_rank(state text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE state
    WHEN 'admitted' THEN 0 WHEN 'accepted' THEN 0
    WHEN 'committed' THEN 1
    WHEN 'released' THEN 2 WHEN 'withdrawn' THEN 2
    WHEN 'cancelled' THEN 3
    ELSE -1 END
$$;
