package ledger

// Writing to the ledger: a batch's events folded into one row per id (merge, as the SQL upserts do:
// a field once known is kept, a state only moves to a higher Rank), then upserted in one
// transaction, in id order, with the rows of registered tables written by their tables in the same
// transaction; and Refused, which tells a write that would fail again from a server that cannot be
// reached.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Rank orders states: an id's state only moves to a higher rank (edgeq_state_rank in SQL).
func Rank(state string) int {
	switch state {
	case "admitted", "accepted":
		return 0
	case "committed":
		return 1
	case "released", "withdrawn":
		return 2
	case "cancelled":
		return 3
	}
	return -1
}

func first(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	return a
}

// higher is the state of higher Rank, a on a tie.
func higher(a, b string) string {
	if Rank(b) > Rank(a) {
		return b
	}
	return a
}

// merge folds b into a (same id), as the SQL upsert does: a field once known is kept (cmp.Or, first),
// the state of higher Rank wins.
func (a Admission) merge(b Admission) Admission {
	a.ProductID, a.Buyer, a.Quantity = cmp.Or(a.ProductID, b.ProductID), cmp.Or(a.Buyer, b.Buyer), cmp.Or(a.Quantity, b.Quantity)
	a.State = higher(a.State, b.State)
	a.AdmittedAt, a.CommittedAt = first(a.AdmittedAt, b.AdmittedAt), first(a.CommittedAt, b.CommittedAt)
	a.ReleasedAt, a.CancelledAt = first(a.ReleasedAt, b.ReleasedAt), first(a.CancelledAt, b.CancelledAt)
	return a
}

// merge folds b into a (same id): see Admission.merge.
func (a Bid) merge(b Bid) Bid {
	a.AuctionID, a.Bidder, a.AmountCents = cmp.Or(a.AuctionID, b.AuctionID), cmp.Or(a.Bidder, b.Bidder), cmp.Or(a.AmountCents, b.AmountCents)
	a.State = higher(a.State, b.State)
	a.BidAt, a.CommittedAt, a.WithdrawnAt = first(a.BidAt, b.BidAt), first(a.CommittedAt, b.CommittedAt), first(a.WithdrawnAt, b.WithdrawnAt)
	return a
}

// MergeByID folds rows of the same id into one (merge(earlier, later)), keeping the order of each
// id's first row: one INSERT ... ON CONFLICT may not touch a row twice.
func MergeByID[T any](rows []T, id func(T) string, merge func(T, T) T) []T {
	at := make(map[string]int, len(rows))
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		if i, ok := at[id(r)]; ok {
			out[i] = merge(out[i], r)
			continue
		}
		at[id(r)] = len(out)
		out = append(out, r)
	}
	return out
}

// TS is t as a timestamptz parameter: NULL for the zero time (unknown).
func TS(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()} }

const upsertAdmissions = `
INSERT INTO edgeq_admissions AS a (id, product_id, buyer, quantity, state, admitted_at, committed_at, released_at, cancelled_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[],
                     $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::timestamptz[]) AS r
ORDER BY 1
ON CONFLICT (id) DO UPDATE SET
  buyer        = CASE WHEN a.buyer = '' THEN EXCLUDED.buyer ELSE a.buyer END,
  quantity     = CASE WHEN a.quantity = 0 THEN EXCLUDED.quantity ELSE a.quantity END,
  state        = CASE WHEN edgeq_state_rank(EXCLUDED.state) > edgeq_state_rank(a.state) THEN EXCLUDED.state ELSE a.state END,
  admitted_at  = COALESCE(a.admitted_at, EXCLUDED.admitted_at),
  committed_at = COALESCE(a.committed_at, EXCLUDED.committed_at),
  released_at  = COALESCE(a.released_at, EXCLUDED.released_at),
  cancelled_at = COALESCE(a.cancelled_at, EXCLUDED.cancelled_at),
  written_at   = now()`

