package admission

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// withLedger gives st's service a ledger on a database of its own and returns the database's URL.
// Call it before any request, so that the commits record their events.
func withLedger(t *testing.T, st *stack) string {
	t.Helper()
	url := ledgertest.Database(t)
	l, err := ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	st.svc.o.Ledger = l
	return url
}

// sql runs a query returning one number.
func sqlNumber(t *testing.T, url, query string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func sqlExec(t *testing.T, url, statement string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), statement); err != nil {
		t.Fatalf("%s: %v", statement, err)
	}
}

// A ledger worker killed after writing a batch and before acknowledging it
// leaves its entries pending; the worker that takes them over writes them again, which adds no row
// and loses none. Every admission and bid is in the ledger exactly once, with its settlement.
func TestLedger_AWorkerKilledMidBatchLeavesNoDuplicateAndNoGap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 300, 1))
		st.AddAuctions(auction("lot", "10.00", "1.00", time.Hour))
		db := withLedger(t, st)
		for i := range 120 {
			if a := st.Checkout("p", fmt.Sprintf("u%d", i), nil); a.Status != 200 {
				t.Fatal(a.Body)
			}
		}
		for i := range 30 {
			if a := st.Bid("lot", fmt.Sprintf("b%d", i), fmt.Sprintf("%d.00", 10+i)); a.Status != 200 {
				t.Fatal(a.Body)
			}
		}
		// The first ledger worker writes a batch, then dies before acknowledging it.
		var wrote atomic.Bool
		w := &ledgerWorker{s: st.svc, consumer: "doomed", groups: map[string]bool{}, stopAfterWrite: func() bool {
			wrote.Store(true)
			return true
		}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w.run(ctx)
		if !wrote.Load() {
			t.Fatal("the doomed worker wrote nothing")
		}
		pending, err := s.Client.XPending(ctx, stockOf(st.svc).Stream("p"), ledgerGroup).Result()
		if err != nil || pending.Count == 0 {
			t.Fatalf("the killed worker left nothing pending: %+v %v", pending, err)
		}
		written := sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions") + sqlNumber(t, db, "SELECT count(*) FROM edgeq_bids")
		if written == 0 {
			t.Fatal("the killed worker's batch is not in the ledger")
		}
		// The replica's own workers take the pending entries over once idle, and write the rest.
		st.StartWorker()
		eventually(t, 20*time.Second, "every event in the ledger", func() bool {
			return sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions WHERE state = 'committed'") == 120 &&
				sqlNumber(t, db, "SELECT count(*) FROM edgeq_bids WHERE state = 'committed'") == 30
		})
		eventually(t, 10*time.Second, "nothing pending for the ledger", func() bool {
			p, err := s.Client.XPending(ctx, stockOf(st.svc).Stream("p"), ledgerGroup).Result()
			return err == nil && p.Count == 0
		})
		if n := sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions"); n != 120 {
			t.Fatalf("%d admission rows, want 120", n)
		}
		if n := sqlNumber(t, db, "SELECT count(DISTINCT buyer) FROM edgeq_admissions WHERE quantity = 1 AND admitted_at IS NOT NULL AND committed_at IS NOT NULL"); n != 120 {
			t.Fatalf("%d whole admission rows, want 120", n)
		}
		if n := sqlNumber(t, db, "SELECT count(*) FROM edgeq_bids WHERE amount_cents BETWEEN 1000 AND 3900 AND bid_at IS NOT NULL"); n != 30 {
			t.Fatalf("%d whole bid rows, want 30", n)
		}
		// The taken-over batch was written twice: the second time added nothing.
		if got := testutil.ToFloat64(st.svc.metrics.ledgerWrites.WithLabelValues("written")); int64(got) <= 120+30+60 {
			t.Fatalf("ledger writes %v: the taken-over batch was not written again", got)
		}
		// The admin history reads the ledger: committed shows.
		page := st.AdminGet("/api/admissions?page_size=5")
		if page.Status != 200 || num(page.JSON["total_count"]) != 120 || page.Header.Get("Edgeq-Source") != "ledger" {
			t.Fatalf("admin list: %d %s %v", page.Status, page.Body, page.Header)
		}
		if item := page.JSON["items"].([]any)[0].(map[string]any); item["state"] != "committed" || item["committed_at"] == "" {
			t.Fatalf("admin list item %v", item)
		}
	})
}

