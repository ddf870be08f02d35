package stock

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// edgeq_admissions_unsettled counts, over every product, the admissions neither committed nor given
// back for longer than UnsettledAfter; newer ones do not count.
func TestWorker_TheUnsettledGaugeCountsEveryProduct(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		// Five products, one fresh unsettled admission each: not counted.
		gen := ids.New(1)
		svc := admission.New(admission.Options{Store: s, IDs: gen, IdentityKey: []byte("k"), ClaimTTL: time.Minute,
			Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
		k := svc.Kind(products.Kind).(*stockKind)
		ps := make([]products.Product, 5)
		for i := range ps {
			ps[i] = product("p"+strconv.Itoa(i), 10, 1)
		}
		if err := svc.Apply(ctx, products.With(&config.Config{}, ps...), nil); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			c := admission.Claim{Owner: p.ID, User: "u", ID: gen.NextString(), Value: 1}
			if res, err := k.reserveNow(ctx, p.ID, []admission.Claim{c}); err != nil || res[0].Code != 0 {
				t.Fatalf("reserve %s: %v %v", p.ID, res, err)
			}
		}
		old := float64(time.Now().Add(-UnsettledAfter - time.Minute).UnixMilli())
		for p, n := range map[string]int{"p0": 2, "p3": 1, "p4": 3} {
			for i := range n {
				s.Client.ZAdd(ctx, k.UnsettledSet(p), redis.Z{Score: old, Member: p + "-old-" + strconv.Itoa(i)})
			}
		}
		svc.Worker("test").Pass(ctx)
		if got := testutil.ToFloat64(k.metrics.unsettled); got != 6 {
			t.Fatalf("edgeq_admissions_unsettled = %v, want 6", got)
		}
		if u, err := k.unsettled(ctx, time.Now()); err != nil || len(u) != 5+6 {
			t.Fatalf("the unsettled list: %d items, %v; want 11", len(u), err)
		}
	})
}
