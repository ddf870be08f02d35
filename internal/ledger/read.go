package ledger

// Reading the ledger: the admin history lists (a page of admissions or of a bidder's bids, newest
// first, and one admission) and what edgeq reconcile compares with the store (every admission or
// bid since a time, the units held per product, every auction's standing bids).

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// TimeOf is a timestamptz column read in UTC: the zero time for NULL (unknown).
func TimeOf(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

const admissionColumns = "id, product_id, buyer, quantity, state, admitted_at, committed_at, released_at, cancelled_at"

func scanAdmissions(rows pgx.Rows) ([]Admission, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Admission, error) {
		var a Admission
		var at, committed, released, cancelled pgtype.Timestamptz
		err := row.Scan(&a.ID, &a.ProductID, &a.Buyer, &a.Quantity, &a.State, &at, &committed, &released, &cancelled)
		a.AdmittedAt, a.CommittedAt, a.ReleasedAt, a.CancelledAt = TimeOf(at), TimeOf(committed), TimeOf(released), TimeOf(cancelled)
		return a, err
	})
}

const bidColumns = "id, auction_id, bidder, amount_cents, state, bid_at, committed_at, withdrawn_at"

func scanBids(rows pgx.Rows) ([]Bid, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Bid, error) {
		var b Bid
		var at, committed, withdrawn pgtype.Timestamptz
		err := row.Scan(&b.ID, &b.AuctionID, &b.Bidder, &b.AmountCents, &b.State, &at, &committed, &withdrawn)
		b.BidAt, b.CommittedAt, b.WithdrawnAt = TimeOf(at), TimeOf(committed), TimeOf(withdrawn)
		return b, err
	})
}

// Admissions is a page of admissions, newest first; buyer "" lists every buyer's.
func (l *Ledger) Admissions(ctx context.Context, buyer string, page, size int64) ([]Admission, int64, error) {
	var total int64
	var rows pgx.Rows
	var err error
	if buyer == "" {
		if err = l.pool.QueryRow(ctx, "SELECT count(*) FROM edgeq_admissions").Scan(&total); err == nil {
			rows, err = l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions"+
				" ORDER BY admitted_at DESC NULLS LAST, id DESC LIMIT $1 OFFSET $2", size, (page-1)*size)
		}
	} else {
		if err = l.pool.QueryRow(ctx, "SELECT count(*) FROM edgeq_admissions WHERE buyer = $1", buyer).Scan(&total); err == nil {
			rows, err = l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions WHERE buyer = $1"+
				" ORDER BY admitted_at DESC NULLS LAST, id DESC LIMIT $2 OFFSET $3", buyer, size, (page-1)*size)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	items, err := scanAdmissions(rows)
	return items, total, err
}

// Admission is one admission's row.
func (l *Ledger) Admission(ctx context.Context, id string) (Admission, bool, error) {
	rows, err := l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions WHERE id = $1", id)
	if err != nil {
		return Admission{}, false, err
	}
	items, err := scanAdmissions(rows)
	if err != nil || len(items) == 0 {
		return Admission{}, false, err
	}
	return items[0], true, nil
}

// Bids is a page of a bidder's bids, newest first.
func (l *Ledger) Bids(ctx context.Context, bidder string, page, size int64) ([]Bid, int64, error) {
	var total int64
	if err := l.pool.QueryRow(ctx, "SELECT count(*) FROM edgeq_bids WHERE bidder = $1", bidder).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := l.pool.Query(ctx, "SELECT "+bidColumns+" FROM edgeq_bids WHERE bidder = $1"+
		" ORDER BY bid_at DESC NULLS LAST, id DESC LIMIT $2 OFFSET $3", bidder, size, (page-1)*size)
	if err != nil {
		return nil, 0, err
	}
	items, err := scanBids(rows)
	return items, total, err
}

// AllAdmissions returns every admission admitted at or after since (reconcile).
func (l *Ledger) AllAdmissions(ctx context.Context, since time.Time) ([]Admission, error) {
	rows, err := l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions WHERE admitted_at IS NULL OR admitted_at >= $1 ORDER BY id", since)
	if err != nil {
		return nil, err
	}
	return scanAdmissions(rows)
}

// AllBids returns every bid placed at or after since (reconcile).
func (l *Ledger) AllBids(ctx context.Context, since time.Time) ([]Bid, error) {
	rows, err := l.pool.Query(ctx, "SELECT "+bidColumns+" FROM edgeq_bids WHERE bid_at IS NULL OR bid_at >= $1 ORDER BY id", since)
	if err != nil {
		return nil, err
	}
	return scanBids(rows)
}

// UnitsHeld is, per product, the units of admissions not given back (admitted or committed): what
// the store's buyer counts add up to.
func (l *Ledger) UnitsHeld(ctx context.Context) (map[string]int64, error) {
	rows, err := l.pool.Query(ctx, "SELECT product_id, COALESCE(sum(quantity), 0)::bigint FROM edgeq_admissions WHERE state IN ('admitted', 'committed') GROUP BY product_id")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var product string
	var units int64
	_, err = pgx.ForEachRow(rows, []any{&product, &units}, func() error { out[product] = units; return nil })
	return out, err
}

// Standing is an auction's bids not withdrawn: how many, and the highest amount.
type Standing struct{ Bids, HighestCents int64 }

// BidsStanding is every auction's Standing.
func (l *Ledger) BidsStanding(ctx context.Context) (map[string]Standing, error) {
	rows, err := l.pool.Query(ctx, "SELECT auction_id, count(*), COALESCE(max(amount_cents), 0) FROM edgeq_bids WHERE state <> 'withdrawn' GROUP BY auction_id")
	if err != nil {
		return nil, err
	}
	out := map[string]Standing{}
	var auction string
	var st Standing
	_, err = pgx.ForEachRow(rows, []any{&auction, &st.Bids, &st.HighestCents}, func() error { out[auction] = st; return nil })
	return out, err
}