// reserve.lua writes one entry per call to the product's admits stream. During a rolling
// update a replica of an older build still writes one "admitted" entry per purchase to the events
// stream; the workers turn both into admissions, in the admin indexes and in the ledger, once each.
func TestWorker_ReadsTheAdmissionsOfOlderBuildsToo(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 50, 5))
		db := withLedger(t, st)
		ctx := context.Background()
		together := st.buyTogether("p", []string{"ann", "ben"}, []int64{2, 1})
		admitted := 0 // the admits stream also holds the commit of both, one entry too
		for _, m := range s.Client.XRange(ctx, admitsStream(stockOf(st.svc), "p"), "-", "+").Val() {
			if m.Values["type"] == "admitted" {
				admitted++
			}
		}
		if admitted != 1 {
			t.Fatalf("%d admitted entries on the admits stream for one call, want 1", admitted)
		}
		// As reserve.lua of ec22d85 wrote it (its record and stock are not what the worker reads).
		old := []any{"type", "admitted", "admission", "77", "user", st.svc.pseudonyms.of("cy"), "qty", "3", "at", "1795639697738"}
		if err := s.Client.XAdd(ctx, &redis.XAddArgs{Stream: stockOf(st.svc).Stream("p"), Values: old}).Err(); err != nil {
			t.Fatal(err)
		}
		st.StartWorker()
		eventually(t, 15*time.Second, "three admissions in the ledger", func() bool {
			return sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions WHERE admitted_at IS NOT NULL") == 3
		})
		for id, qty := range map[string]int64{together[0]: 2, together[1]: 1, "77": 3} {
			if n := sqlNumber(t, db, fmt.Sprintf("SELECT count(*) FROM edgeq_admissions WHERE id = '%s' AND quantity = %d", id, qty)); n != 1 {
				t.Errorf("admission %s: %d ledger rows with quantity %d", id, n, qty)
			}
			if id == "77" {
				continue // its record was that build's, gone with it: the ledger has it
			}
			if rec, found, err := adminRecord(ctx, st.svc, id); err != nil || !found || rec.Quantity != qty {
				t.Errorf("admission %s in the admin records: %+v %v %v", id, rec, found, err)
			}
		}
		if ids := indexedIDs(t, st.svc, tableOf(stockOf(st.svc)), "p"); len(ids) != 2 {
			t.Fatalf("the admin lists hold %v, want the two admitted together", ids)
		}
		if n := sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions WHERE state = 'committed'"); n != 2 {
			t.Fatalf("%d committed rows, want the two bought together", n)
		}
	})
}

