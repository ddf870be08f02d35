package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func open(t *testing.T, url string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Migrations run once: a second Open (another replica, a restart) finds the schema in place, and
// replicas opening together do not race (the advisory lock).
func TestOpen_MigratesOnceEvenWhenReplicasStartTogether(t *testing.T) {
	url := ledgertest.Database(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			l, err := ledger.Open(context.Background(), url)
			if err == nil {
				l.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	l := open(t, url)
	if v, err := l.Version(context.Background()); err != nil || v != 1 {
		t.Fatalf("schema version %d, %v; want 1", v, err)
	}
}

// An id's events give the same row whatever their order, repeats included: the state only moves
// forward, and what one event knows is kept when another lacks it.
func TestWrite_AnyOrderAndRepeatsGiveTheSameRow(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	admitted := ledger.Admission{ID: "101", ProductID: "p1", Buyer: "b1", Quantity: 2, State: "admitted", AdmittedAt: at}
	committed := ledger.Admission{ID: "101", ProductID: "p1", State: "committed", CommittedAt: at.Add(time.Second)}
	cancelled := ledger.Admission{ID: "101", ProductID: "p1", Buyer: "b1", Quantity: 2, State: "cancelled", AdmittedAt: at, CancelledAt: at.Add(time.Minute)}
	bid := ledger.Bid{ID: "7", AuctionID: "a1", Bidder: "b2", AmountCents: 1500, State: "accepted", BidAt: at}
	withdrawn := ledger.Bid{ID: "7", AuctionID: "a1", Bidder: "b2", AmountCents: 1500, State: "withdrawn", BidAt: at, WithdrawnAt: at.Add(time.Second)}
	events := []any{admitted, committed, cancelled, bid, withdrawn}
	for round := range 6 {
		l := open(t, ledgertest.Database(t))
		order := rand.Perm(len(events))
		for i, j := range order {
			var b ledger.Batch
			switch e := events[j].(type) {
			case ledger.Admission:
				b.Admissions = append(b.Admissions, e, e) // a repeat in the same batch
			case ledger.Bid:
				b.Bids = append(b.Bids, e)
			}
			if round%2 == 1 && i > 0 { // odd rounds: everything in one batch, written twice
				continue
			}
			if round%2 == 1 {
				b = ledger.Batch{}
				for _, k := range order {
					switch e := events[k].(type) {
					case ledger.Admission:
						b.Admissions = append(b.Admissions, e)
					case ledger.Bid:
						b.Bids = append(b.Bids, e)
					}
				}
				if err := l.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Write(ctx, b); err != nil {
				t.Fatalf("order %v: %v", order, err)
			}
		}
		a, found, err := l.Admission(ctx, "101")
		if err != nil || !found {
			t.Fatalf("order %v: %v %v", order, found, err)
		}
		want := ledger.Admission{ID: "101", ProductID: "p1", Buyer: "b1", Quantity: 2, State: "cancelled", AdmittedAt: at,
			CommittedAt: at.Add(time.Second), CancelledAt: at.Add(time.Minute)}
		if a != want {
			t.Errorf("order %v: row\n%+v, want\n%+v", order, a, want)
		}
		bids, total, err := l.Bids(ctx, "b2", 1, 10)
		if err != nil || total != 1 || len(bids) != 1 || bids[0].State != "withdrawn" || bids[0].AmountCents != 1500 || !bids[0].WithdrawnAt.Equal(at.Add(time.Second)) {
			t.Errorf("order %v: bids %+v (%d) %v", order, bids, total, err)
		}
		units, err := l.UnitsHeld(ctx)
		if err != nil || units["p1"] != 0 {
			t.Errorf("units held %v %v, want none (cancelled)", units, err)
		}
	}
}

// Writers racing on the same ids (a worker taken over mid-batch while the first still writes) leave
// one row per id, with the furthest state, and never deadlock.
func TestWrite_ConcurrentWritersLeaveOneRowPerID(t *testing.T) {
	ctx := context.Background()
	l := open(t, ledgertest.Database(t))
	at := time.Now().UTC().Truncate(time.Millisecond)
	var all []ledger.Admission
	for i := range 500 {
		id := fmt.Sprint(1000 + i)
		all = append(all, ledger.Admission{ID: id, ProductID: "p", Buyer: "u" + id, Quantity: 1, State: "admitted", AdmittedAt: at})
		if i%3 == 0 {
			all = append(all, ledger.Admission{ID: id, ProductID: "p", Buyer: "u" + id, Quantity: 1, State: "released", AdmittedAt: at, ReleasedAt: at})
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			rows := append([]ledger.Admission(nil), all...)
			r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			for len(rows) > 0 {
				n := min(len(rows), 1+r.IntN(100))
				// No retry: writes in id order never deadlock (40P01), which they did before.
				if err := l.Write(ctx, ledger.Batch{Admissions: rows[:n]}); err != nil {
					t.Error(err)
					return
				}
				rows = rows[n:]
			}
		})
	}
	wg.Wait()
	items, total, err := l.Admissions(ctx, "", 1, 1000)
	if err != nil || total != 500 || len(items) != 500 {
		t.Fatalf("%d rows (%d listed), %v; want 500", total, len(items), err)
	}
	released := 0
	for _, a := range items {
		if a.State == "released" {
			released++
		}
	}
	units, _ := l.UnitsHeld(ctx)
	if released != 167 || units["p"] != 333 {
		t.Fatalf("%d released, %d units held; want 167 and 333", released, units["p"])
	}
}
