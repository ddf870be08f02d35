package admission

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// 2,000 concurrent buyers for 50 units through edgeq: exactly 50 reach the origin,
// 1,950 are refused with INSUFFICIENT_STOCK, nothing is left, and the admin views agree.
// A buyer answered 503 STORE_UNAVAILABLE tries again, as the answer asks: on 2 CPUs under the race
// detector a grouped reserve call can outlast the store's call timeout (store.CallTimeout), and edgeq
// fails closed, giving back what the call may have taken. Until that is given back the same buyer may
// be told its purchase is in progress or done; it waits and tries again. Every buyer ends admitted or
// sold out all the same, and no unit is sold twice.
func TestStock_FlashSaleNeverOversells(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		const buyers, units = 2000, 50
		st := newStack(t, s, product("sneaker", units, 1))
		st.StartWorker()
		var admitted, soldOut, other, retried atomic.Int64
		var wg sync.WaitGroup
		for i := range buyers {
			wg.Go(func() {
				user := fmt.Sprintf("buyer-%d", i)
				a := st.Checkout("sneaker", user, nil)
				for failed, deadline := false, time.Now().Add(20*time.Second); time.Now().Before(deadline); {
					code, _ := a.JSON["error"].(string)
					if a.Status == 503 && code == "STORE_UNAVAILABLE" {
						failed = true
					} else if !failed || a.Status != 409 || (code != "PURCHASE_IN_PROGRESS" && code != "ALREADY_PURCHASED") {
						break
					}
					retried.Add(1)
					time.Sleep(100 * time.Millisecond)
					a = st.Checkout("sneaker", user, nil)
				}
				switch {
				case a.Status == 200:
					admitted.Add(1)
				case a.Status == 409 && a.JSON["error"] == "INSUFFICIENT_STOCK":
					soldOut.Add(1)
				default:
					other.Add(1)
					t.Errorf("buyer %d: %d %s", i, a.Status, a.Body)
				}
			})
		}
		wg.Wait()
		if n := retried.Load(); n > 0 {
			t.Logf("%d tries again after a 503 (a starved machine)", n)
		}
		if admitted.Load() != units || soldOut.Load() != buyers-units || other.Load() != 0 {
			t.Fatalf("admitted %d, sold out %d, other %d", admitted.Load(), soldOut.Load(), other.Load())
		}
		if h := st.Hits.Load(); h != units {
			t.Fatalf("%d requests reached the origin, want exactly %d", h, units)
		}
		if r := st.remaining("sneaker"); r != 0 {
			t.Fatalf("remaining stock %d", r)
		}
		eventually(t, 10*time.Second, "worker caught up", func() bool {
			return num(st.AdminGet("/api/admissions?page_size=1").JSON["total_count"]) == units
		})
		lb := st.AdminGet("/api/leaderboard")
		items, _ := lb.JSON["items"].([]any)
		if len(items) != 1 || num(items[0].(map[string]any)["sales"]) != units {
			t.Fatalf("leaderboard %s", lb.Body)
		}
		// Every admission the origin saw is in the admin views.
		st.IDs.Range(func(id, _ any) bool {
			if a := st.AdminGet("/api/admissions/" + id.(string)); a.Status != 200 || a.JSON["state"] != "admitted" {
				t.Errorf("admission %s: %d %s", id, a.Status, a.Body)
			}
			return true
		})
		if p := st.AdminGet("/api/products").JSON; num(p["total_count"]) != 1 {
			t.Fatalf("products %v", p)
		}
		if got := testutil.ToFloat64(st.svc.metrics.admissions.WithLabelValues("stock", "insufficient_stock")); got != buyers-units {
			t.Fatalf("insufficient_stock counter %v", got)
		}
	})
}

// One user sending 20 concurrent checkouts gets exactly one.
func TestStock_OneUserConcurrentCheckoutsGetOne(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("sneaker", 100, 1))
		st.Delay.Store(int64(50 * time.Millisecond)) // keep the first in flight while the others arrive
		var ok, inProgress, already atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				a := st.Checkout("sneaker", "the-same-user", nil)
				switch {
				case a.Status == 200:
					ok.Add(1)
				case a.JSON["error"] == "PURCHASE_IN_PROGRESS":
					inProgress.Add(1)
				case a.JSON["error"] == "ALREADY_PURCHASED":
					already.Add(1)
				default:
					t.Errorf("%d %s", a.Status, a.Body)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 1 || inProgress.Load()+already.Load() != 19 {
			t.Fatalf("ok %d, in progress %d, already %d", ok.Load(), inProgress.Load(), already.Load())
		}
		if a := st.Checkout("sneaker", "the-same-user", nil); a.Status != 409 || a.JSON["error"] != "ALREADY_PURCHASED" {
			t.Fatalf("afterwards: %d %s", a.Status, a.Body)
		}
		if st.Hits.Load() != 1 || st.remaining("sneaker") != 99 {
			t.Fatalf("origin hits %d, remaining %d", st.Hits.Load(), st.remaining("sneaker"))
		}
	})
}

// A buyer's next purchase that arrives after the shop answered the last one, while edgeq is still
// passing that answer on (its commit not handed over yet), waits for the commit instead of being
// told PURCHASE_IN_PROGRESS about a purchase that is over.
func TestStock_ANextPurchaseAfterTheShopAnsweredWaitsForTheCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("sneaker", 100, 2))
		hold := make(chan struct{})
		st.Hold.Store(hold)
		req, _ := http.NewRequest("POST", st.Public.URL+"/checkout/sneaker", strings.NewReader(""))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-User", "quick-buyer")
		first, err := http.DefaultClient.Do(req) // returns with the shop's headers; the body is held
		if err != nil {
			t.Fatal(err)
		}
		if first.StatusCode != 200 {
			t.Fatalf("first purchase: %d", first.StatusCode)
		}
		st.Hold.Store(make(chan struct{})) // only the first answer is held
		close(st.Hold.Load().(chan struct{}))
		second := make(chan answer, 1)
		go func() { second <- st.Checkout("sneaker", "quick-buyer", nil) }()
		time.Sleep(100 * time.Millisecond) // the second is at edgeq while the first answer is still copied
		close(hold)
		io.Copy(io.Discard, first.Body)
		first.Body.Close()
		if a := <-second; a.Status != 200 {
			t.Fatalf("second purchase within the limit of 2: %d %s", a.Status, a.Body)
		}
		if a := st.Checkout("sneaker", "quick-buyer", nil); a.Status != 409 || a.JSON["error"] != "ALREADY_PURCHASED" {
			t.Fatalf("third: %d %s", a.Status, a.Body)
		}
		if st.remaining("sneaker") != 98 {
			t.Fatalf("remaining %d, want 98", st.remaining("sneaker"))
		}
	})
}

