package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A field the usual origin frameworks could read from another place or spelling
// than edgeq is refused as ambiguous (400, nothing reserved, the origin not contacted). Each case
// was admitted before, with edgeq and the named framework reading different values.
func TestAmbiguousFields_AreRefusedWhereOriginsWouldReadAnotherValue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 100, 100))
		send := func(method, path, contentType, body string, header http.Header) answer {
			req, _ := http.NewRequest(method, st.Public.URL+path, strings.NewReader(body))
			req.Header.Set("Accept", "application/json")
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			for k, v := range header {
				req.Header[k] = v // as given: Go's client sends header names unchanged
			}
			return do(t, req)
		}
		const form, jsonCT = "application/x-www-form-urlencoded", "application/json"
		user := http.Header{"X-User": {"alice"}}
		session := http.Header{"Cookie": {"shop_session=alice"}}
		cases := []struct {
			name                   string
			method, path, ct, body string
			header                 http.Header
		}{
			// Go's encoding/json matches {"Quantity": 50} to a "quantity" field; JS, Python, PHP do not.
			{"JSON key in another case (Go)", "POST", "/json-checkout/p", jsonCT, `{"Quantity": 5}`, session},
			{"nested JSON key in another case (Go)", "POST", "/api/cart", jsonCT, `{"items":[{"SKU":"p","qty":1}]}`, http.Header{"Cookie": {"session=s1"}}},
			// PHP $_REQUEST, Flask request.values, Rails params, Laravel input(), Go FormValue merge
			// the query and the body.
			{"form field only in the query (PHP, Flask, Go)", "POST", "/checkout/p?quantity=5", form, "", user},
			{"form field in the query and the body", "POST", "/checkout/p?quantity=5", form, "quantity=1", user},
			{"JSON field also in the query (Rails, Laravel)", "POST", "/json-checkout/p?quantity=5", jsonCT, `{"quantity": 1}`, session},
			{"query field also in a form body (Rails, PHP)", "GET", "/buy?p=p", form, "p=q", user},
			// ASP.NET binds form names in any case; PHP and Rails read "quantity[]" as "quantity".
			{"form name in another case (ASP.NET)", "POST", "/checkout/p", form, "QUANTITY=5", user},
			{"form name as an array (PHP, Rails)", "POST", "/checkout/p", form, "quantity[]=5", user},
			{"query name in another case (ASP.NET)", "GET", "/buy?P=q", "", "", user},
			// CGI-style origins (PHP-FPM, WSGI, Rack, Puma) see X-User and X_User as one HTTP_X_USER.
			{"user header with an underscore (CGI)", "POST", "/checkout/p", form, "", http.Header{"X-User": {"alice"}, "X_User": {"bob"}}},
			{"user header only with an underscore (CGI)", "POST", "/checkout/p", form, "", http.Header{"X_User": {"bob"}}},
			// PHP and Rack percent-decode cookie names.
			{"session cookie name percent-encoded (PHP, Rack)", "POST", "/json-checkout/p", jsonCT, `{"quantity": 1}`,
				http.Header{"Cookie": {"shop_session=alice; shop%5Fsession=bob"}}},
			{"session cookie name with a dot (PHP)", "POST", "/json-checkout/p", jsonCT, `{"quantity": 1}`,
				http.Header{"Cookie": {"shop.session=bob; shop_session=alice"}}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := st.Hits.Load()
				a := send(c.method, c.path, c.ct, c.body, c.header)
				if a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" || st.Hits.Load() != before {
					t.Fatalf("%d %s (origin reached %d times)", a.Status, a.Body, st.Hits.Load()-before)
				}
			})
		}
		// A field in the other place than the one edgeq reads is named as such, given once or twice.
		for _, c := range []struct{ path, ct, body, message string }{
			{"/checkout/p?quantity=5", form, "", "This field belongs in the request body, not in the query string."},
			{"/json-checkout/p?Quantity=5", jsonCT, `{"quantity": 1}`, "This field belongs in the request body, not in the query string."},
		} {
			h := user
			if c.ct == jsonCT {
				h = session
			}
			if a := send("POST", c.path, c.ct, c.body, h); a.Status != 400 || a.JSON["field"] != "quantity" || a.JSON["message"] != c.message {
				t.Fatalf("POST %s %s: %d %s", c.path, c.body, a.Status, a.Body)
			}
		}
		if a := send("GET", "/buy?p=p", form, "p=q", user); a.Status != 400 || a.JSON["field"] != "p" ||
			a.JSON["message"] != "This field belongs in the query string, not in the request body." {
			t.Fatalf("GET /buy?p=p with p in the body: %d %s", a.Status, a.Body)
		}
		if r := st.remaining("p"); r != 100 {
			t.Fatalf("ambiguous requests reserved units: %d left", r)
		}
		// The same requests without the second spelling are admitted.
		for _, c := range []struct {
			method, path, ct, body string
			header                 http.Header
		}{
			{"POST", "/json-checkout/p", jsonCT, `{"quantity": 1}`, session},
			{"POST", "/checkout/p?other=1", form, "quantity=1", http.Header{"X-User": {"carol"}}},
			{"GET", "/buy?p=p", "", "", http.Header{"X-User": {"dan"}}},
		} {
			if a := send(c.method, c.path, c.ct, c.body, c.header); a.Status != 200 {
				t.Fatalf("%s %s: %d %s", c.method, c.path, a.Status, a.Body)
			}
		}
	})
}

