package admission

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

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
			if err := svc.Apply(ctx, products.With(&config.Config{}, product("p", 1<<50, 1)), nil); err != nil {
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
				res, err := reserveNow(ctx, svc, "p", send)
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
			if _, err := reserveNow(ctx, svc, "p", commits); err != nil { // the last call's commits
				b.Fatal(err)
			}
			p1, s1 := storetest.RedisCPU(b, s.Client)
			if left := s.Client.ZCard(ctx, groupedOf(svc).UnsettledSet("p")).Val(); left != 0 {
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
	for _, n := range []int{10, 100, 1000} {
		b.Run("products="+strconv.Itoa(n), func(b *testing.B) {
			s := storetest.Redis(b)
			ctx := context.Background()
			svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
				Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
			ps := make([]products.Product, n)
			for i := range ps {
				ps[i] = product("p"+strconv.Itoa(i), 100, 1)
			}
			if err := svc.Apply(ctx, products.With(&config.Config{}, ps...), nil); err != nil {
				b.Fatal(err)
			}
			// One admission each, applied, so that every stream and group exists.
			for i := range ps {
				c := Claim{Owner: ps[i].ID, User: svc.pseudonyms.of("u"), ID: strconv.Itoa(i + 1), Value: 1}
				if res, err := reserveNow(ctx, svc, ps[i].ID, []Claim{c}); err != nil || res[0].code != 0 {
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

// BenchmarkAdminListPage reads a page of every admin record (GET /api/admissions) from 20,000 records:
// the newest page and the one halfway down, with the records in one product's list (read from the
// page's place) and in two products' (merged), on the package's private redis-server.
func BenchmarkAdminListPage(b *testing.B) {
	const records, size = 20000, 20
	for _, owners := range []int{1, 2} {
		s := storetest.Redis(b)
		ctx := context.Background()
		svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
			Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(), RecordsRetention: 24 * time.Hour})
		ps := []products.Product{product("p0", 1<<40, 1), product("p1", 1<<40, 1)}
		if err := svc.Apply(ctx, products.With(&config.Config{}, ps...), nil); err != nil {
			b.Fatal(err)
		}
		table := tableOf(stockOf(svc))
		now := time.Now().UnixMilli()
		for at := 0; at < records; at += 500 {
			var apps []Application
			pipe := s.Client.Pipeline()
			for i := at; i < at+500; i++ {
				owner, id, user := "p"+strconv.Itoa(i%owners), svc.o.IDs.NextString(), "u"+strconv.Itoa(i)
				pipe.HSet(ctx, recordsKey(s.Keys, owner, id), id, "admitted "+user+" 1 "+strconv.FormatInt(now+int64(i), 10))
				apps = append(apps, Application{Table: table, Owner: owner, ID: id, User: user})
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			if err := svc.applyBatch(ctx, apps); err != nil {
				b.Fatal(err)
			}
		}
		for _, page := range []int64{1, records / size / 2} {
			b.Run("owners="+strconv.Itoa(owners)+"/page="+strconv.FormatInt(page, 10), func(b *testing.B) {
				for b.Loop() {
					found, total, err := svc.page(ctx, table, "", page, size)
					if err != nil || len(found) != size || total != records {
						b.Fatalf("page %d: %d records of %d, %v", page, len(found), total, err)
					}
				}
			})
		}
	}
}