// An origin answering 500, or timing out on a route whose release_on names timeout, gives the unit
// back; a later buyer gets it. (Without timeout in release_on a timeout is held:
// TestSettle_TimeoutAfterTheRequestWasSentIsHeld.)
func TestStock_OriginFailureGivesTheUnitBack(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStackReleasing(t, s, 500*time.Millisecond, []string{"5xx", "error", "timeout"}, product("last", 1, 1))
		st.StartWorker()
		st.Status.Store(500)
		if a := st.Checkout("last", "alice", nil); a.Status != 500 {
			t.Fatalf("origin 500: %d", a.Status)
		}
		if r := st.remaining("last"); r != 1 {
			t.Fatalf("after a 500 the unit is not back: remaining %d", r)
		}
		st.Status.Store(200)
		st.Delay.Store(int64(2 * time.Second)) // beyond the proxy's 500 ms origin timeout
		if a := st.Checkout("last", "bob", nil); a.Status != 504 {
			t.Fatalf("slow origin: %d %s", a.Status, a.Body)
		}
		if r := st.remaining("last"); r != 1 {
			t.Fatalf("after a timeout the unit is not back: remaining %d", r)
		}
		st.Delay.Store(0)
		if a := st.Checkout("last", "carol", nil); a.Status != 200 {
			t.Fatalf("a later buyer: %d %s", a.Status, a.Body)
		}
		// alice, refused by the origin, may buy again: her record was released.
		if a := st.Checkout("last", "alice", nil); a.Status != 409 || a.JSON["error"] != "INSUFFICIENT_STOCK" {
			t.Fatalf("alice after carol: %d %s", a.Status, a.Body)
		}
		if r := st.remaining("last"); r != 0 {
			t.Fatalf("remaining %d", r)
		}
		eventually(t, 10*time.Second, "events applied", func() bool {
			return num(st.AdminGet("/api/admissions").JSON["total_count"]) == 3
		})
		lb := st.AdminGet("/api/leaderboard")
		items, _ := lb.JSON["items"].([]any)
		if len(items) != 1 || num(items[0].(map[string]any)["sales"]) != 1 {
			t.Fatalf("leaderboard after two releases and one sale: %s", lb.Body)
		}
		if got := testutil.ToFloat64(st.svc.metrics.admissions.WithLabelValues("stock", "released")); got != 2 {
			t.Fatalf("released counter %v", got)
		}
	})
}

// Claims are fields of one hash per product that nothing deletes (no key, TTL, GET or DEL per
// admission): a claim holds only while its admission is unsettled and younger than the claim TTL, so
// the next purchase takes over a settled one, and two purchases of one user in one reserve call still
// get one. A commit never marks a released admission committed, and
// never brings back a record that expired (HSET would make one without a TTL).
func TestStock_ClaimsOfSettledAdmissionsAreTakenOver(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 3))
		ctx := context.Background()
		u, v := st.svc.pseudonyms.of("u"), st.svc.pseudonyms.of("v")
		reserve := func(cs ...Claim) []int64 {
			t.Helper()
			res, err := reserveNow(ctx, st.svc, "p", cs)
			if err != nil {
				t.Fatal(err)
			}
			codes := make([]int64, len(res))
			for i, r := range res {
				codes[i] = r.code
			}
			return codes
		}
		commit := func(ids ...Claim) {
			t.Helper()
			var batch []pendingCommit
			for _, c := range ids {
				batch = append(batch, pendingCommit{kind: stockOf(st.svc), c: c, st: &settling{done: make(chan struct{})}})
			}
			st.svc.applyCommits(ctx, batch)
		}
		unsettled := func(id string) bool {
			return s.Client.ZScore(ctx, groupedOf(st.svc).UnsettledSet("p"), id).Err() == nil
		}
		state := func(id string) string {
			t.Helper()
			return admissionState(storedRecord(t, s, "p", id).state, unsettled(id))
		}
		c1, c2, c3 := Claim{Owner: "p", User: u, ID: "1", Value: 1}, Claim{Owner: "p", User: u, ID: "2", Value: 1}, Claim{Owner: "p", User: u, ID: "3", Value: 1}
		if got := reserve(c1); got[0] != 0 {
			t.Fatalf("first purchase: code %d", got[0])
		}
		// The claims expire with their product's sale: a claim TTL after the last one written.
		if ttl := s.Client.PTTL(ctx, groupedOf(st.svc).Claims("p")).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("the claims hash's TTL is %v, want up to the claim TTL (a minute)", ttl)
		}
		if got := reserve(c2); got[0] != 3 {
			t.Fatalf("a purchase while the first is unsettled: code %d, want 3 (in flight)", got[0])
		}
		commit(c1)
		if state("1") != "committed" || unsettled("1") {
			t.Fatalf("after the commit: state %q, unsettled %v", state("1"), unsettled("1"))
		}
		if n := s.Client.HLen(ctx, groupedOf(st.svc).Claims("p")).Val(); n != 0 {
			t.Fatalf("%d claims after a batched commit, want none: the claim ends with its admission", n)
		}
		if got := reserve(c2); got[0] != 0 {
			t.Fatalf("a purchase after the commit: code %d, want 0 (the settled claim is taken over)", got[0])
		}
		if held := s.Client.HGet(ctx, groupedOf(st.svc).Claims("p"), u).Val(); held != "2" {
			t.Fatalf("the claim holds %q, want 2", held)
		}
		if got := reserve(c3); got[0] != 3 {
			t.Fatalf("a purchase while the second is unsettled: code %d, want 3", got[0])
		}
		// A claim older than the claim TTL (a minute here) no longer counts, settled or not: the
		// replica that admitted it may have died before the shop answered.
		s.Client.ZAdd(ctx, groupedOf(st.svc).UnsettledSet("p"), redis.Z{Score: float64(time.Now().Add(-2 * time.Minute).UnixMilli()), Member: "2"})
		if got := reserve(c3); got[0] != 0 {
			t.Fatalf("a purchase after the claim TTL: code %d, want 0", got[0])
		}
		// Two purchases of one user in one call: the second sees the first's claim, whose admission
		// is not in the unsettled set yet (that ZADD comes at the end of the call).
		if got := reserve(Claim{Owner: "p", User: v, ID: "4", Value: 1}, Claim{Owner: "p", User: v, ID: "5", Value: 1}); got[0] != 0 || got[1] != 3 {
			t.Fatalf("one user twice in one call: codes %v, want [0 3]", got)
		}
		// A released admission is not committed by a commit that comes after.
		if code, err := stockOf(st.svc).Release(ctx, Claim{Owner: "p", ID: "2"}); err != nil || code != 0 {
			t.Fatalf("release: %v %v", code, err)
		}
		commit(c2)
		if state("2") != "released" {
			t.Fatalf("a commit after the release made it %q", state("2"))
		}
		// A commit that comes after the record expired (a day late) leaves no record behind: HSET
		// would bring it back without a TTL.
		s.Client.HDel(ctx, recordsKey(s.Keys, "p", "4"), "4")
		commit(Claim{Owner: "p", User: v, ID: "4", Value: 1})
		if n := s.Client.HExists(ctx, recordsKey(s.Keys, "p", "4"), "4").Val(); n || unsettled("4") {
			t.Fatalf("a commit after the record expired: record exists %v, unsettled %v", n, unsettled("4"))
		}
		if r := st.remaining("p"); r != 7 {
			t.Fatalf("remaining %d, want 7 (1, 3 and 4 kept, 2 released)", r)
		}
	})
}