// One shopper's identity in another spelling (percent-escapes that PHP, Rack,
// Express and ASP.NET decode in cookie values, letter case, white space) is the same user: before,
// shop_session=dave, %64ave and d%61ve bought three units under a limit of one, and
// seller%2Dsession bid on the seller's own auction.
func TestIdentities_AreNormalisedBeforePseudonyms(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 100, 1))
		st.StartWorker()
		st.AddAuctions(func() auctions.Auction {
			a := auction("lot", "10.00", "1.00", time.Hour)
			a.Owner = "seller-session"
			return a
		}())
		buy := func(session string) answer {
			req, _ := http.NewRequest("POST", st.Public.URL+"/json-checkout/p", strings.NewReader(`{"quantity": 1}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Cookie", "shop_session="+session)
			return do(t, req)
		}
		if a := buy("dave"); a.Status != 200 {
			t.Fatalf("first purchase: %d %s", a.Status, a.Body)
		}
		// The commit of the first purchase is queued just after its answer (the committer): until it
		// is applied the same user is told PURCHASE_IN_PROGRESS. Wait for it, then try the spellings.
		eventually(t, 5*time.Second, "the first purchase settled", func() bool {
			return buy("dave").JSON["error"] == "ALREADY_PURCHASED"
		})
		for _, spelling := range []string{"%64ave", "d%61ve", "DAVE", "Dave", "%20dave", "dave%20", "d%41ve"} {
			if a := buy(spelling); a.Status != 409 || a.JSON["error"] != "ALREADY_PURCHASED" {
				t.Errorf("%s: %d %s", spelling, a.Status, a.Body)
			}
		}
		if n := st.Hits.Load(); n != 1 {
			t.Fatalf("%d purchases reached the shop, want 1", n)
		}
		if r := st.remaining("p"); r != 99 {
			t.Fatalf("%d units left, want 99", r)
		}
		for _, empty := range []string{"%20", "+", "%09"} {
			if a := buy(empty); a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" || a.JSON["field"] != "user" {
				t.Errorf("identity %q: %d %s", empty, a.Status, a.Body)
			}
		}
		bid := func(session string) answer {
			req, _ := http.NewRequest("POST", st.Public.URL+"/cookie/auctions/lot/bid", strings.NewReader("amount=20.00"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Cookie", "shop_session="+session)
			return do(t, req)
		}
		for _, spelling := range []string{"seller-session", "seller%2Dsession", "Seller-Session", "seller%2dsession"} {
			if a := bid(spelling); a.Status != 403 || a.JSON["error"] != "SELF_BID" {
				t.Errorf("the owner as %s: %d %s", spelling, a.Status, a.Body)
			}
		}
		if a := bid("bidder"); a.Status != 200 {
			t.Fatalf("another bidder: %d %s", a.Status, a.Body)
		}
		// The admin API finds the buyer under any spelling too.
		eventually(t, 10*time.Second, "the purchase listed under DAVE", func() bool {
			return num(st.AdminGet("/api/users/DAVE/admissions").JSON["total_count"]) == 1
		})
	})
}

// A shop's one add-to-cart URL serves every product. With unknown_product:
// pass, 50 buyers adding the flash SKU get exactly its stock admitted, and every other SKU is added
// normally (forwarded without admission, counted as unknown_passed). The buyer is a guest's e-mail in
// the body, normalised (Alice@Example.com is alice@example.com).
func TestUnknownProducts_PassWhileTheGuardedOneSellsItsStock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("flash", 5, 1))
		add := func(sku, email string) answer {
			req, _ := http.NewRequest("POST", st.Public.URL+"/carts/c1/items",
				strings.NewReader(fmt.Sprintf(`{"sku": %q, "quantity": 1, "email": %q}`, sku, email)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			return do(t, req)
		}
		var wg sync.WaitGroup
		var admitted, soldOut, others atomic.Int64
		for i := range 50 {
			wg.Go(func() {
				switch a := add("flash", fmt.Sprintf("buyer%d@example.com", i)); {
				case a.Status == 200:
					admitted.Add(1)
				case a.Status == 409 && strings.Contains(a.Body, `"INSUFFICIENT_STOCK"`): // in the route's refusal.json shape
					soldOut.Add(1)
				default:
					t.Errorf("flash for buyer %d: %d %s", i, a.Status, a.Body)
				}
			})
			wg.Go(func() {
				if a := add(fmt.Sprintf("tee-%d", i), fmt.Sprintf("buyer%d@example.com", i)); a.Status == 200 {
					others.Add(1)
				} else {
					t.Errorf("tee-%d: %d %s", i, a.Status, a.Body)
				}
			})
		}
		wg.Wait()
		if admitted.Load() != 5 || soldOut.Load() != 45 || others.Load() != 50 || st.remaining("flash") != 0 {
			t.Fatalf("admitted %d, sold out %d, other SKUs added %d, flash left %d", admitted.Load(), soldOut.Load(),
				others.Load(), st.remaining("flash"))
		}
		admissions := 0
		st.IDs.Range(func(any, any) bool { admissions++; return true })
		if admissions != 5 {
			t.Fatalf("%d requests reached the shop with an admission id, want 5", admissions)
		}
		if got := testutil.ToFloat64(st.svc.metrics.admissions.WithLabelValues("stock", "unknown_passed")); got != 50 {
			t.Fatalf("unknown_passed = %v", got)
		}
		// The guest's e-mail is one buyer in any spelling.
		st2 := newStack(t, s, product("limited", 5, 1))
		add2 := func(email string) answer {
			req, _ := http.NewRequest("POST", st2.Public.URL+"/carts/c2/items",
				strings.NewReader(fmt.Sprintf(`{"sku": "limited", "email": %q}`, email)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			return do(t, req)
		}
		if a := add2("alice@example.com"); a.Status != 200 {
			t.Fatalf("first: %d %s", a.Status, a.Body)
		}
		if a := add2(" Alice@Example.COM "); a.Status != 409 || !strings.Contains(a.Body, `"ALREADY_PURCHASED"`) {
			t.Fatalf("the same guest in capitals: %d %s", a.Status, a.Body)
		}
		// A route without pass still refuses unknown products, and an unknown auction passes on a bid
		// route with pass.
		if a := st2.Checkout("nope", "u", nil); a.Status != 404 || a.JSON["error"] != "PRODUCT_NOT_FOUND" {
			t.Fatalf("unknown product on a refusing route: %d %s", a.Status, a.Body)
		}
		if a := st2.BidOn("/open/auctions/", "no-such-lot", "u", "5.00"); a.Status != 200 || a.Header.Get("X-Bid-Id") != "" {
			t.Fatalf("unknown auction on a passing bid route: %d %s", a.Status, a.Body)
		}
		if got := testutil.ToFloat64(st2.svc.metrics.admissions.WithLabelValues("bid", "unknown_passed")); got != 1 {
			t.Fatalf("bid unknown_passed = %v", got)
		}
		if a := st2.Bid("no-such-lot", "u", "5.00"); a.Status != 404 || a.JSON["error"] != "AUCTION_NOT_FOUND" {
			t.Fatalf("unknown auction on a refusing bid route: %d %s", a.Status, a.Body)
		}
	})
}

// A route's refusal.json gives edgeq's refusals the shape the shop's own script reads
// (error.message), while browsers navigating still get edgeq's page and other routes the standard
// body.
func TestRefusalJSON_InTheShopsShape(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("flash", 1, 1))
		add := func(email string) answer {
			req, _ := http.NewRequest("POST", st.Public.URL+"/carts/c1/items",
				strings.NewReader(fmt.Sprintf(`{"sku": "flash", "email": %q}`, email)))
			req.Header.Set("Content-Type", "application/json")
			return do(t, req)
		}
		if a := add("first@example.com"); a.Status != 200 {
			t.Fatalf("first: %d %s", a.Status, a.Body)
		}
		a := add("second@example.com")
		var shaped struct {
			Error struct{ Message, Code, Left string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(a.Body), &shaped); err != nil || a.Status != 409 ||
			shaped.Error.Message != "Sorry, this item is sold out." || shaped.Error.Code != "INSUFFICIENT_STOCK" ||
			shaped.Error.Left != "0" || a.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Fatalf("refusal: %d %s (%v)", a.Status, a.Body, err)
		}
		// A 400 from field reading takes the same shape; its message is escaped into the string.
		req, _ := http.NewRequest("POST", st.Public.URL+"/carts/c1/items", strings.NewReader(`{"sku": "flash", "email": "a@b", "Email": "x"}`))
		req.Header.Set("Content-Type", "application/json")
		if a := do(t, req); a.Status != 400 || json.Unmarshal([]byte(a.Body), &shaped) != nil || shaped.Error.Code != "INVALID_REQUEST" {
			t.Fatalf("ambiguous field: %d %s", a.Status, a.Body)
		}
		// Another route answers the standard body.
		if a := st.Checkout("flash", "carol", nil); a.JSON["error"] != "INSUFFICIENT_STOCK" || a.JSON["success"] != false {
			t.Fatalf("standard body: %d %s", a.Status, a.Body)
		}
	})
}

// A browser whose bid is too low sees the highest bid and a way back to the auction it came from;
// another site's Referer leads home.
func TestBidTooLow_PageShowsTheHighestBidAndLeadsBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "10.00", "1.00", time.Hour))
		if a := st.Bid("lot", "alice", "25.00"); a.Status != 200 {
			t.Fatalf("first bid: %d %s", a.Status, a.Body)
		}
		page := func(referer string) answer {
			req, _ := http.NewRequest("POST", st.Public.URL+"/auctions/lot/bid", strings.NewReader("amount=12.00"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Accept", "text/html")
			req.Header.Set("X-User", "bob")
			req.Header.Set("Referer", referer)
			return do(t, req)
		}
		a := page(st.Public.URL + "/auctions/lot?tab=bids")
		if a.Status != 409 || !strings.Contains(a.Body, "The highest bid is now 25.00.") ||
			!strings.Contains(a.Body, `href="/auctions/lot?tab=bids"`) {
			t.Fatalf("bid too low page: %d %s", a.Status, a.Body)
		}
		if a := page("https://evil.example/phish"); !strings.Contains(a.Body, `href="/"`) || strings.Contains(a.Body, "evil.example") {
			t.Fatalf("another site's Referer: %s", a.Body)
		}
	})
}
