package admission

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// workerOver is a service with sold products, one admission each, and unsold ones, and an event
// worker that has not run yet.
func workerOver(t *testing.T, s *store.Store, sold, unsold int) (*Service, *worker) {
	t.Helper()
	ctx := context.Background()
	svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
		Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	ps := make([]products.Product, sold+unsold)
	for i := range ps {
		ps[i] = product("p"+strconv.Itoa(i), 10, 1)
	}
	if err := svc.Apply(ctx, products.With(&config.Config{}, ps...), nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps[:sold] {
		c := Claim{Owner: p.ID, User: svc.pseudonyms.of("u"), ID: svc.o.IDs.NextString(), Value: 1}
		if res, err := reserveNow(ctx, svc, p.ID, []Claim{c}); err != nil || res[0].code != 0 {
			t.Fatalf("reserve %s: %v %v", p.ID, res, err)
		}
	}
	return svc, &worker{s: svc, consumer: "test", groups: map[string]bool{}}
}

// The event worker reads the streams of every product in one pipeline: one pass applies what is
// new on all of them (on a cluster, products on every node), and a pass with nothing new is one
// round trip however many products there are, sold or not (it runs every 100 ms on every replica);
// the pass that lists the streams again (every 5 s) makes as many round trips for 80 products as
// for 10.
func TestWorker_OnePassReadsEveryProductInOnePipeline(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		listingTrips := map[int]int64{}
		for _, n := range []int{5, 40} {
			s := store.Wrap(s.Client, store.Keys{Prefix: storetest.UniquePrefix()}) // products of its own
			svc, w := workerOver(t, s, n, n)
			w.claimAt = time.Now() // the take-over sweep (every ClaimIdle/3) is left out
			if f, _ := w.pass(ctx); f == foundNothing {
				t.Fatal("the first pass found nothing")
			}
			if got := indexedCount(t, svc); got != int64(n) {
				t.Fatalf("one pass applied %d admissions of the %d products sold", got, n)
			}
			for i := range n {
				p, err := s.Client.XPending(ctx, admitsStream(stockOf(svc), "p"+strconv.Itoa(i)), groupName).Result()
				if err != nil || p.Count != 0 {
					t.Fatalf("product p%d: pending %+v %v", i, p, err)
				}
			}
			trips := storetest.CountTrips(s.Client)
			reads := storetest.CountCommands(s.Client, func(c redis.Cmder) bool { return c.Name() == "xreadgroup" })
			if f, _ := w.pass(ctx); f != foundNothing {
				t.Fatal("a pass with nothing new was busy")
			}
			if n := trips.Load(); n != 1 {
				t.Fatalf("a pass with nothing new made %d round trips, want 1 (a pipeline)", n)
			}
			if got := reads.Load(); got != int64(2*n) {
				t.Fatalf("%d XREADGROUPs for %d products", got, 2*n)
			}
			w.listedAt = time.Time{}
			before := trips.Load()
			w.pass(ctx)
			listingTrips[n] = trips.Load() - before
		}
		if listingTrips[5] != listingTrips[40] {
			t.Fatalf("a listing pass: %d round trips for 10 products, %d for 80", listingTrips[5], listingTrips[40])
		}
	})
}

// A pass that finds a few entries on each of many streams (a drop of many products, an auction
// house's bids) writes their records together: one apply.lua call per product (each under its own
// hash tag) in one pipeline, and one XACK per stream, all in one pipeline after the records are
// written.
func TestWorker_APassOverManyStreamsAppliesThemTogether(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const n = 40
		svc, w := workerOver(t, s, n, 0)
		applies := storetest.CountCommands(s.Client, func(cmd redis.Cmder) bool {
			args := cmd.Args()
			return cmd.Name() == "evalsha" && len(args) > 1 && args[1] == applyScript.Hash()
		})
		acks := storetest.CountCommands(s.Client, func(cmd redis.Cmder) bool { return cmd.Name() == "xack" })
		if f, _ := w.pass(ctx); f == foundNothing {
			t.Fatal("the pass found nothing")
		}
		if got := indexedCount(t, svc); got != n {
			t.Fatalf("one pass applied %d admissions of the %d products sold", got, n)
		}
		if got := applies.Load(); got != n {
			t.Fatalf("%d products' admissions applied in %d apply.lua calls, want %d", n, got, n)
		}
		if got := acks.Load(); got != n {
			t.Fatalf("%d XACKs for %d streams with entries", got, n)
		}
		for i := range n {
			p, err := s.Client.XPending(ctx, admitsStream(stockOf(svc), "p"+strconv.Itoa(i)), groupName).Result()
			if err != nil || p.Count != 0 {
				t.Fatalf("product p%d: pending %+v %v", i, p, err)
			}
		}
	})
}