// Bad input gets a clear error, changes nothing and never reaches the origin.
func TestStock_BadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 1))
		post := func(path, contentType, body string, header http.Header) answer {
			req, _ := http.NewRequest("POST", st.Public.URL+path, strings.NewReader(body))
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			req.Header.Set("Accept", "application/json")
			for k, v := range header {
				req.Header[k] = v
			}
			return do(t, req)
		}
		user := http.Header{"X-User": {"u1"}}
		session := http.Header{"Cookie": {"session=s1"}}
		form := "application/x-www-form-urlencoded"
		cases := []struct {
			name     string
			path, ct string
			body     string
			header   http.Header
			status   int
			code     string
		}{
			{"unknown product", "/checkout/nope", form, "", user, 404, "PRODUCT_NOT_FOUND"},
			{"malformed product id", "/checkout/a.b", form, "", user, 400, "INVALID_REQUEST"},
			{"quantity 0", "/checkout/p", form, "quantity=0", user, 400, "INVALID_REQUEST"},
			{"quantity over the per-user limit", "/checkout/p", form, "quantity=2", user, 400, "INVALID_REQUEST"},
			{"quantity abc", "/checkout/p", form, "quantity=abc", user, 400, "INVALID_REQUEST"},
			{"quantity -1", "/checkout/p", form, "quantity=-1", user, 400, "INVALID_REQUEST"},
			{"malformed form", "/checkout/p", form, "quantity=%zz", user, 400, "INVALID_REQUEST"},
			{"no user", "/checkout/p", form, "", nil, 400, "INVALID_REQUEST"},
			{"wrong content type for the form", "/checkout/p", "text/plain", "quantity=1", user, 415, "UNSUPPORTED_MEDIA_TYPE"},
			{"oversized body", "/checkout/p", form, "quantity=1&pad=" + strings.Repeat("x", 5000), user, 413, "PAYLOAD_TOO_LARGE"},
			{"missing product in JSON", "/api/cart", "application/json", `{"items":[]}`, session, 400, "INVALID_REQUEST"},
			{"malformed JSON", "/api/cart", "application/json", `{"items":[{"sku":"p"`, session, 400, "INVALID_REQUEST"},
			{"JSON product of the wrong type", "/api/cart", "application/json", `{"items":[{"sku":{"x":1}}]}`, session, 400, "INVALID_REQUEST"},
			{"JSON with trailing data", "/api/cart", "application/json", `{"items":[{"sku":"p"}]} {}`, session, 400, "INVALID_REQUEST"},
			{"JSON with a stray closing brace", "/api/cart", "application/json", `{"items":[{"sku":"p"}]} }`, session, 400, "INVALID_REQUEST"},
			{"wrong content type for JSON", "/api/cart", form, `items=p`, session, 415, "UNSUPPORTED_MEDIA_TYPE"},
			{"JSON quantity 2", "/api/cart", "application/json", `{"items":[{"sku":"p","qty":2}]}`, session, 400, "INVALID_REQUEST"},
			{"unknown product in JSON", "/api/cart", "application/json", `{"items":[{"sku":"nope","qty":1}]}`, session, 404, "PRODUCT_NOT_FOUND"},
			// A field given twice is ambiguous (edgeq and the origin could read different copies).
			{"quantity twice", "/checkout/p", form, "quantity=1&quantity=5", user, 400, "INVALID_REQUEST"},
			{"two user headers", "/checkout/p", form, "", http.Header{"X-User": {"u1", "u2"}}, 400, "INVALID_REQUEST"},
			{"two session cookies", "/api/cart", "application/json", `{"items":[{"sku":"p"}]}`, http.Header{"Cookie": {"session=s1; session=s2"}}, 400, "INVALID_REQUEST"},
			{"session cookie in two lines", "/api/cart", "application/json", `{"items":[{"sku":"p"}]}`, http.Header{"Cookie": {"session=s1", "x=1; session=s2"}}, 400, "INVALID_REQUEST"},
			{"JSON key twice", "/api/cart", "application/json", `{"items":[{"sku":"p","sku":"q"}]}`, session, 400, "INVALID_REQUEST"},
			{"JSON key twice in another case", "/api/cart", "application/json", `{"items":[{"sku":"p","SKU":"q"}]}`, session, 400, "INVALID_REQUEST"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a := post(c.path, c.ct, c.body, c.header)
				if a.Status != c.status || a.JSON["error"] != c.code || a.JSON["success"] != false {
					t.Fatalf("%d %s, want %d %s", a.Status, a.Body, c.status, c.code)
				}
			})
		}
		for _, query := range []string{"p=p&p=q", "p=x&p=a;p=p"} { // Rack 2 splits at ";" too
			req, _ := http.NewRequest("GET", st.Public.URL+"/buy?"+query, nil)
			req.Header.Set("Accept", "application/json")
			req.Header.Set("X-User", "u1")
			if a := do(t, req); a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" || a.JSON["field"] != "p" {
				t.Errorf("query %s: %d %s", query, a.Status, a.Body)
			}
		}
		if st.Hits.Load() != 0 {
			t.Fatalf("%d bad requests reached the origin", st.Hits.Load())
		}
		if r := st.remaining("p"); r != 10 {
			t.Fatalf("stock changed: %d", r)
		}
		ctx := context.Background()
		if n, _ := s.Client.HLen(ctx, buyersKey(s.Keys, "p")).Result(); n != 0 {
			t.Fatalf("buyer records: %d", n)
		}
		for _, stream := range []string{stockOf(st.svc).Stream("p"), admitsStream(stockOf(st.svc), "p")} {
			if n, _ := s.Client.XLen(ctx, stream).Result(); n != 0 {
				t.Fatalf("%s: %d entries", stream, n)
			}
		}
		// The good versions of the same requests work, and the origin gets the body byte for byte.
		a := post("/api/cart", "application/json", `{"items":[{"sku":"p","qty":1}],"note":"gift"}`, session)
		if a.Status != 200 {
			t.Fatalf("JSON cart: %d %s", a.Status, a.Body)
		}
		if got, _ := url.QueryUnescape(a.Header.Get("X-Body")); got != `{"items":[{"sku":"p","qty":1}],"note":"gift"}` {
			t.Fatalf("the origin got %q", got)
		}
		if a := post("/checkout/p", form, "quantity=1", http.Header{"X-User": {"u2"}}); a.Status != 200 {
			t.Fatalf("form checkout: %d %s", a.Status, a.Body)
		}
	})
}