const upsertBids = `
INSERT INTO edgeq_bids AS b (id, auction_id, bidder, amount_cents, state, bid_at, committed_at, withdrawn_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[],
                     $6::timestamptz[], $7::timestamptz[], $8::timestamptz[]) AS r
ORDER BY 1
ON CONFLICT (id) DO UPDATE SET
  bidder       = CASE WHEN b.bidder = '' THEN EXCLUDED.bidder ELSE b.bidder END,
  amount_cents = CASE WHEN b.amount_cents = 0 THEN EXCLUDED.amount_cents ELSE b.amount_cents END,
  state        = CASE WHEN edgeq_state_rank(EXCLUDED.state) > edgeq_state_rank(b.state) THEN EXCLUDED.state ELSE b.state END,
  bid_at       = COALESCE(b.bid_at, EXCLUDED.bid_at),
  committed_at = COALESCE(b.committed_at, EXCLUDED.committed_at),
  withdrawn_at = COALESCE(b.withdrawn_at, EXCLUDED.withdrawn_at),
  written_at   = now()`

// Write puts a batch in the ledger in one transaction: all of it or nothing. Idempotent: writing
// the same events again, or older events after newer ones, changes nothing. Rows are written in id
// order, so writers that race on the same ids (a worker taken over mid-batch) wait for each other
// instead of deadlocking. The built-in rows go first, then each registered table's Write with its
// rows of b.Others, the tables in name order. A row of a table no package registered fails the
// whole batch with ErrUnregisteredTable, a refusal (Refused), before anything is written.
func (l *Ledger) Write(ctx context.Context, b Batch) error {
	tables, others, err := othersByTable(b.Others)
	if err != nil {
		return err
	}
	if err := l.Migrate(ctx); err != nil {
		// Not a refusal of the batch (%v: no PgError nor ErrRefused inside): the writer waits and
		// tries again.
		return fmt.Errorf("ledger: migrating the schema: %v", err)
	}
	adms := MergeByID(b.Admissions, func(a Admission) string { return a.ID }, Admission.merge)
	bids := MergeByID(b.Bids, func(b Bid) string { return b.ID }, Bid.merge)
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if len(adms) > 0 {
			n := len(adms)
			id, product, buyer, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			qty := make([]int64, n)
			at, committed, released, cancelled := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
			for i, a := range adms {
				id[i], product[i], buyer[i], qty[i], state[i] = a.ID, a.ProductID, a.Buyer, a.Quantity, a.State
				at[i], committed[i], released[i], cancelled[i] = TS(a.AdmittedAt), TS(a.CommittedAt), TS(a.ReleasedAt), TS(a.CancelledAt)
			}
			if _, err := tx.Exec(ctx, upsertAdmissions, id, product, buyer, qty, state, at, committed, released, cancelled); err != nil {
				return err
			}
		}
		if len(bids) > 0 {
			n := len(bids)
			id, auction, bidder, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			amount := make([]int64, n)
			at, committed, withdrawn := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
			for i, b := range bids {
				id[i], auction[i], bidder[i], amount[i], state[i] = b.ID, b.AuctionID, b.Bidder, b.AmountCents, b.State
				at[i], committed[i], withdrawn[i] = TS(b.BidAt), TS(b.CommittedAt), TS(b.WithdrawnAt)
			}
			if _, err := tx.Exec(ctx, upsertBids, id, auction, bidder, amount, state, at, committed, withdrawn); err != nil {
				return err
			}
		}
		for i, t := range tables {
			if err := t.Write(ctx, tx, others[i]); err != nil {
				return fmt.Errorf("ledger: table %s: %w", t.Name, err)
			}
		}
		return nil
	})
}

// Refused reports whether err is PostgreSQL refusing the data (a server error about the statement)
// or an error wrapping ErrRefused (a row of an unregistered table, a row a registered table's Write
// refuses, a misnamed table migration), as opposed to the server being unreachable or going away: a
// refused write fails again however often it is retried, an unreachable server is waited for.
func Refused(err error) bool {
	if errors.Is(err, ErrRefused) {
		return true
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	// Class 08 connection exceptions, 53 insufficient resources, 57 operator intervention (shutdown),
	// 40 transaction rollback (serialization, deadlock), 58 system error: all pass.
	switch pg.Code[:2] {
	case "08", "53", "57", "40", "58":
		return false
	}
	return true
}
