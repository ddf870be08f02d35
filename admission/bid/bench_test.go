package bid

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkBidPlace is the store's side of accepted bids as a replica sends them under load: one
// pipeline of bid.lua calls, each on an auction of its own (64 auctions in turn, each bid a cent
// above its auction's last, a new bidder per bid), and a pass of the event worker every perPass bids. It reports
// Redis's CPU per accepted bid (redis-µs/bid) and the scripts' own time (script-µs/bid):
// docs/benchmarks.md "A hot product at the limit" holds a bid to the same budget as a stock admission.
func BenchmarkBidPlace(b *testing.B) {
	// perPass: the bids between two passes of the event worker, about what 25 ms (its rest after a
	// pass that found work) hold at 10,000 bids a second.
	const lots, pipeline, perPass = 64, 16, 256
	s := storetest.Redis(b)
	ctx := context.Background()
	svc := admission.New(admission.Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
		Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	as := make([]auctions.Auction, lots)
	for i := range as {
		as[i] = auction("a"+strconv.Itoa(i), "1.00", "0.01", time.Hour)
	}
	if err := svc.Apply(ctx, auctions.With(&config.Config{}, as...), nil); err != nil {
		b.Fatal(err)
	}
	w := svc.Worker("bench")
	amounts := make([]int64, lots)
	for i := range amounts {
		amounts[i] = 100
	}
	cs := make([]admission.Claim, pipeline)
	var n int64
	p0, s0 := storetest.RedisCPU(b, s.Client)
	for b.Loop() {
		for i := range cs {
			a := int(n % lots)
			n++
			id := strconv.FormatInt(n, 10)
			amounts[a]++
			user, e := svc.Pseudonym("bidder-"+id, "")
			if e != nil {
				b.Fatal(e)
			}
			cs[i] = admission.Claim{Owner: as[a].ID, User: user, ID: id, Value: amounts[a]}
		}
		for _, p := range of(svc).placeNow(ctx, cs) {
			if p.err != nil || p.code != 0 {
				b.Fatalf("bid: %+v", p)
			}
		}
		if n%perPass == 0 {
			if !w.Pass(ctx) {
				b.Fatal("the event worker found nothing to apply")
			}
		}
	}
	for w.Pass(ctx) {
	}
	b.StopTimer()
	p1, s1 := storetest.RedisCPU(b, s.Client)
	b.ReportMetric((p1-p0)/float64(n), "redis-µs/bid")
	b.ReportMetric((s1-s0)/float64(n), "script-µs/bid")
}