// Browsers that run out of luck see the sold-out page, not JSON.
func TestStock_SoldOutPageForBrowsers(t *testing.T) {
	st := newStack(t, storetest.Embedded(t), product("p", 0, 1))
	req, _ := http.NewRequest("POST", st.Public.URL+"/checkout/p", strings.NewReader("quantity=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	req.Header.Set("X-User", "u")
	a := do(t, req)
	if a.Status != 409 || !strings.Contains(a.Body, "Sold out") || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	// Through a GET route too.
	req, _ = http.NewRequest("GET", st.Public.URL+"/buy?p=p", nil)
	req.Header.Set("Accept", "text/html")
	req.Header.Set("X-User", "u")
	if a := do(t, req); a.Status != 409 || !strings.Contains(a.Body, "Sold out") {
		t.Fatalf("GET: %d", a.Status)
	}
}

// A worker that dies after reading entries loses none of them and counts none twice.
func TestWorker_TakeOverAfterCrash(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 300, 1))
		for i := range 120 {
			if a := st.Checkout("p", fmt.Sprintf("u%d", i), nil); a.Status != 200 {
				t.Fatal(a.Body)
			}
		}
		// The first worker reads a batch, then dies before handling it.
		crashed := make(chan struct{})
		w := &worker{s: st.svc, consumer: "doomed", groups: map[string]bool{}, stopAfterRead: func(ownerStream, int) bool {
			close(crashed)
			return true
		}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go w.run(ctx)
		<-crashed
		pending, err := s.Client.XPending(ctx, admitsStream(stockOf(st.svc), "p"), groupName).Result()
		if err != nil || pending.Count == 0 {
			t.Fatalf("the crashed worker left nothing pending: %+v %v", pending, err)
		}
		// A second worker takes over the pending entries once they are idle, and reads the rest.
		st.StartWorker()
		eventually(t, 15*time.Second, "all events applied", func() bool {
			return num(st.AdminGet("/api/admissions?page_size=1").JSON["total_count"]) == 120
		})
		lb := st.AdminGet("/api/leaderboard")
		items, _ := lb.JSON["items"].([]any)
		if len(items) != 1 || num(items[0].(map[string]any)["sales"]) != 120 {
			t.Fatalf("leaderboard counts %s, want 120 exactly once", lb.Body)
		}
		eventually(t, 5*time.Second, "nothing pending", func() bool {
			p, err := s.Client.XPending(ctx, admitsStream(stockOf(st.svc), "p"), groupName).Result()
			return err == nil && p.Count == 0
		})
		// Applying an event again (a redelivery) changes nothing.
		msgs, _ := s.Client.XRange(ctx, admitsStream(stockOf(st.svc), "p"), "-", "+").Result()
		apply, err := st.svc.applier(ownerStream{kind: stockOf(st.svc), owner: "p"}, msgs[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := apply(ctx); err != nil {
			t.Fatal(err)
		}
		first := strings.Fields(msgs[0].Values["admissions"].(string))[0]
		before := s.Client.HGet(ctx, recordsKey(s.Keys, "p", first), first).Val()
		if err := apply(ctx); err != nil { // twice
			t.Fatal(err)
		}
		if n := len(indexedIDs(t, st.svc, tableOf(stockOf(st.svc)), "p")); n != 120 {
			t.Fatalf("a redelivered event was indexed twice: %d admissions", n)
		}
		indexed := 0
		for _, list := range usersIndexed(t, st.svc, tableOf(stockOf(st.svc)), "p") {
			indexed += len(list)
		}
		if indexed != 120 {
			t.Fatalf("a redelivered event was indexed twice by user: %d entries", indexed)
		}
		if after := s.Client.HGet(ctx, recordsKey(s.Keys, "p", first), first).Val(); after != before || after == "" {
			t.Fatalf("a redelivered event changed its record: %s -> %s", before, after)
		}
		if num(st.AdminGet("/api/leaderboard").JSON["items"].([]any)[0].(map[string]any)["sales"]) != 120 {
			t.Fatal("the leaderboard moved on a redelivery")
		}
	})
}

// Events that fail every retry go to the dead-letter set; a retry from the admin API applies them.
func TestWorker_DeadLetters(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 1))
		st.StartWorker()
		ctx := context.Background()
		// A malformed event, as a buggy or older writer might leave (its record is the script's).
		adm := st.svc.o.IDs.NextString()
		s.Client.HSet(ctx, recordsKey(s.Keys, "p", adm), adm, "admitted x 1 1")
		if err := s.Client.XAdd(ctx, &redis.XAddArgs{Stream: stockOf(st.svc).Stream("p"), Values: []any{"type", "admitted", "admission", adm, "user", "x", "qty", "many", "at", "1"}}).Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "dead-lettered", func() bool {
			return num(st.AdminGet("/api/dead-letters").JSON["total_count"]) == 1
		})
		// The gauge moves just after the dead letter is written.
		eventually(t, 5*time.Second, "edgeq_dead_letters = 1", func() bool {
			return testutil.ToFloat64(st.svc.metrics.deadLetters) == 1
		})
		dl := st.AdminGet("/api/dead-letters").JSON["items"].([]any)[0].(map[string]any)
		id := dl["id"].(string)
		if a := st.AdminSend("POST", "/api/dead-letters/"+id+"/retry", "", ""); a.Status != 409 {
			t.Fatalf("retrying a malformed event: %d %s", a.Status, a.Body)
		}
		// Fix it in place and retry.
		fixed := fmt.Sprintf(`{"id":%q,"product_id":"p","stream_id":%q,"fields":{"type":"admitted","admission":%q,"user":"x","qty":"1","at":"1"},"error":"","failed_at":""}`, id, dl["stream_id"], adm)
		s.Client.HSet(ctx, deadKey(s.Keys), id, fixed)
		if a := st.AdminGet("/api/admissions"); num(a.JSON["total_count"]) != 0 {
			t.Fatalf("the dead event's admission is listed: %s", a.Body)
		}
		if a := st.AdminSend("POST", "/api/dead-letters/"+id+"/retry", "", ""); a.Status != 200 {
			t.Fatalf("retry: %d %s", a.Status, a.Body)
		}
		if a := st.AdminGet("/api/admissions"); num(a.JSON["total_count"]) != 1 || !strings.Contains(a.Body, adm) {
			t.Fatalf("the retried event's admission: %s", a.Body)
		}
		if num(st.AdminGet("/api/dead-letters").JSON["total_count"]) != 0 {
			t.Fatal("the retried event is still a dead letter")
		}
		if a := st.AdminSend("POST", "/api/dead-letters/nope/retry", "", ""); a.Status != 404 {
			t.Fatalf("unknown dead letter: %d", a.Status)
		}

		// One that can never succeed is dismissed: gone from the list and the gauge, once.
		if err := s.Client.XAdd(ctx, &redis.XAddArgs{Stream: stockOf(st.svc).Stream("p"), Values: []any{"type", "admitted", "admission", "8", "user", "y", "qty", "none", "at", "1"}}).Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "dead-lettered again", func() bool {
			return num(st.AdminGet("/api/dead-letters").JSON["total_count"]) == 1 && testutil.ToFloat64(st.svc.metrics.deadLetters) == 1
		})
		id = st.AdminGet("/api/dead-letters").JSON["items"].([]any)[0].(map[string]any)["id"].(string)
		noKey, _ := http.NewRequest("DELETE", st.Admin.URL+"/api/dead-letters/"+id, nil)
		if a := do(t, noKey); a.Status != 401 {
			t.Fatalf("dismiss without the key: %d", a.Status)
		}
		if a := st.AdminSend("DELETE", "/api/dead-letters/"+id, "", ""); a.Status != 204 {
			t.Fatalf("dismiss: %d %s", a.Status, a.Body)
		}
		if a := st.AdminSend("DELETE", "/api/dead-letters/"+id, "", ""); a.Status != 404 {
			t.Fatalf("dismiss again: %d %s", a.Status, a.Body)
		}
		if n := num(st.AdminGet("/api/dead-letters").JSON["total_count"]); n != 0 || testutil.ToFloat64(st.svc.metrics.deadLetters) != 0 {
			t.Fatalf("after the dismissal: %v listed, gauge %v", n, testutil.ToFloat64(st.svc.metrics.deadLetters))
		}
	})
}

