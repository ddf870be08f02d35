package admission

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/luascript"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
)

// addToCart posts the cart-add route's JSON (exact ids, unknown_product: pass) as email.
func (st *stack) addToCart(sku, email string) answer {
	st.T.Helper()
	req, _ := http.NewRequest("POST", st.Public.URL+"/carts/c1/items",
		strings.NewReader(fmt.Sprintf(`{"sku": %q, "email": %q, "quantity": 1}`, sku, email)))
	req.Header.Set("Content-Type", "application/json")
	return do(st.T, req)
}

// Products and auctions created through the admin API are guarded in every
// spelling from their creation on, on every replica, and no longer once deleted; an unrelated id
// still passes. The origin never sees a refused spelling.
func TestIDMatch_AdminCreatedIDsAreGuardedInEverySpellingUntilDeleted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("42", 10, 1))
		other := st.replica(2)
		if a := st.AdminSend("POST", "/api/products", "application/json", `{"id": "Sneaker-B", "stock": 5}`); a.Status != 200 {
			t.Fatalf("create Sneaker-B: %d %s", a.Status, a.Body)
		}
		for _, edge := range []*stack{st, other} {
			for i, sku := range []string{"sneaker-b", "SNEAKER-B", "042", "42abc"} {
				before := st.Hits.Load()
				// (The cart route's refusal.json leaves the fields out.)
				if a := edge.addToCart(sku, fmt.Sprintf("u%d@example.com", i)); a.Status != 400 || !strings.Contains(a.Body, "INVALID_REQUEST") || st.Hits.Load() != before {
					t.Errorf("sku %q: want 400 field product, origin untouched; got %d %s (origin reached %d times)", sku, a.Status, a.Body, st.Hits.Load()-before)
				}
			}
		}
		if n := st.remaining("Sneaker-B"); n != 5 {
			t.Fatalf("Sneaker-B's stock %d after refusals, want 5", n)
		}
		if a := st.addToCart("jersey", "j@example.com"); a.Status != 200 || a.Header.Get("X-Body") == "" {
			t.Fatalf("an unrelated id: %d %s", a.Status, a.Body)
		}
		if a := st.AdminSend("DELETE", "/api/products/Sneaker-B", "", ""); a.Status != 200 {
			t.Fatalf("delete Sneaker-B: %d %s", a.Status, a.Body)
		}
		if a := other.addToCart("sneaker-b", "after@example.com"); a.Status != 200 {
			t.Fatalf("sneaker-b once Sneaker-B is deleted: %d %s", a.Status, a.Body)
		}

		// Auctions: an auction pushed through the admin API, a bid route with unknown_product: pass.
		ends := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		if a := st.AdminSend("PUT", "/api/auctions/Lot-B", "application/json",
			fmt.Sprintf(`{"starting_price": "10.00", "ends_at": %q}`, ends)); a.Status != 200 {
			t.Fatalf("push Lot-B: %d %s", a.Status, a.Body)
		}
		before := st.BidHits.Load()
		if a := other.BidOn("/open/auctions/", "lot-b", "bob", "5.00"); a.Status != 400 || a.JSON["field"] != "auction" || st.BidHits.Load() != before {
			t.Errorf("a bid on lot-b: %d %s", a.Status, a.Body)
		}
		if a := other.BidOn("/open/auctions/", "lot-c", "bob", "5.00"); a.Status != 200 {
			t.Errorf("a bid on an unrelated auction: %d %s", a.Status, a.Body)
		}
	})
}

// productScript is the stock kind's product.lua, run as its package runs it, to write a product as an
// earlier build did.
var productScript = Script("product.lua", luascript.From(os.DirFS("stock"), "scripts").Read("product.lua"))

// auctionScript is the bid kind's auction.lua, run as its package runs it, to write an auction as an
// earlier build did.
var auctionScript = Script("auction.lua", luascript.From(os.DirFS("bid"), "scripts").Read("auction.lua"))

