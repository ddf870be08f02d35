package stock

// Stock admissions' table in the ledger, edgeq_admissions (migrations/): the row, how a batch's rows
// are written, and the reads of the admin lists and reconcile.

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgeq/edgeq/internal/ledger"
)

// table is the ledger table's registered name.
const table = "admissions"

//go:embed migrations/*.sql
var migrations embed.FS

func registerTable() {
	ledger.RegisterTable(ledger.Table{Name: table, Migrations: ledger.Dir(migrations, "migrations"), Write: writeRows})
}

// Row is one admission's ledger row. Zero times and fields are unknown (an event that carries only
// part of the record, such as "committed", reached the ledger first).
type Row struct {
	ID, ProductID, Buyer string
	Quantity             int64
	State                string // admitted, committed, released, cancelled
	AdmittedAt           time.Time
	CommittedAt          time.Time
	ReleasedAt           time.Time
	CancelledAt          time.Time
}

// Table names the row's ledger table.
func (Row) Table() string { return table }

// merge folds b into a (same id), as the upsert does: a field once known is kept, the state of
// higher rank wins.
func merge(a, b Row) Row {
	a.ProductID, a.Buyer, a.Quantity = cmp.Or(a.ProductID, b.ProductID), cmp.Or(a.Buyer, b.Buyer), cmp.Or(a.Quantity, b.Quantity)
	a.State = ledger.Higher(a.State, b.State)
	a.AdmittedAt, a.CommittedAt = ledger.Known(a.AdmittedAt, b.AdmittedAt), ledger.Known(a.CommittedAt, b.CommittedAt)
	a.ReleasedAt, a.CancelledAt = ledger.Known(a.ReleasedAt, b.ReleasedAt), ledger.Known(a.CancelledAt, b.CancelledAt)
	return a
}

const upsert = `
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

// writeRows upserts a batch's admissions, one row per id, in id order.
func writeRows(ctx context.Context, tx pgx.Tx, rows []ledger.Row) error {
	adms, err := ledger.Fold(rows, func(a Row) string { return a.ID }, merge)
	if err != nil {
		return err
	}
	n := len(adms)
	id, product, buyer, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	qty := make([]int64, n)
	at, committed, released, cancelled := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	for i, a := range adms {
		id[i], product[i], buyer[i], qty[i], state[i] = a.ID, a.ProductID, a.Buyer, a.Quantity, a.State
		at[i], committed[i], released[i], cancelled[i] = ledger.TS(a.AdmittedAt), ledger.TS(a.CommittedAt), ledger.TS(a.ReleasedAt), ledger.TS(a.CancelledAt)
	}
	_, err = tx.Exec(ctx, upsert, id, product, buyer, qty, state, at, committed, released, cancelled)
	return err
}

const columns = "id, product_id, buyer, quantity, state, admitted_at, committed_at, released_at, cancelled_at"

func scan(rows pgx.Rows, err error) ([]Row, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Row, error) {
		var a Row
		var at, committed, released, cancelled pgtype.Timestamptz
		err := row.Scan(&a.ID, &a.ProductID, &a.Buyer, &a.Quantity, &a.State, &at, &committed, &released, &cancelled)
		a.AdmittedAt, a.CommittedAt, a.ReleasedAt, a.CancelledAt = ledger.TimeOf(at), ledger.TimeOf(committed), ledger.TimeOf(released), ledger.TimeOf(cancelled)
		return a, err
	})
}

// ledgerPage is a page of admissions from the ledger, newest first, and how many there are; buyer "" lists
// every buyer's.
func ledgerPage(ctx context.Context, l *ledger.Ledger, buyer string, page, size int64) ([]Row, int64, error) {
	count, list := "SELECT count(*) FROM edgeq_admissions", "SELECT "+columns+" FROM edgeq_admissions"
	args := []any{}
	if buyer != "" {
		count, list, args = count+" WHERE buyer = $1", list+" WHERE buyer = $1", append(args, buyer)
	}
	var total int64
	if err := l.QueryRow(ctx, count, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	n := len(args)
	list += fmt.Sprintf(" ORDER BY admitted_at DESC NULLS LAST, id DESC LIMIT $%d OFFSET $%d", n+1, n+2)
	items, err := scan(l.Query(ctx, list, append(args, size, (page-1)*size)...))
	return items, total, err
}

// ledgerRow is one admission's ledger row.
func ledgerRow(ctx context.Context, l *ledger.Ledger, id string) (Row, bool, error) {
	items, err := scan(l.Query(ctx, "SELECT "+columns+" FROM edgeq_admissions WHERE id = $1", id))
	if err != nil || len(items) == 0 {
		return Row{}, false, err
	}
	return items[0], true, nil
}

// rowsSince is every admission admitted at or after since (reconcile).
func rowsSince(ctx context.Context, l *ledger.Ledger, since time.Time) ([]Row, error) {
	return scan(l.Query(ctx, "SELECT "+columns+" FROM edgeq_admissions WHERE admitted_at IS NULL OR admitted_at >= $1 ORDER BY id", since))
}

// unitsHeld is, per product, the units of admissions not given back (admitted or committed) in the
// ledger: what the store's buyer counts add up to.
func unitsHeld(ctx context.Context, l *ledger.Ledger) (map[string]int64, error) {
	rows, err := l.Query(ctx, "SELECT product_id, COALESCE(sum(quantity), 0)::bigint FROM edgeq_admissions WHERE state IN ('admitted', 'committed') GROUP BY product_id")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var product string
	var units int64
	_, err = pgx.ForEachRow(rows, []any{&product, &units}, func() error { out[product] = units; return nil })
	return out, err
}