// Admin pages are newest first and stable; deleting an admission removes it from every
// index in one transaction.
func TestAdmin_PaginationAndDelete(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 100, 3))
		st.StartWorker()
		for i := range 25 {
			a := st.Checkout("p", fmt.Sprintf("u%02d", i%5), nil)
			if (i < 15 && a.Status != 200) || (i >= 15 && a.JSON["error"] != "ALREADY_PURCHASED") {
				t.Fatalf("checkout %d: %d %s", i, a.Status, a.Body)
			}
			time.Sleep(2 * time.Millisecond)
		}
		// u00..u04 bought 3 each (15 admissions); the other 10 were refused.
		eventually(t, 10*time.Second, "worker", func() bool {
			return num(st.AdminGet("/api/admissions?page_size=1").JSON["total_count"]) == 15
		})
		var seen []string
		var prev time.Time
		for page := 1; page <= 3; page++ {
			a := st.AdminGet(fmt.Sprintf("/api/admissions?page=%d&page_size=6", page))
			if num(a.JSON["page"]) != int64(page) || num(a.JSON["page_size"]) != 6 || num(a.JSON["total_count"]) != 15 {
				t.Fatalf("page %d: %s", page, a.Body)
			}
			for _, it := range a.JSON["items"].([]any) {
				rec := it.(map[string]any)
				at, err := time.Parse(time.RFC3339, rec["admitted_at"].(string))
				if err != nil {
					t.Fatal(err)
				}
				if !prev.IsZero() && at.After(prev) {
					t.Fatalf("not newest first: %s after %s", at, prev)
				}
				prev = at
				seen = append(seen, rec["id"].(string))
			}
		}
		if len(seen) != 15 {
			t.Fatalf("pages held %d admissions", len(seen))
		}
		uniq := map[string]bool{}
		for _, id := range seen {
			uniq[id] = true
		}
		if len(uniq) != 15 {
			t.Fatal("an admission showed on two pages")
		}
		again := st.AdminGet("/api/admissions?page=2&page_size=6")
		if fmt.Sprint(again.JSON["items"].([]any)[0].(map[string]any)["id"]) != seen[6] {
			t.Fatal("the same page differs between calls")
		}
		if a := st.AdminGet("/api/admissions?page=9&page_size=6"); len(a.JSON["items"].([]any)) != 0 {
			t.Fatalf("past the end: %s", a.Body)
		}
		// Per user, by the raw id or the pseudonym.
		byRaw := st.AdminGet("/api/users/u01/admissions")
		if num(byRaw.JSON["total_count"]) != 3 {
			t.Fatalf("u01: %s", byRaw.Body)
		}
		pseudonym := byRaw.JSON["items"].([]any)[0].(map[string]any)["user"].(string)
		if strings.Contains(byRaw.Body, `"u01"`) {
			t.Fatal("the raw user id is stored or shown")
		}
		if a := st.AdminGet("/api/users/" + pseudonym + "/admissions?pseudonym=1"); num(a.JSON["total_count"]) != 3 {
			t.Fatalf("by pseudonym: %s", a.Body)
		}
		// Delete one: gone from the entity and both indexes.
		victim := byRaw.JSON["items"].([]any)[0].(map[string]any)["id"].(string)
		if a := st.AdminSend("DELETE", "/api/admissions/"+victim, "", ""); a.Status != 200 {
			t.Fatalf("delete: %d %s", a.Status, a.Body)
		}
		ctx := context.Background()
		table := tableOf(stockOf(st.svc))
		product := byRaw.JSON["items"].([]any)[0].(map[string]any)["product_id"].(string)
		if n, _ := s.Client.HExists(ctx, recordsKey(s.Keys, product, victim), victim).Result(); n {
			t.Fatal("the record survived")
		}
		if slices.Contains(indexedIDs(t, st.svc, table, product), victim) {
			t.Fatal("the day's list still names it")
		}
		if list := usersIndexed(t, st.svc, table, product)[pseudonym]; len(list) != 2 || slices.Contains(list, victim) {
			t.Fatalf("the user index names %v, want the user's 2 other admissions", list)
		}
		if a := st.AdminGet("/api/admissions/" + victim); a.Status != 404 {
			t.Fatalf("get after delete: %d", a.Status)
		}
		if a := st.AdminSend("DELETE", "/api/admissions/"+victim, "", ""); a.Status != 404 {
			t.Fatalf("delete twice: %d", a.Status)
		}
		for _, bad := range []string{"/api/admissions?page=0", "/api/admissions?page_size=101", "/api/admissions?page=x", "/api/leaderboard?limit=0"} {
			if a := st.AdminGet(bad); a.Status != 400 {
				t.Errorf("%s: %d", bad, a.Status)
			}
		}
	})
}