// Under a steady stream of admissions the event worker does not chase each one: a pass that found
// some entries rests busyRest, so the next reads what gathered meanwhile (fewer reads, apply calls
// and acknowledgements, each a round trip). Without the rest each pass would be followed by the
// next at once, every one finding the few purchases made while the last ran. The bound below
// follows from the rests alone (a rest is at least its duration), so a slow machine cannot break
// it; every admission is still applied.
func TestWorker_ReadsWhatGatheredUnderLoadInFewerPasses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		svc, w := workerOver(t, s, 0, 0)
		if err := svc.Apply(ctx, products.With(&config.Config{}, product("p", 100_000, 1)), nil); err != nil {
			t.Fatal(err)
		}
		w.claimAt = time.Now().Add(time.Hour) // the take-over sweep is left out
		reads := storetest.CountCommands(s.Client, func(c redis.Cmder) bool { return c.Name() == "xreadgroup" })
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); w.run(ctx) }()
		// Four buyers back to back for 600 ms: something new is on the stream at every pass.
		var bought atomic.Int64
		var wg sync.WaitGroup
		for b := range 4 {
			wg.Go(func() {
				for i := 0; time.Since(start) < 600*time.Millisecond; i++ {
					c := Claim{Owner: "p", User: svc.pseudonyms.of(fmt.Sprintf("u%d-%d", b, i)), ID: svc.o.IDs.NextString(), Value: 1}
					if res, err := reserveNow(ctx, svc, "p", []Claim{c}); err != nil || res[0].code != 0 {
						t.Errorf("reserve: %v %v", res, err)
						return
					}
					bought.Add(1)
				}
			})
		}
		wg.Wait()
		purchases := bought.Load()
		for indexedCount(t, svc) != purchases {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("the worker applied %d of %d admissions in 30 s", indexedCount(t, svc), purchases)
			}
			time.Sleep(10 * time.Millisecond)
		}
		elapsed := time.Since(start)
		cancel()
		<-done
		// Each pass is one pipeline of XREADGROUPs (one product: one command). A pass that found
		// something is followed by at least busyRest, one that found nothing by idleRest; one that read
		// a full batch (a backlog) by none, and there are at most purchases/workerRead of those (each
		// purchase here is an entry of its own).
		limit := int64(elapsed/busyRest) + purchases/workerRead + 2
		if got := reads.Load(); got > limit {
			t.Fatalf("%d admissions over %s were read in %d passes, want at most %d (a rest of %s after a busy pass)",
				purchases, elapsed.Round(time.Millisecond), got, limit, busyRest)
		}
		t.Logf("%d admissions over %s: %d passes", purchases, elapsed.Round(time.Millisecond), reads.Load())
	})
}

func TestFoundIn_AFullReadOfAnyStreamIsABacklog(t *testing.T) {
	msgs := func(n int) []redis.XMessage { return make([]redis.XMessage, n) }
	for _, c := range []struct {
		reads []read
		want  found
	}{
		{nil, foundNothing},
		{[]read{{msgs: msgs(0)}, {msgs: msgs(0)}}, foundNothing},
		{[]read{{msgs: msgs(0)}, {msgs: msgs(3)}}, foundSome},
		{[]read{{msgs: msgs(3)}, {msgs: msgs(workerRead)}, {msgs: msgs(0)}}, foundFull},
		{[]read{{msgs: msgs(workerRead + 2)}}, foundFull}, // take-overs ride the read
	} {
		if got := foundIn(c.reads, workerRead); got != c.want {
			t.Errorf("foundIn(%d reads) = %d, want %d", len(c.reads), got, c.want)
		}
	}
}

// After a take-over the worker may apply a release or withdrawal before the entry it undoes; the
// record keeps the later state either way (a stock admission's record is the scripts' own, which
// the release wrote: the worker only lists it).
func TestWorker_OutOfOrderEntriesKeepTheFinalState(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 1))
		ctx := context.Background()
		const pseudo = "0123456789abcdef0123456789abcdef"
		adm, bidID := st.svc.o.IDs.NextString(), st.svc.o.IDs.NextString()
		s.Client.HSet(ctx, recordsKey(s.Keys, "p", adm), adm, "released u 1 1000 - 2000")
		s.Client.SAdd(ctx, st.bids().OwnersKey(), "lot") // as the auction's creation indexes it
		stock := func(msg redis.XMessage) func() error {
			apply, err := st.svc.applier(ownerStream{kind: stockOf(st.svc), owner: "p"}, msg)
			if err != nil {
				t.Fatal(err)
			}
			return func() error { return apply(ctx) }
		}
		bid := func(msg redis.XMessage) func() error {
			apply, err := st.svc.applier(ownerStream{kind: st.bids(), owner: "lot"}, msg)
			if err != nil {
				t.Fatal(err)
			}
			return func() error { return apply(ctx) }
		}
		for _, apply := range []func() error{
			stock(redis.XMessage{ID: "2-0", Values: map[string]any{"type": "released",
				"admission": adm, "user": "u", "qty": "1", "at": "1000", "released_at": "2000"}}),
			stock(redis.XMessage{ID: "1-0", Values: map[string]any{"type": "admitted",
				"admission": adm, "user": "u", "qty": "1", "at": "1000"}}),
			bid(redis.XMessage{ID: "2-0", Values: map[string]any{"type": "withdrawn",
				"bid": bidID, "user": pseudo, "amount": "500", "at": "1000", "withdrawn_at": "2000"}}),
			bid(redis.XMessage{ID: "1-0", Values: map[string]any{"type": "bid",
				"bid": bidID, "user": pseudo, "amount": "500", "at": "1000"}}),
		} {
			if err := apply(); err != nil {
				t.Fatal(err)
			}
		}
		if a := st.AdminGet("/api/admissions/" + adm); a.JSON["state"] != "released" || a.JSON["released_at"] != "1970-01-01T00:00:02.000Z" {
			t.Fatalf("admission after out-of-order entries: %s", a.Body)
		}
		if a := st.AdminGet("/api/admissions"); num(a.JSON["total_count"]) != 1 {
			t.Fatalf("listed: %s", a.Body)
		}
		items, _ := st.AdminGet("/api/users/" + pseudo + "/bids?pseudonym=1").JSON["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["state"] != "withdrawn" {
			t.Fatalf("bid after out-of-order entries: %v", items)
		}
		lb := st.AdminGet("/api/leaderboard").JSON["items"].([]any)
		if len(lb) != 0 {
			t.Fatalf("leaderboard after an admission and its release: %v", lb)
		}
	})
}
