package admission

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// BenchmarkStockReserveAndCommit is the store's side of stock admissions as a replica sends them
// under load: one reserve.lua call for a group of purchases (new buyers, ample stock), one
// commits.lua call for the same group, and one pass of the event worker (XREADGROUP, apply.lua,
// XACK), on the package's private redis-server. Besides time per
// admission it reports what Redis spent per admission: redis-µs/adm is the redis-server process's
// CPU (INFO cpu: scripts, commands and the network), script-µs/adm the scripts' own time (INFO
// commandstats, evalsha). Redis is one shared core for every replica: these are the budget figures.
func BenchmarkStockReserveAndCommit(b *testing.B) {
	for _, group := range []int{1, 16} {
		b.Run("group="+strconv.Itoa(group), func(b *testing.B) {
			s := storetest.Redis(b)
			ctx := context.Background()
			svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
				Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
			if err := svc.Apply(ctx, &config.Config{Products: []config.Product{product("p", 1<<50, 1)}}, nil); err != nil {
				b.Fatal(err)
			}
			w := &worker{s: svc, consumer: "bench", groups: map[string]bool{}}
			// Each reserve call carries the commits of the call before (committer.go).
			calls := make([]Claim, 2*group)
			commits, claims := calls[:group], calls[group:]
			var n int64
			p0, s0 := storetest.RedisCPU(b, s.Client)
			for b.Loop() {
				for i := range claims {
					n++
					// A real id: the records are kept per day of their id's time (records.go).
					id := svc.o.IDs.NextString()
					claims[i] = Claim{Owner: "p", User: svc.pseudonyms.of("buyer-" + id), ID: id, Value: 1}
				}
				send := calls
				if n == int64(group) {
					send = claims // the first call: nothing to commit yet
				}
				res, err := svc.reserveNow(ctx, "p", send)
				if err != nil || res[len(send)-1].code != 0 {
					b.Fatalf("reserve: %v %v", res, err)
				}
				for i, c := range claims {
					c.Commit = true
					commits[i] = c
				}
				if f, _ := w.pass(ctx); f == foundNothing {
					b.Fatal("the event worker found nothing to apply")
				}
			}
			b.StopTimer()
			if _, err := svc.reserveNow(ctx, "p", commits); err != nil { // the last call's commits
				b.Fatal(err)
			}
			p1, s1 := storetest.RedisCPU(b, s.Client)
			if left := s.Client.ZCard(ctx, unsettledKey(s.Keys, "p")).Val(); left != 0 {
				b.Fatalf("%d admissions left unsettled", left)
			}
			if applied := indexedCount(b, svc); applied != n {
				b.Fatalf("the worker applied %d of %d admissions", applied, n)
			}
			b.ReportMetric((p1-p0)/float64(n), "redis-µs/adm")
			b.ReportMetric((s1-s0)/float64(n), "script-µs/adm")
		})
	}
}

// BenchmarkIdleWorkerPass is what the event worker costs while nothing happens: one pass over the
// streams of every product, none with anything new (each replica runs one every 100 ms, and the
// ledger worker another). It reports Redis's CPU per pass (redis-µs/pass) and the round trips a pass
// makes (trips/pass): both grow with the number of products, and Redis is one core for every replica.
func BenchmarkIdleWorkerPass(b *testing.B) {
	for _, products := range []int{10, 100, 1000} {
		b.Run("products="+strconv.Itoa(products), func(b *testing.B) {
			s := storetest.Redis(b)
			ctx := context.Background()
			svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
				Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
			ps := make([]config.Product, products)
			for i := range ps {
				ps[i] = product("p"+strconv.Itoa(i), 100, 1)
			}
			if err := svc.Apply(ctx, &config.Config{Products: ps}, nil); err != nil {
				b.Fatal(err)
			}
			// One admission each, applied, so that every stream and group exists.
			for i := range ps {
				c := Claim{Owner: ps[i].ID, User: svc.pseudonyms.of("u"), ID: strconv.Itoa(i + 1), Value: 1}
				if res, err := svc.reserveNow(ctx, ps[i].ID, []Claim{c}); err != nil || res[0].code != 0 {
					b.Fatalf("reserve: %v %v", res, err)
				}
			}
			w := &worker{s: svc, consumer: "bench", groups: map[string]bool{}}
			for f := foundSome; f != foundNothing; f, _ = w.pass(ctx) {
			}
			w.claimAt = time.Now().Add(time.Hour) // the take-over sweep is a separate, rarer cost
			trips := storetest.CountTrips(s.Client)
			p0, _ := storetest.RedisCPU(b, s.Client)
			t0 := trips.Load()
			for b.Loop() {
				if f, _ := w.pass(ctx); f != foundNothing {
					b.Fatal("an idle pass found work")
				}
			}
			b.StopTimer()
			p1, _ := storetest.RedisCPU(b, s.Client)
			b.ReportMetric((p1-p0)/float64(b.N), "redis-µs/pass")
			b.ReportMetric(float64(trips.Load()-t0-1)/float64(b.N), "trips/pass")
		})
	}
}

// BenchmarkBidPlace is the store's side of accepted bids as a replica sends them under load: one
// pipeline of bid.lua calls, each on an auction of its own (64 auctions in turn, each bid a cent
// above its auction's last, a new bidder per bid), and a pass of the event worker every perPass bids. It reports
// Redis's CPU per accepted bid (redis-µs/bid) and the scripts' own time (script-µs/bid):
// docs/benchmarks.md "A hot product at the limit" holds a bid to the same budget as a stock admission.
func BenchmarkBidPlace(b *testing.B) {
	// perPass: the bids between two passes of the event worker, about what 25 ms (its rest after a
	// pass that found work) hold at 10,000 bids a second.
	const auctions, pipeline, perPass = 64, 16, 256
	s := storetest.Redis(b)
	ctx := context.Background()
	svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
		Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	as := make([]config.Auction, auctions)
	for i := range as {
		as[i] = auction("a"+strconv.Itoa(i), "1.00", "0.01", time.Hour)
	}
	if err := svc.Apply(ctx, &config.Config{Auctions: as}, nil); err != nil {
		b.Fatal(err)
	}
	w := &worker{s: svc, consumer: "bench", groups: map[string]bool{}}
	amounts := make([]int64, auctions)
	for i := range amounts {
		amounts[i] = 100
	}
	cs := make([]Claim, pipeline)
	var n int64
	p0, s0 := storetest.RedisCPU(b, s.Client)
	for b.Loop() {
		for i := range cs {
			a := int(n % auctions)
			n++
			id := strconv.FormatInt(n, 10)
			amounts[a]++
			cs[i] = Claim{Owner: as[a].ID, User: svc.pseudonyms.of("bidder-" + id), ID: id, Value: amounts[a]}
		}
		for _, p := range svc.bid().placeNow(ctx, cs) {
			if p.err != nil || p.code != 0 {
				b.Fatalf("bid: %+v", p)
			}
		}
		if n%perPass == 0 {
			if f, _ := w.pass(ctx); f == foundNothing {
				b.Fatal("the event worker found nothing to apply")
			}
		}
	}
	for f := foundSome; f != foundNothing; f, _ = w.pass(ctx) {
	}
	b.StopTimer()
	p1, s1 := storetest.RedisCPU(b, s.Client)
	b.ReportMetric((p1-p0)/float64(n), "redis-µs/bid")
	b.ReportMetric((s1-s0)/float64(n), "script-µs/bid")
}