// With the store unreachable, a closed route answers 503 and an open one sends the purchase on
// without admission; either way the reserve call that got no answer is compensated once the store
// is back (here it never is: the compensation stays pending).
func TestStock_StoreUnreachable(t *testing.T) {
	dead := store.Wrap(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond}),
		store.Keys{Prefix: "edgeq"})
	st := newStack(t, dead)
	a := st.Checkout("p", "alice", nil)
	if a.Status != 503 || a.JSON["error"] != "STORE_UNAVAILABLE" || a.Header.Get("Retry-After") == "" || st.Hits.Load() != 0 {
		t.Fatalf("closed route with the store down: %d %s (origin hits %d)", a.Status, a.Body, st.Hits.Load())
	}
	// A shopper's browser gets the friendly page, about what it tried (not about a waiting room).
	page, _ := http.NewRequest("POST", st.Public.URL+"/checkout/p", strings.NewReader("quantity=1"))
	page.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	page.Header.Set("Accept", "text/html")
	page.Header.Set("X-User", "carol")
	if a := do(t, page); a.Status != 503 || a.Header.Get("Retry-After") == "" || !strings.Contains(a.Body, "briefly unavailable") ||
		strings.Contains(a.Body, "waiting room") || st.Hits.Load() != 0 {
		t.Fatalf("closed route with the store down, in a browser: %d %s", a.Status, a.Body)
	}
	req, _ := http.NewRequest("POST", st.Public.URL+"/open-checkout/p", nil)
	req.Header.Set("X-User", "bob")
	if a := do(t, req); a.Status != 200 || st.Hits.Load() != 1 {
		t.Fatalf("open route with the store down: %d %s (origin hits %d)", a.Status, a.Body, st.Hits.Load())
	}
	if got := testutil.ToFloat64(st.svc.metrics.admissions.WithLabelValues("stock", "bypassed")); got != 1 {
		t.Fatalf("bypassed counter %v", got)
	}
	if n := st.svc.PendingCompensations(); n != 3 {
		t.Fatalf("%d compensations pending, want 3 (one per unanswered reserve call)", n)
	}
}

// A compensation that runs before the reserve or bid call it undoes (the call was still on its way)
// leaves a tombstone, and the late call takes nothing.
func TestCompensation_TombstoneStopsALateCall(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 5, 1))
		st.AddAuctions(auction("lot", "10.00", "1.00", time.Hour))
		ctx := context.Background()
		st.svc.compensateLater(stockOf(st.svc), Claim{Owner: "p", User: "u", ID: "900"})
		st.svc.compensateLater(st.bids(), Claim{Owner: "lot", ID: "901"})
		st.svc.compensateOnce(ctx)
		if n := st.svc.PendingCompensations(); n != 0 {
			t.Fatalf("%d compensations still pending", n)
		}
		res, err := reserveNow(ctx, st.svc, "p", []Claim{{Owner: "p", User: "u", ID: "900", Value: 1}})
		if err != nil || res[0].code != 6 || st.remaining("p") != 5 {
			t.Fatalf("a late reserve after its compensation: %v %v, stock %d", res, err, st.remaining("p"))
		}
		// The bid script's code 6 (a tombstone) is no refusal of the kind's own.
		e, err := st.bids().Reserve(ctx, Claim{Owner: "lot", User: "u", ID: "901", Value: 2000})
		if err != nil || e == nil || e.Cause == nil || e.Cause.Error() != "bid answered 6" || s.Client.Exists(ctx, s.Keys.Entity("a", "lot", "highest")).Val() != 0 {
			t.Fatalf("a late bid after its compensation: %v %v", e, err)
		}
	})
}

