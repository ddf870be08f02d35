package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// With unknown_product: pass and products 42 and sneaker-a, the bodies "042",
// "0042", "SNEAKER-A", "Sneaker-A" and "42abc" reached the shop without admission: no stock taken, no
// per-user limit, while the shop read them (case-insensitive collation, intval, to_i, parseInt) as the
// guarded products. Each such spelling is now admitted as the guarded product (the route's id_match
// says the shop reads it so) or refused 400 with field, never passed; an id no reading takes for a
// guarded one still passes.
func TestIDMatch_AnotherSpellingOfAGuardedProductIsAdmittedAsItOrRefused(t *testing.T) {
	const (
		admitted = "admitted as "
		refused  = "refused"
		passed   = "passed"
	)
	for _, tc := range []struct {
		idMatch string // "" leaves the key out: the default, exact
		want    map[string]string
	}{
		{"", map[string]string{
			"42": admitted + "42", "sneaker-a": admitted + "sneaker-a", "jersey": passed,
			"042": refused, "0042": refused, "42abc": refused, "+42": refused, "0x2A": refused,
			"SNEAKER-A": refused, "Sneaker-A": refused,
		}},
		{"case_insensitive", map[string]string{
			"42": admitted + "42", "jersey": passed,
			"SNEAKER-A": admitted + "sneaker-a", "Sneaker-A": admitted + "sneaker-a",
			"042": refused, "0042": refused, "42abc": refused, "+42": refused, "0x2A": refused,
		}},
		{"numeric", map[string]string{
			"sneaker-a": admitted + "sneaker-a", "jersey": passed,
			"042": admitted + "42", "0042": admitted + "42", "42abc": admitted + "42",
			"+42": refused, "0x2A": refused, "SNEAKER-A": refused, "Sneaker-A": refused,
		}},
	} {
		name := tc.idMatch
		if name == "" {
			name = "exact"
		}
		t.Run(name, func(t *testing.T) {
			redisSrv := privateRedis(t)
			origin := newRecordingOrigin(t)
			idMatch := ""
			if tc.idMatch != "" {
				idMatch = ", id_match: " + tc.idMatch
			}
			in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
products:
  - {id: "42", stock: 100}
  - {id: "sneaker-a", stock: 100}
routes:
  - name: cart
    match: "POST /api/cart"
    admission: {type: stock, product: "json:sku", user: "json:email", unknown_product: pass%s}
`, origin.URL, redisSrv.Addr(), idMatch))
			add := func(sku, email string) reply {
				t.Helper()
				body, _ := json.Marshal(map[string]string{"sku": sku, "email": email})
				req, _ := http.NewRequest("POST", in.public+"/api/cart", strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return reply{resp.StatusCode, resp.Header, string(b)}
			}
			remaining := func(id string) float64 {
				t.Helper()
				r, err := send("GET", in.public+"/_edgeq/products/"+id, http.Header{"Accept": {"application/json"}})
				if err != nil {
					t.Fatal(err)
				}
				var p struct {
					RemainingStock float64 `json:"remaining_stock"`
				}
				json.Unmarshal([]byte(r.body), &p)
				return p.RemainingStock
			}
			n := 0
			for sku, want := range tc.want {
				n++
				email := fmt.Sprintf("buyer%d@example.com", n)
				before42, beforeSneaker := remaining("42"), remaining("sneaker-a")
				origin.reset()
				r := add(sku, email)
				seen := origin.requests()
				taken := map[string]float64{"42": before42 - remaining("42"), "sneaker-a": beforeSneaker - remaining("sneaker-a")}
				switch {
				case want == passed:
					if r.status != 200 || len(seen) != 1 || seen[0].header.Get("Edgeq-Admission-Id") != "" || taken["42"]+taken["sneaker-a"] != 0 {
						t.Errorf("sku %q: want passed without admission; got %d %s, shop saw %d requests, stock taken %v", sku, r.status, r.body, len(seen), taken)
					}
				case want == refused:
					if r.status != 400 || !strings.Contains(r.body, `"INVALID_REQUEST"`) || !strings.Contains(r.body, `"field":"product"`) ||
						len(seen) != 0 || taken["42"]+taken["sneaker-a"] != 0 {
						t.Errorf("sku %q: want 400 INVALID_REQUEST field product, shop untouched; got %d %s, shop saw %d requests, stock taken %v",
							sku, r.status, r.body, len(seen), taken)
					}
				default:
					as := strings.TrimPrefix(want, admitted)
					if r.status != 200 || len(seen) != 1 || seen[0].header.Get("Edgeq-Admission-Id") == "" || taken[as] != 1 ||
						taken["42"]+taken["sneaker-a"] != 1 || !strings.Contains(seen[0].body, fmt.Sprintf(`"sku":%q`, sku)) {
						t.Errorf("sku %q: want admitted as %s (one unit, Edgeq-Admission-Id, the body as sent); got %d %s, shop saw %v, stock taken %v",
							sku, as, r.status, r.body, seen, taken)
					}
					// The per-user limit (1) holds across spellings: the same buyer, the guarded id itself. The
					// first purchase's commit may still be on its way (its answer reached the buyer first):
					// 409 PURCHASE_IN_PROGRESS says to wait, and the buyer asks again, as a shop's page does.
					again := add(as, email)
					for deadline := time.Now().Add(5 * time.Second); again.status == 409 &&
						strings.Contains(again.body, "PURCHASE_IN_PROGRESS") && time.Now().Before(deadline); {
						time.Sleep(50 * time.Millisecond)
						again = add(as, email)
					}
					if again.status != 409 || !strings.Contains(again.body, "ALREADY_PURCHASED") {
						t.Errorf("sku %q, then %q by the same buyer: %d %s", sku, as, again.status, again.body)
					}
				}
			}
		})
	}
}

// The same for bids: with auctions_source and a shop that answers for any spelling of its
// auction without an "id" field, a 150.00 bid on LOT-A reached the shop while lot-a stood at 500.00
// (edgeq created LOT-A from the shop's answer). Such a bid is now refused (exact) or admitted as lot-a
// (case_insensitive), where it is too low; the shop is not asked about the other spelling.
func TestIDMatch_ABidOnAnotherSpellingNeverPassesBelowTheHighest(t *testing.T) {
	for _, idMatch := range []string{"", "case_insensitive"} {
		name := idMatch
		if name == "" {
			name = "exact"
		}
		t.Run(name, func(t *testing.T) {
			redisSrv := privateRedis(t)
			origin := newRecordingOrigin(t)
			var asked atomic.Int64
			ends := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
			shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				// A case-insensitive collation, and an answer without "id".
				if strings.EqualFold(strings.TrimPrefix(r.URL.Path, "/api/auctions/"), "lot-a") {
					fmt.Fprintf(w, `{"starting_price":"100.00","min_increment":"1.00","ends_at":%q}`, ends)
					return
				}
				http.NotFound(w, r)
			}))
			t.Cleanup(shop.Close)
			setting := ""
			if idMatch != "" {
				setting = ", id_match: " + idMatch
			}
			in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
auctions_source: {url: %q, timeout: 2s, cache_ttl: 60s}
routes:
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-User"%s}
`, origin.URL, redisSrv.Addr(), shop.URL+"/api/auctions/{id}", setting))
			bid := func(auction, user, amount string) reply {
				t.Helper()
				req, _ := http.NewRequest("POST", in.public+"/auctions/"+auction+"/bid", strings.NewReader(url.Values{"amount": {amount}}.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Accept", "application/json")
				req.Header.Set("X-User", user)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return reply{resp.StatusCode, resp.Header, string(b)}
			}
			if r := bid("lot-a", "alice", "500.00"); r.status != 200 || asked.Load() != 1 {
				t.Fatalf("the first bid on lot-a: %d %s (shop asked %d times)", r.status, r.body, asked.Load())
			}
			origin.reset()
			r := bid("LOT-A", "bob", "150.00")
			if idMatch == "" {
				if r.status != 400 || !strings.Contains(r.body, `"INVALID_REQUEST"`) || !strings.Contains(r.body, `"field":"auction"`) {
					t.Errorf("150.00 on LOT-A: want 400 INVALID_REQUEST field auction; got %d %s", r.status, r.body)
				}
			} else if r.status != 409 || !strings.Contains(r.body, "BID_TOO_LOW") || !strings.Contains(r.body, `"highest_amount":"500.00"`) {
				t.Errorf("150.00 on LOT-A: want 409 BID_TOO_LOW at 500.00 (admitted as lot-a); got %d %s", r.status, r.body)
			}
			if seen := origin.requests(); len(seen) != 0 || asked.Load() != 1 {
				t.Errorf("150.00 on LOT-A reached the shop %d times; auctions_source asked %d times", len(seen), asked.Load())
			}
			// Above the highest: admitted as lot-a under case_insensitive, refused under exact.
			r = bid("Lot-A", "bob", "600.00")
			seen := origin.requests()
			if idMatch == "" && (r.status != 400 || len(seen) != 0) {
				t.Errorf("600.00 on Lot-A (exact): want 400, shop untouched; got %d %s, shop saw %d", r.status, r.body, len(seen))
			}
			if idMatch != "" && (r.status != 200 || len(seen) != 1 || seen[0].header.Get("Edgeq-Bid-Id") == "") {
				t.Errorf("600.00 on Lot-A (case_insensitive): want admitted as lot-a; got %d %s, shop saw %d", r.status, r.body, len(seen))
			}
			want := map[string]string{"": "500.00", "case_insensitive": "600.00"}[idMatch]
			if h, _ := send("GET", in.public+"/_edgeq/auctions/lot-a/highest-bid", nil); !strings.Contains(h.body, fmt.Sprintf(`"amount":%q`, want)) {
				t.Errorf("lot-a's highest bid: %s, want %s", h.body, want)
			}
			if h, _ := send("GET", in.public+"/_edgeq/auctions/LOT-A/highest-bid", nil); h.status != 404 {
				t.Errorf("edgeq knows an auction LOT-A: %d %s", h.status, h.body)
			}
		})
	}
}
