package stock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/jackc/pgx/v5"
)

// An admission's events give the same row whatever their order, repeats included: the state only
// moves forward, and what one event knows is kept when another lacks it.
func TestTable_AnyOrderAndRepeatsGiveTheSameRow(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	events := []ledger.Row{
		Row{ID: "101", ProductID: "p1", Buyer: "b1", Quantity: 2, State: "admitted", AdmittedAt: at},
		Row{ID: "101", ProductID: "p1", State: "committed", CommittedAt: at.Add(time.Second)},
		Row{ID: "101", ProductID: "p1", Buyer: "b1", Quantity: 2, State: "cancelled", AdmittedAt: at, CancelledAt: at.Add(time.Minute)},
	}
	want := Row{ID: "101", ProductID: "p1", Buyer: "b1", Quantity: 2, State: "cancelled", AdmittedAt: at,
		CommittedAt: at.Add(time.Second), CancelledAt: at.Add(time.Minute)}
	for round := range 6 {
		l := ledgertest.Open(t)
		order := ledgertest.WriteInAnyOrder(t, l, events, round)
		a, found, err := ledgerRow(ctx, l, "101")
		if err != nil || !found {
			t.Fatalf("order %v: %v %v", order, found, err)
		}
		if a != want {
			t.Errorf("order %v: row\n%+v, want\n%+v", order, a, want)
		}
		units, err := unitsHeld(ctx, l)
		if err != nil || units["p1"] != 0 {
			t.Errorf("units held %v %v, want none (cancelled)", units, err)
		}
	}
}

// Writers racing on the same ids (a worker taken over mid-batch while the first still writes) leave
// one row per id, with the furthest state, and never deadlock.
func TestTable_ConcurrentWritersLeaveOneRowPerID(t *testing.T) {
	ctx := context.Background()
	l := ledgertest.Open(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	var all []ledger.Row
	for i := range 500 {
		id := fmt.Sprint(1000 + i)
		all = append(all, Row{ID: id, ProductID: "p", Buyer: "u" + id, Quantity: 1, State: "admitted", AdmittedAt: at})
		if i%3 == 0 {
			all = append(all, Row{ID: id, ProductID: "p", Buyer: "u" + id, Quantity: 1, State: "released", AdmittedAt: at, ReleasedAt: at})
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			rows := append([]ledger.Row(nil), all...)
			r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			for len(rows) > 0 {
				n := min(len(rows), 1+r.IntN(100))
				// No retry: writes in id order never deadlock (40P01), which they did before.
				if err := l.Write(ctx, ledger.Batch{Rows: rows[:n]}); err != nil {
					t.Error(err)
					return
				}
				rows = rows[n:]
			}
		})
	}
	wg.Wait()
	items, total, err := ledgerPage(ctx, l, "", 1, 1000)
	if err != nil || total != 500 || len(items) != 500 {
		t.Fatalf("%d rows (%d listed), %v; want 500", total, len(items), err)
	}
	released := 0
	for _, a := range items {
		if a.State == "released" {
			released++
		}
	}
	units, _ := unitsHeld(ctx, l)
	if released != 167 || units["p"] != 333 {
		t.Fatalf("%d released, %d units held; want 167 and 333", released, units["p"])
	}
}

// schema is a ledger table's columns and indexes as PostgreSQL describes them.
func schema(t *testing.T, l *ledger.Ledger, table string) []string {
	t.Helper()
	rows, err := l.Query(context.Background(), `
SELECT 'column ' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '') FROM information_schema.columns WHERE table_name = $1
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE tablename = $1
ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(out) == 0 {
		t.Fatalf("schema of %s: %q %v", table, out, err)
	}
	return out
}

// A ledger that builds older than the kinds' own tables migrated (edgeq's migration 0001 made
// edgeq_admissions and edgeq_bids then) keeps its rows and ends with the schema a new ledger gets:
// the stock and bid kinds' migrations find their tables in place and take them over.
func TestTable_ALedgerOfOlderBuildsKeepsItsRowsAndSchema(t *testing.T) {
	ctx := context.Background()
	old, err := os.ReadFile("../../internal/ledger/testdata/0001_records_of_older_builds.sql")
	if err != nil {
		t.Fatal(err)
	}
	url := ledgertest.Database(t)
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{
		`CREATE TABLE edgeq_schema_migrations (
			version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		string(old),
		"INSERT INTO edgeq_schema_migrations (version, name) VALUES (1, '0001_records.sql')",
		"INSERT INTO edgeq_admissions (id, product_id, buyer, quantity, state, admitted_at) VALUES ('old', 'p0', 'b0', 1, 'admitted', '2026-03-02T09:00:00Z')",
		"INSERT INTO edgeq_bids (id, auction_id, bidder, amount_cents, state, bid_at) VALUES ('9', 'a0', 'b0', 500, 'accepted', '2026-03-02T09:00:00Z')",
	} {
		if _, err := conn.Exec(ctx, step); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	_ = conn.Close(ctx)

	l, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, name := range []string{"admissions", "bids"} {
		if v, err := l.TableVersion(ctx, name); err != nil || v != 1 {
			t.Errorf("table %s at version %d, %v; want 1", name, v, err)
		}
	}
	if err := l.Write(ctx, ledger.Batch{Rows: []ledger.Row{Row{ID: "old", ProductID: "p0", State: "committed", CommittedAt: at.Add(time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	want := Row{ID: "old", ProductID: "p0", Buyer: "b0", Quantity: 1, State: "committed", AdmittedAt: at, CommittedAt: at.Add(time.Second)}
	if got, found, err := ledgerRow(ctx, l, "old"); err != nil || !found || got != want {
		t.Errorf("the existing admission after a write: %+v %v %v, want %+v", got, found, err, want)
	}
	var bids int
	if err := l.QueryRow(ctx, "SELECT count(*) FROM edgeq_bids WHERE id = '9' AND amount_cents = 500").Scan(&bids); err != nil || bids != 1 {
		t.Errorf("the existing bid: %d %v", bids, err)
	}

	fresh := ledgertest.Open(t)
	for _, table := range []string{"edgeq_admissions", "edgeq_bids"} {
		if got, want := schema(t, l, table), schema(t, fresh, table); !slices.Equal(got, want) {
			t.Errorf("%s of an older build's ledger:\n%q\nof a new ledger:\n%q", table, got, want)
		}
	}
}