// An origin that hangs, resets the connection or answers garbage never leaves a reserved unit or an
// accepted bid behind on routes whose release_on names error and timeout.
func TestOriginFaults_LeaveNothingBehind(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStackReleasing(t, s, 300*time.Millisecond, []string{"5xx", "error", "timeout"}, product("p", 3, 3))
		st.AddAuctions(auction("lot", "10.00", "1.00", time.Hour))
		if a := st.Bid("lot", "first", "10.00"); a.Status != 200 {
			t.Fatal(a.Body)
		}
		for i, fault := range []struct {
			name   string
			status int
		}{{"hang", 504}, {"reset", 502}, {"garbage", 502}} {
			st.Fault.Store(fault.name)
			if a := st.Checkout("p", "u-"+fault.name, nil); a.Status != fault.status {
				t.Errorf("%s: checkout answered %d %s", fault.name, a.Status, a.Body)
			}
			if a := st.Bid("lot", "u-"+fault.name, "50.00"); a.Status != fault.status {
				t.Errorf("%s: bid answered %d %s", fault.name, a.Status, a.Body)
			}
			st.Fault.Store("")
			if r := st.remaining("p"); r != 3 {
				t.Fatalf("%s: %d units left, want all 3 back", fault.name, r)
			}
			if n := s.Client.HLen(context.Background(), buyersKey(s.Keys, "p")).Val(); n != int64(i) {
				t.Fatalf("%s: %d buyers recorded, want the %d of the earlier retries", fault.name, n, i)
			}
			forget(st.bids(), "lot")
			h := st.Get("/_edgeq/auctions/lot/highest-bid")
			if hb, _ := h.JSON["highest_bid"].(map[string]any); hb["amount"] != "10.00" {
				t.Fatalf("%s: highest bid %s, want the first bid back", fault.name, h.Body)
			}
			// The buyer may try again at once: nothing of the failed attempt holds them back.
			if a := st.Checkout("p", "u-"+fault.name, nil); a.Status != 200 {
				t.Fatalf("%s: retry after the fault: %d %s", fault.name, a.Status, a.Body)
			}
			s.Client.IncrBy(context.Background(), stockKey(s.Keys, "p"), 1) // put the unit back for the next case
		}
		if n := st.svc.PendingCompensations(); n != 0 {
			t.Fatalf("%d compensations pending", n)
		}
	})
}

// An operator cancels an admission; its unit is bought by the next buyer,
// the buyer may buy again, the admin record says cancelled and the leaderboard counts it out. A
// second cancel, an unknown id, a malformed one and a call without the key change nothing.
func TestCancel_TheUnitGoesBackAndIsSoldAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 1, 1))
		st.StartWorker()
		first := st.Checkout("p", "alice", nil)
		if first.Status != 200 {
			t.Fatalf("purchase: %d %s", first.Status, first.Body)
		}
		if a := st.Checkout("p", "bob", nil); a.Status != 409 || !strings.Contains(a.Body, "INSUFFICIENT_STOCK") {
			t.Fatalf("a second buyer of the only unit: %d %s", a.Status, a.Body)
		}
		var id string
		eventually(t, 5*time.Second, "the admission recorded", func() bool {
			items, _ := st.AdminGet("/api/admissions").JSON["items"].([]any)
			if len(items) == 1 {
				id = items[0].(map[string]any)["id"].(string)
			}
			return id != ""
		})
		noKey, _ := http.NewRequest("POST", st.Admin.URL+"/api/admissions/"+id+"/cancel", nil)
		if a := do(t, noKey); a.Status != 401 {
			t.Fatalf("cancel without the key: %d", a.Status)
		}
		for _, bad := range []struct {
			id     string
			status int
		}{{"not-an-id", 400}, {"12345", 404}} {
			if a := st.AdminSend("POST", "/api/admissions/"+bad.id+"/cancel", "", ""); a.Status != bad.status {
				t.Fatalf("cancel %s: %d %s", bad.id, a.Status, a.Body)
			}
		}
		if st.remaining("p") != 0 {
			t.Fatal("a refused cancel changed the stock")
		}
		a := st.AdminSend("POST", "/api/admissions/"+id+"/cancel", "", "")
		if a.Status != 200 || a.JSON["state"] != "cancelled" || num(a.JSON["remaining_stock"]) != 1 {
			t.Fatalf("cancel: %d %s", a.Status, a.Body)
		}
		if a := st.AdminSend("POST", "/api/admissions/"+id+"/cancel", "", ""); a.Status != 409 || !strings.Contains(a.Body, "ALREADY_GIVEN_BACK") {
			t.Fatalf("cancel again: %d %s", a.Status, a.Body)
		}
		if st.remaining("p") != 1 {
			t.Fatalf("stock after the cancel: %d", st.remaining("p"))
		}
		// The unit is sold again, and alice, whose purchase was cancelled, is not at her limit.
		if a := st.Checkout("p", "bob", nil); a.Status != 200 {
			t.Fatalf("the next buyer: %d %s", a.Status, a.Body)
		}
		eventually(t, 5*time.Second, "the cancel in the admin record and the leaderboard", func() bool {
			rec := st.AdminGet("/api/admissions/" + id)
			lb, _ := st.AdminGet("/api/leaderboard").JSON["items"].([]any)
			return rec.JSON["state"] == "cancelled" && rec.JSON["cancelled_at"] != nil && len(lb) == 1 &&
				num(lb[0].(map[string]any)["sales"]) == 1
		})
		if a := st.AdminSend("POST", "/api/products/p/restock", "application/json", `{"amount": 1}`); a.Status != 200 {
			t.Fatalf("restock: %d %s", a.Status, a.Body)
		}
		if a := st.Checkout("p", "alice", nil); a.Status != 200 {
			t.Fatalf("alice buys again after her cancelled purchase: %d %s", a.Status, a.Body)
		}
	})
}