// Products and auctions that a build before id_match created (in the store's index, not in the
// spellings index) are guarded in every spelling once a replica of this build has started (Run).
func TestIDMatch_IDsOfAnEarlierBuildAreGuardedAfterStart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		// What an earlier build wrote for a product and an auction: the records and the indexes.
		if err := productScript.Run(ctx, s.Client, []string{infoKey(s.Keys, "Old-1"), stockKey(s.Keys, "Old-1")},
			"create", "Old", 100, "", 1, 5).Err(); err != nil {
			t.Fatal(err)
		}
		if err := auctionScript.Run(ctx, s.Client, []string{s.Keys.Entity("a", "Old-Lot", "info")}, 1000, 100,
			time.Now().Add(time.Hour).UnixMilli(), "", "0").Err(); err != nil {
			t.Fatal(err)
		}
		s.Client.SAdd(ctx, productIndexKey(s.Keys), "Old-1")
		s.Client.SAdd(ctx, New(Options{Store: s}).kindOf(auctions.Kind).OwnersKey(), "Old-Lot")

		st := newStack(t, s)
		st.StartWorker() // indexes them at start
		eventually(t, 5*time.Second, "old-1 refused", func() bool {
			return st.addToCart("old-1", "a@example.com").Status == 400
		})
		// Auctions are indexed after products (one kind after the other): wait for them too.
		eventually(t, 5*time.Second, "OLD-LOT refused", func() bool {
			a := st.BidOn("/open/auctions/", "OLD-LOT", "bob", "50.00")
			return a.Status == 400 && a.JSON["field"] == "auction"
		})
		if a := st.addToCart("Old-1", "a@example.com"); a.Status != 200 || st.remaining("Old-1") != 4 {
			t.Errorf("Old-1 itself: %d %s", a.Status, a.Body)
		}
	})
}

// BenchmarkIDMatch is one request of a JSON add-to-cart route with unknown_product: pass through
// edgeq's proxy on the package's private redis-server: a guarded product (admitted: reserve and
// commit), an id edgeq does not guard (passed) and another spelling of the guarded product (exact
// ids: refused). trips/op counts the round trips to Redis each costs.
func BenchmarkIDMatch(b *testing.B) {
	s := storetest.Redis(b)
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	svc := New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), MaxBodyBytes: 4096, ClaimTTL: time.Minute,
		Prefix: "/_edgeq", Responder: &web.Responder{Brand: "edgeq", Lang: "en"}, Logger: logger, Registry: prometheus.NewRegistry()})
	if err := svc.Apply(ctx, products.With(&config.Config{}, product("sneaker-a", 1<<50, 1)), nil); err != nil {
		b.Fatal(err)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	b.Cleanup(origin.Close)
	originURL, _ := url.Parse(origin.URL)
	p := proxy.New(proxy.Options{Origin: originURL, OriginTimeout: 10 * time.Second, Prefix: "/_edgeq",
		Steps: []proxy.Step{svc}, Responder: svc.responder, Metrics: metrics.New(prometheus.NewRegistry()), Logger: logger})
	table, err := p.Compile([]config.Route{{Name: "cart", Match: "POST /cart", OnStoreError: config.OnStoreErrorClosed,
		Admission: config.Admission{Type: products.Kind, Own: map[string]string{"product": "json:sku"}, User: "json:email",
			UnknownOwner: config.UnknownPass, ReleaseOn: []string{"5xx", "error"}}}})
	if err != nil {
		b.Fatal(err)
	}
	p.Use(table)
	for _, bc := range []struct{ name, sku string }{
		{"guarded", "sneaker-a"}, {"unguarded", "jersey"}, {"another-spelling", "SNEAKER-A"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			trips := storetest.CountTrips(s.Client)
			run := strconv.FormatInt(time.Now().UnixNano(), 36) // new buyers in every run (-count)
			var n int
			for b.Loop() {
				n++
				body := `{"sku": "` + bc.sku + `", "email": "` + bc.name + run + strconv.Itoa(n) + `@example.com"}`
				req := httptest.NewRequest("POST", "/cart", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				p.ServeHTTP(w, req)
				if w.Code != 200 && w.Code != 400 {
					b.Fatalf("%s: %d %s", bc.sku, w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(trips.Load())/float64(n), "trips/op")
		})
	}
}
