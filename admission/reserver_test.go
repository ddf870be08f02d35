package admission

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// reserve.lua counts a purchase's units before it checks the per-user limit and takes them back when
// the limit refuses: every refusal leaves the buyers' counts as they were, and no buyer who was
// refused gets a count of 0. When both the limit and the stock refuse, the limit is the reason.
func TestReserve_RefusalsLeaveTheBuyersCountsAsTheyWere(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
			Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
		if err := svc.Apply(ctx, products.With(&config.Config{}, product("p", 5, 2)), nil); err != nil {
			t.Fatal(err)
		}
		n := 0
		buyer := func(name string, qty int64) Claim {
			n++
			return Claim{Owner: "p", User: svc.pseudonyms.of(name), ID: strconv.Itoa(n), Value: qty}
		}
		reserve := func(cs ...Claim) []int64 {
			t.Helper()
			res, err := reserveNow(ctx, svc, "p", cs)
			if err != nil {
				t.Fatal(err)
			}
			var codes []int64
			var batch []pendingCommit
			for i, r := range res {
				codes = append(codes, r.code)
				if r.code == 0 {
					batch = append(batch, pendingCommit{kind: stockOf(svc), c: cs[i], st: &settling{done: make(chan struct{})}})
				}
			}
			svc.applyCommits(ctx, batch) // settled: the buyers' claims no longer hold their next purchase
			return codes
		}
		counts := func() map[string]string {
			return s.Client.HGetAll(ctx, buyersKey(s.Keys, "p")).Val()
		}
		if got := reserve(buyer("a", 2), buyer("b", 1)); !slices.Equal(got, []int64{0, 0}) {
			t.Fatalf("first call: codes %v", got)
		}
		// 2 units left. a is at the limit (stock would allow it), b buys its second, c wants 2 of the 1 left.
		if got := reserve(buyer("a", 1), buyer("b", 1), buyer("c", 2)); !slices.Equal(got, []int64{4, 0, 1}) {
			t.Fatalf("second call: codes %v, want [4 0 1]", got)
		}
		// 1 unit left. a and b are at the limit, a asks for 2 (the stock could not serve it either), b for 1 (it could).
		if got := reserve(buyer("a", 2), buyer("b", 1), buyer("e", 1)); !slices.Equal(got, []int64{4, 4, 0}) {
			t.Fatalf("third call: codes %v, want [4 4 0]", got)
		}
		if got := reserve(buyer("e", 2), buyer("c", 1)); !slices.Equal(got, []int64{4, 1}) {
			t.Fatalf("sold out: codes %v, want [4 1]", got)
		}
		want := map[string]string{svc.pseudonyms.of("a"): "2", svc.pseudonyms.of("b"): "2", svc.pseudonyms.of("e"): "1"}
		if got := counts(); !maps.Equal(got, want) {
			t.Fatalf("buyers' counts %v, want %v (c, always refused, has none)", got, want)
		}
		if left := s.Client.Get(ctx, stockKey(s.Keys, "p")).Val(); left != "0" {
			t.Fatalf("stock %s, want 0", left)
		}
	})
}