// A read of grouped entries can name thousands of admissions (100 entries of up to 128
// each). The worker applies them in apply.lua calls of at most applyMax records: a script holds Redis
// while it runs, and every reservation would wait behind one long call.
func TestWorker_AppliesALargeReadInBoundedCalls(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 1000, 1))
		for call := range 3 {
			users := make([]string, 100)
			qtys := make([]int64, 100)
			for i := range users {
				users[i], qtys[i] = fmt.Sprintf("buyer-%d-%d", call, i), 1
			}
			st.buyTogether("p", users, qtys)
		}
		ctx := context.Background()
		applies := storetest.CountCommands(s.Client, func(cmd redis.Cmder) bool {
			args := cmd.Args()
			return cmd.Name() == "evalsha" && len(args) > 1 && args[1] == applyScript.Hash()
		})
		w := &worker{s: st.svc, consumer: "w", groups: map[string]bool{}}
		if f, _ := w.pass(ctx); f == foundNothing {
			t.Fatal("the worker found nothing to apply")
		}
		if n := indexedCount(t, st.svc); n != 300 {
			t.Fatalf("%d admissions applied, want 300", n)
		}
		if n, want := applies.Load(), int64((300+applyMax-1)/applyMax); n != want {
			t.Fatalf("300 records applied in %d apply.lua calls, want %d of %d", n, want, applyMax)
		}
		if p := s.Client.XPending(ctx, admitsStream(stockOf(st.svc), "p"), groupName).Val(); p.Count != 0 {
			t.Fatalf("%d entries left unacknowledged", p.Count)
		}
	})
}

// A shop that takes longer than origin.timeout places its orders all the same: the whole request
// reached it, and no answer says whether it sold the unit. Such an admission is held (neither given
// back nor committed), listed as unsettled with reason "ambiguous", never taken by the orphan sweep;
// so the shop never places more orders than there are units (before: each timeout gave its unit back
// and 83 orders were placed for 60 units). The operator settles it: a cancel gives the unit back.
func TestSettle_TimeoutAfterTheRequestWasSentIsHeld(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const units = 6
		st := newStackTimeout(t, s, 200*time.Millisecond, product("p", units, 1))
		st.StartWorker()
		st.Delay.Store(int64(400 * time.Millisecond)) // every order is placed, after the timeout
		var wg sync.WaitGroup
		for wave := range 2 { // the second comes once the first's timeouts are in
			for i := range units {
				wg.Go(func() {
					if a := st.Checkout("p", "buyer-"+strconv.Itoa(wave)+"-"+strconv.Itoa(i), nil); a.Status != 504 && a.Status != 409 {
						t.Errorf("buyer %d: %d %s", i, a.Status, a.Body)
					}
				})
			}
			wg.Wait()
			time.Sleep(300 * time.Millisecond) // the shop finishes what it received
		}
		orders := 0
		st.IDs.Range(func(any, any) bool { orders++; return true })
		if orders > units || st.remaining("p") != 0 {
			t.Fatalf("the shop received %d orders for %d units; %d left", orders, units, st.remaining("p"))
		}
		list := st.AdminGet("/api/admissions?state=admitted&older_than=0")
		items, _ := list.JSON["items"].([]any)
		if len(items) != units {
			t.Fatalf("%d unsettled, want %d: %s", len(items), units, list.Body)
		}
		for _, it := range items {
			if reason := it.(map[string]any)["reason"]; reason != "ambiguous" {
				t.Fatalf("an unsettled admission's reason %v: %s", reason, list.Body)
			}
		}
		if got := testutil.ToFloat64(st.svc.metrics.admissions.WithLabelValues("stock", "ambiguous")); got != units {
			t.Errorf("ambiguous counter %v, want %d", got, units)
		}
		if got := testutil.ToFloat64(st.svc.metrics.admissions.WithLabelValues("stock", "released")); got != 0 {
			t.Errorf("released counter %v", got)
		}
		// The operator checks the shop and cancels one the shop has no order for: its unit goes back.
		id := items[0].(map[string]any)["id"].(string)
		if a := st.AdminSend("POST", "/api/admissions/"+id+"/cancel", "", ""); a.Status != 200 {
			t.Fatalf("cancel: %d %s", a.Status, a.Body)
		}
		if st.remaining("p") != 1 {
			t.Fatalf("after the cancel %d left", st.remaining("p"))
		}
	})
}

// A product's claims hold its purchases in flight, not every buyer it ever had: a purchase the stock
// refuses takes none, one the per-user limit refuses leaves none, and a release ends one.
func TestStock_ClaimsHoldOnlyPurchasesInFlight(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 2, 1))
		ctx := context.Background()
		reserve := func(user string) (Claim, int64) {
			t.Helper()
			c := Claim{Owner: "p", User: st.svc.pseudonyms.of(user), ID: st.svc.o.IDs.NextString(), Value: 1}
			res, err := reserveNow(ctx, st.svc, "p", []Claim{c})
			if err != nil {
				t.Fatal(err)
			}
			return c, res[0].code
		}
		claims := func() int64 { return s.Client.HLen(ctx, groupedOf(st.svc).Claims("p")).Val() }
		a, code := reserve("ann")
		if code != 0 || claims() != 1 {
			t.Fatalf("ann's purchase: code %d, %d claims", code, claims())
		}
		if err := stockOf(st.svc).Commit(ctx, a); err != nil || claims() != 0 {
			t.Fatalf("after the commit: %v, %d claims", err, claims())
		}
		if _, code := reserve("ann"); code != 4 || claims() != 0 {
			t.Fatalf("ann again: code %d (want 4), %d claims (want 0)", code, claims())
		}
		b, code := reserve("ben")
		if code != 0 {
			t.Fatalf("ben: code %d", code)
		}
		if _, code := reserve("cy"); code != 1 || claims() != 1 {
			t.Fatalf("cy, sold out: code %d (want 1), %d claims (want ben's)", code, claims())
		}
		if code, err := stockOf(st.svc).Release(ctx, b); err != nil || code != 0 || claims() != 0 {
			t.Fatalf("ben's release: %d %v, %d claims", code, err, claims())
		}
	})
}