// A batch PostgreSQL refuses is written one event at a time: the refused event is dead-lettered with
// target "ledger" (and never applied twice to the admin indexes), the rest is written; once the cause
// is gone, a retry from the admin API writes it.
func TestLedger_RefusedEventsAreDeadLetteredAndRetried(t *testing.T) {
	s := storetest.Redis(t)
	st := newStack(t, s, product("p", 50, 5))
	db := withLedger(t, st)
	sqlExec(t, db, "ALTER TABLE edgeq_admissions ADD CONSTRAINT test_small CHECK (quantity < 3)")
	// Bought together: one event names all three, and only the second is refused.
	st.buyTogether("p", []string{"u0", "u1", "u2"}, []int64{1, 4, 2})
	st.StartWorker()
	eventually(t, 15*time.Second, "a ledger dead letter", func() bool {
		return num(st.AdminGet("/api/dead-letters").JSON["total_count"]) == 1
	})
	dead := st.AdminGet("/api/dead-letters").JSON["items"].([]any)[0].(map[string]any)
	id, _ := dead["id"].(string)
	if dead["target"] != "ledger" || dead["fields"].(map[string]any)["qtys"] != "1 4 2" || len(id) < 7 || id[:7] != "ledger." {
		t.Fatalf("dead letter %v", dead)
	}
	// The event's other two admissions are written row by row. (The refused admission's own
	// "committed" event is written too: a row with its state and no quantity yet, which the retry
	// below completes.)
	eventually(t, 10*time.Second, "the others written", func() bool {
		return sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions WHERE state = 'committed' AND quantity IN (1, 2)") == 2
	})
	if a := st.AdminSend("POST", "/api/dead-letters/"+id+"/retry", "", ""); a.Status != 409 || a.JSON["error"] != "RETRY_FAILED" {
		t.Fatalf("a retry while the cause is still there: %d %s", a.Status, a.Body)
	}
	sqlExec(t, db, "ALTER TABLE edgeq_admissions DROP CONSTRAINT test_small")
	if a := st.AdminSend("POST", "/api/dead-letters/"+id+"/retry", "", ""); a.Status != 200 {
		t.Fatalf("retry: %d %s", a.Status, a.Body)
	}
	if n := sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions WHERE quantity = 4"); n != 1 {
		t.Fatalf("the retried admission: %d rows", n)
	}
	if n := num(st.AdminGet("/api/dead-letters").JSON["total_count"]); n != 0 {
		t.Fatalf("%v dead letters after the retry", n)
	}
	// The admin indexes have every admission once (the ledger's dead letter is not theirs).
	if n := num(st.AdminGet("/api/leaderboard").JSON["items"].([]any)[0].(map[string]any)["sales"]); n != 7 {
		t.Fatalf("leaderboard %v, want 7 units", n)
	}
}

// An order the shop cancelled shows in the ledger as
// cancelled, with when it was committed and when it was cancelled, and its unit sells again.
func TestLedger_ACancelledAdmissionShowsInTheLedger(t *testing.T) {
	s := storetest.Redis(t)
	st := newStack(t, s, product("p", 1, 1))
	db := withLedger(t, st)
	st.StartWorker()
	first := st.Checkout("p", "ann", nil)
	id := strings.TrimPrefix(first.Body, "origin took admission ")
	if first.Status != 200 || id == "" {
		t.Fatalf("first purchase: %d %s", first.Status, first.Body)
	}
	if a := st.Checkout("p", "ben", nil); a.Status != 409 {
		t.Fatalf("a purchase of the sold-out unit: %d", a.Status)
	}
	// The shop's acceptance is committed after the answer, in a batch; the operator cancels the
	// order once it shows as committed. (One cancelled before its commit landed is cancelled with no
	// committed_at: the commit finds it settled and records nothing.)
	eventually(t, 10*time.Second, "the commit in the admin view", func() bool {
		return st.AdminGet("/api/admissions/" + id).JSON["state"] == "committed"
	})
	if a := st.AdminSend("POST", "/api/admissions/"+id+"/cancel", "", ""); a.Status != 200 {
		t.Fatalf("cancel: %d %s", a.Status, a.Body)
	}
	second := st.Checkout("p", "ben", nil)
	if second.Status != 200 {
		t.Fatalf("the cancelled unit does not sell again: %d %s", second.Status, second.Body)
	}
	again := strings.TrimPrefix(second.Body, "origin took admission ")
	eventually(t, 10*time.Second, "both in the ledger", func() bool {
		return sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions WHERE id = '"+id+"' AND state = 'cancelled'"+
			" AND committed_at IS NOT NULL AND cancelled_at >= committed_at") == 1 &&
			sqlNumber(t, db, "SELECT count(*) FROM edgeq_admissions WHERE id = '"+again+"' AND state = 'committed'") == 1
	})
	rec := st.AdminGet("/api/admissions/" + id)
	if rec.Status != 200 || rec.JSON["state"] != "cancelled" || rec.Header.Get("Edgeq-Source") != "ledger" {
		t.Fatalf("admin view of the cancelled admission: %d %s", rec.Status, rec.Body)
	}
}
