package bid

// Bids' table in the ledger, edgeq_bids (migrations/): the row, how a batch's rows are written, and
// the reads of the admin lists, "mine" and reconcile.

import (
	"cmp"
	"context"
	"embed"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgeq/edgeq/internal/ledger"
)

// table is the ledger table's registered name.
const table = "bids"

//go:embed migrations/*.sql
var migrations embed.FS

func registerTable() {
	ledger.RegisterTable(ledger.Table{Name: table, Migrations: ledger.Dir(migrations, "migrations"), Write: writeRows})
}

// Row is one bid's ledger row. Zero times and fields are unknown (an event that carries only part
// of the record reached the ledger first).
type Row struct {
	ID, AuctionID, Bidder string
	AmountCents           int64
	State                 string // accepted, committed, withdrawn
	BidAt                 time.Time
	CommittedAt           time.Time
	WithdrawnAt           time.Time
}

// Table names the row's ledger table.
func (Row) Table() string { return table }

// merge folds b into a (same id), as the upsert does: a field once known is kept, the state of
// higher rank wins.
func merge(a, b Row) Row {
	a.AuctionID, a.Bidder, a.AmountCents = cmp.Or(a.AuctionID, b.AuctionID), cmp.Or(a.Bidder, b.Bidder), cmp.Or(a.AmountCents, b.AmountCents)
	a.State = ledger.Higher(a.State, b.State)
	a.BidAt, a.CommittedAt, a.WithdrawnAt = ledger.Known(a.BidAt, b.BidAt), ledger.Known(a.CommittedAt, b.CommittedAt), ledger.Known(a.WithdrawnAt, b.WithdrawnAt)
	return a
}

const upsert = `
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

// writeRows upserts a batch's bids, one row per id, in id order.
func writeRows(ctx context.Context, tx pgx.Tx, rows []ledger.Row) error {
	bids, err := ledger.Fold(rows, func(b Row) string { return b.ID }, merge)
	if err != nil {
		return err
	}
	n := len(bids)
	id, auction, bidder, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	amount := make([]int64, n)
	at, committed, withdrawn := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	for i, b := range bids {
		id[i], auction[i], bidder[i], amount[i], state[i] = b.ID, b.AuctionID, b.Bidder, b.AmountCents, b.State
		at[i], committed[i], withdrawn[i] = ledger.TS(b.BidAt), ledger.TS(b.CommittedAt), ledger.TS(b.WithdrawnAt)
	}
	_, err = tx.Exec(ctx, upsert, id, auction, bidder, amount, state, at, committed, withdrawn)
	return err
}

const columns = "id, auction_id, bidder, amount_cents, state, bid_at, committed_at, withdrawn_at"

func scan(rows pgx.Rows, err error) ([]Row, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Row, error) {
		var b Row
		var at, committed, withdrawn pgtype.Timestamptz
		err := row.Scan(&b.ID, &b.AuctionID, &b.Bidder, &b.AmountCents, &b.State, &at, &committed, &withdrawn)
		b.BidAt, b.CommittedAt, b.WithdrawnAt = ledger.TimeOf(at), ledger.TimeOf(committed), ledger.TimeOf(withdrawn)
		return b, err
	})
}

// ledgerPage is a page of a bidder's bids from the ledger, newest first, and how many there are.
func ledgerPage(ctx context.Context, l *ledger.Ledger, bidder string, page, size int64) ([]Row, int64, error) {
	var total int64
	if err := l.QueryRow(ctx, "SELECT count(*) FROM edgeq_bids WHERE bidder = $1", bidder).Scan(&total); err != nil {
		return nil, 0, err
	}
	items, err := scan(l.Query(ctx, "SELECT "+columns+" FROM edgeq_bids WHERE bidder = $1"+
		" ORDER BY bid_at DESC NULLS LAST, id DESC LIMIT $2 OFFSET $3", bidder, size, (page-1)*size))
	return items, total, err
}

// rowsSince is every bid placed at or after since (reconcile).
func rowsSince(ctx context.Context, l *ledger.Ledger, since time.Time) ([]Row, error) {
	return scan(l.Query(ctx, "SELECT "+columns+" FROM edgeq_bids WHERE bid_at IS NULL OR bid_at >= $1 ORDER BY id", since))
}

// standing is an auction's bids not withdrawn in the ledger: how many, and the highest amount.
type standing struct{ bids, highestCents int64 }

// standingBids is every auction's standing.
func standingBids(ctx context.Context, l *ledger.Ledger) (map[string]standing, error) {
	rows, err := l.Query(ctx, "SELECT auction_id, count(*), COALESCE(max(amount_cents), 0) FROM edgeq_bids WHERE state <> 'withdrawn' GROUP BY auction_id")
	if err != nil {
		return nil, err
	}
	out := map[string]standing{}
	var auction string
	var st standing
	_, err = pgx.ForEachRow(rows, []any{&auction, &st.bids, &st.highestCents}, func() error { out[auction] = st; return nil })
	return out, err
}
