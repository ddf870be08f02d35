package bid

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// sourceCooldown is the breaker's cool-down in the tests' stacks (the default is 10 s).
const sourceCooldown = 1500 * time.Millisecond

// testShop is the shop's auction API behind auctions_source: GET /api/auctions/{id}.
type testShop struct {
	srv      *httptest.Server
	auctions map[string]string // id -> JSON answer; others are 404
	mode     atomic.Value      // "ok", "slow" (answers after delay, or never), "fail" (500), "garbage" (200, not JSON), "status" (status)
	status   atomic.Int64      // the answer of mode "status"
	delay    atomic.Int64      // nanoseconds an "ok" answer waits
	requests atomic.Int64
	perID    sync.Map // id -> *atomic.Int64
	// before runs before an answer (with the id asked for): what the operator does meanwhile.
	before atomic.Pointer[func(id string)]
	// release, when set, holds every answer until it is closed.
	release atomic.Pointer[chan struct{}]
}

func newTestShop(t *testing.T, auctions map[string]string) *testShop {
	t.Helper()
	shop := &testShop{auctions: auctions}
	shop.mode.Store("ok")
	shop.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/api/auctions/")
		if !ok || r.Method != "GET" {
			t.Errorf("the shop was asked %s %s", r.Method, r.URL)
			return
		}
		shop.requests.Add(1)
		n, _ := shop.perID.LoadOrStore(id, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if f := shop.before.Load(); f != nil {
			(*f)(id)
		}
		if c := shop.release.Load(); c != nil {
			select {
			case <-*c:
			case <-r.Context().Done():
				return
			}
		}
		switch shop.mode.Load() {
		case "slow":
			<-r.Context().Done() // never in time
			return
		case "fail":
			w.WriteHeader(500)
			io.WriteString(w, "SECRET-STACK-TRACE of the shop")
			return
		case "garbage":
			io.WriteString(w, "<html>SECRET-PAGE not an auction</html>")
			return
		case "status":
			w.WriteHeader(int(shop.status.Load()))
			io.WriteString(w, "SECRET-STACK-TRACE of the shop")
			return
		}
		if d := time.Duration(shop.delay.Load()); d > 0 {
			time.Sleep(d)
		}
		body, known := shop.auctions[id]
		if !known && strings.HasPrefix(id, "bad-") {
			// An id the shop's validation refuses (a Rails or Laravel API, say).
			http.Error(w, `{"error":"invalid id"}`, http.StatusBadRequest)
			return
		}
		if !known {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(shop.srv.Close)
	return shop
}

func (shop *testShop) asked(id string) int64 {
	n, ok := shop.perID.Load(id)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// settings is auctions_source pointing at the shop.
func (shop *testShop) settings(timeout, cacheTTL time.Duration) auctions.Source {
	return auctions.Source{URL: shop.srv.URL + "/api/auctions/{id}", Timeout: timeout, CacheTTL: cacheTTL}
}

func shopAuction(start, inc string, endsIn time.Duration, owner string) string {
	ends := time.Now().Add(endsIn).UTC().Truncate(time.Second).Format(time.RFC3339)
	return fmt.Sprintf(`{"title":"A vase from the shop","starting_price":%s,"min_increment":%s,"ends_at":%q,"owner":%q}`,
		start, inc, ends, owner)
}

func (st *stack) sourceCount(result string) float64 {
	return testutil.ToFloat64(st.kind().sourceMetrics.requests.WithLabelValues(result))
}

// An auction the shop knows is bid on without anyone pushing it: fetched once, written to the store
// with the shop's values (starting price, increment, owner), and then served like any other. An id
// the shop does not know is 404 and that answer is remembered for cache_ttl.
func TestAuctionsSource_AShopsAuctionIsBidOnWithoutAPush(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		shop := newTestShop(t, map[string]string{
			// The id field is optional; when there it must match.
			"vase":  shopAuction(`"10.00"`, `"0.50"`, time.Hour, "Seller-9"),
			"chair": strings.Replace(shopAuction(`25`, `1.5`, time.Hour, ""), `{`, `{"id":"chair",`, 1),
		})
		st.kind().useSource(shop.settings(2*time.Second, 1500*time.Millisecond))

		if a := st.Get("/_edgeq/auctions/vase/highest-bid"); a.Status != 404 {
			t.Fatalf("reads do not ask the shop: %d %s", a.Status, a.Body)
		}
		if shop.requests.Load() != 0 {
			t.Fatalf("a public read asked the shop")
		}
		if a := st.Bid("vase", "alice", "12.00"); a.Status != 200 {
			t.Fatalf("first bid on the shop's auction: %d %s", a.Status, a.Body)
		}
		if st.BidHits.Load() != 1 || shop.asked("vase") != 1 {
			t.Fatalf("origin bids %d, shop asked %d times", st.BidHits.Load(), shop.asked("vase"))
		}
		h := st.Get("/_edgeq/auctions/vase/highest-bid")
		if hb, _ := h.JSON["highest_bid"].(map[string]any); h.Status != 200 || hb["amount"] != "12.00" {
			t.Fatalf("highest after the first bid: %d %s", h.Status, h.Body)
		}
		// The shop's min_increment (0.50) and owner are in force.
		if a := st.Bid("vase", "bob", "12.25"); a.Status != 409 || a.JSON["error"] != "BID_TOO_LOW" {
			t.Fatalf("below highest + increment: %d %s", a.Status, a.Body)
		}
		if a := st.Bid("vase", "bob", "12.50"); a.Status != 200 {
			t.Fatalf("highest + increment: %d %s", a.Status, a.Body)
		}
		if a := st.Bid("vase", "SELLER-9", "20.00"); a.Status != 403 || a.JSON["error"] != "SELF_BID" {
			t.Fatalf("the shop's owner bids: %d %s", a.Status, a.Body)
		}
		if a := st.AdminGet("/api/auctions/vase"); a.JSON["starting_price"] != "10.00" || a.JSON["min_increment"] != "0.50" {
			t.Fatalf("the auction as stored: %s", a.Body)
		}
		// Numbers are money too (as in YAML); min_increment 1.5.
		if a := st.Bid("chair", "alice", "24.99"); a.Status != 400 || a.JSON["error"] != "INVALID_BID" {
			t.Fatalf("below the shop's starting price: %d %s", a.Status, a.Body)
		}
		if a := st.Bid("chair", "alice", "25.00"); a.Status != 200 {
			t.Fatalf("at the starting price: %d %s", a.Status, a.Body)
		}
		// The store loses the auction (flushed, say): within cache_ttl the cached answer writes it
		// again without asking the shop.
		if err := s.Client.Del(context.Background(), auctionInfoKey(s.Keys, "chair")).Err(); err != nil {
			t.Fatal(err)
		}
		if a := st.Bid("chair", "carol", "26.50"); a.Status != 200 || shop.asked("chair") != 1 {
			t.Fatalf("bid from the cached answer: %d %s, shop asked %d times", a.Status, a.Body, shop.asked("chair"))
		}
		if a := st.Bid("chair", "bob", "27.99"); a.Status != 409 {
			t.Fatalf("below the shop's increment of 1.50: %d %s", a.Status, a.Body)
		}
		if shop.asked("vase") != 1 || shop.asked("chair") != 1 {
			t.Fatalf("bids on fetched auctions asked the shop again: vase %d, chair %d", shop.asked("vase"), shop.asked("chair"))
		}

		// Not found: 404, remembered for cache_ttl, then asked again.
		for range 3 {
			if a := st.Bid("nope", "alice", "5.00"); a.Status != 404 || a.JSON["error"] != "AUCTION_NOT_FOUND" {
				t.Fatalf("unknown to the shop: %d %s", a.Status, a.Body)
			}
		}
		if shop.asked("nope") != 1 {
			t.Fatalf("a not-found answer was not cached: asked %d times", shop.asked("nope"))
		}
		time.Sleep(1600 * time.Millisecond)
		st.Bid("nope", "alice", "5.00")
		if shop.asked("nope") != 2 {
			t.Fatalf("after cache_ttl the shop is asked again: asked %d times", shop.asked("nope"))
		}
		if st.sourceCount("found") != 2 || st.sourceCount("not_found") != 2 || st.sourceCount("error") != 0 {
			t.Fatalf("metrics: found %v not_found %v error %v", st.sourceCount("found"), st.sourceCount("not_found"), st.sourceCount("error"))
		}

		// Turned off (a reload with url ""): unknown auctions are 404 again, without asking.
		st.kind().useSource(auctions.Source{})
		before := shop.requests.Load()
		if a := st.Bid("other", "alice", "5.00"); a.Status != 404 || shop.requests.Load() != before {
			t.Fatalf("with auctions_source off: %d %s, shop asked %d more", a.Status, a.Body, shop.requests.Load()-before)
		}
	})
}

// Configured and pushed auctions win over the shop's: a configured auction never asks the shop, and
// one pushed while the shop was being asked keeps its pushed values (the write is create-only).
func TestAuctionsSource_PushedAndConfiguredAuctionsWin(t *testing.T) {
	st := newStack(t, storetest.Redis(t))
	shop := newTestShop(t, map[string]string{
		"lot":  shopAuction(`"1.00"`, `"1.00"`, time.Hour, ""),
		"race": shopAuction(`"1.00"`, `"1.00"`, time.Hour, ""),
	})
	st.kind().useSource(shop.settings(2*time.Second, time.Minute))
	st.AddAuctions(auction("lot", "50.00", "1.00", time.Hour))
	if a := st.Bid("lot", "alice", "10.00"); a.Status != 400 || a.JSON["error"] != "INVALID_BID" || a.JSON["starting_price"] != "50.00" {
		t.Fatalf("the configured starting price: %d %s", a.Status, a.Body)
	}
	if shop.requests.Load() != 0 {
		t.Fatalf("a configured auction asked the shop")
	}

	// The operator pushes "race" while edgeq is asking the shop about it.
	ends := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	push := func(id string) {
		if a := st.AdminSend("PUT", "/api/auctions/"+id, "application/json", `{"starting_price":"50.00","ends_at":"`+ends+`"}`); a.Status != 200 {
			t.Errorf("push: %d %s", a.Status, a.Body)
		}
	}
	shop.before.Store(&push)
	if a := st.Bid("race", "alice", "10.00"); a.Status != 400 || a.JSON["starting_price"] != "50.00" {
		t.Fatalf("the shop's answer overwrote a pushed auction: %d %s", a.Status, a.Body)
	}
	if a := st.AdminGet("/api/auctions/race"); a.JSON["starting_price"] != "50.00" || shop.asked("race") != 1 {
		t.Fatalf("stored: %s (shop asked %d times)", a.Body, shop.asked("race"))
	}
}

// The breaker opens after 5 failures in a row of a slow, failing, garbled or absent shop: bids on
// unknown auctions get 503 AUCTIONS_SOURCE_UNAVAILABLE with Retry-After (at once, without asking the
// shop, while it is open); bids on known auctions go on and never ask the shop.
func TestAuctionsSource_BreakerOpensAndKnownAuctionsGoOn(t *testing.T) {
	for _, c := range []struct{ mode, result string }{
		{"slow", "timeout"}, {"fail", "error"}, {"garbage", "error"}, {"down", "error"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			st := newStack(t, storetest.Redis(t))
			st.AddAuctions(auction("known", "1.00", "1.00", time.Hour))
			shop := newTestShop(t, nil)
			st.kind().useSource(shop.settings(300*time.Millisecond, time.Minute))
			if c.mode == "down" {
				shop.srv.Close() // connection refused
			} else {
				shop.mode.Store(c.mode)
			}
			for i := range 5 {
				a := st.Bid(fmt.Sprintf("new-%d", i), "alice", "5.00")
				if a.Status != 503 || a.JSON["error"] != "AUCTIONS_SOURCE_UNAVAILABLE" || a.Header.Get("Retry-After") == "" {
					t.Fatalf("bid %d on an unknown auction: %d %v %s", i, a.Status, a.Header, a.Body)
				}
				if strings.Contains(a.Body, "SECRET") {
					t.Fatalf("the shop's answer reached the bidder: %s", a.Body)
				}
			}
			if st.sourceCount(c.result) != 5 || testutil.ToFloat64(st.kind().sourceMetrics.breakerOpen) != 1 {
				t.Fatalf("after 5 failures: %s %v, breaker gauge %v", c.result, st.sourceCount(c.result), testutil.ToFloat64(st.kind().sourceMetrics.breakerOpen))
			}
			asked := shop.requests.Load()
			for _, id := range []string{"new-0", "new-9"} {
				a := st.Bid(id, "alice", "5.00")
				retry, _ := strconv.Atoi(a.Header.Get("Retry-After"))
				if a.Status != 503 || a.JSON["error"] != "AUCTIONS_SOURCE_UNAVAILABLE" || retry < 1 || retry > 2 {
					t.Fatalf("bid while the breaker is open: %d Retry-After %q %s", a.Status, a.Header.Get("Retry-After"), a.Body)
				}
			}
			if shop.requests.Load() != asked || st.sourceCount("breaker_open") != 2 {
				t.Fatalf("the open breaker let requests through: %d more, breaker_open %v", shop.requests.Load()-asked, st.sourceCount("breaker_open"))
			}
			for i := range 5 {
				if a := st.Bid("known", fmt.Sprintf("b%d", i), fmt.Sprintf("%d.00", 10+i)); a.Status != 200 {
					t.Fatalf("bid on a known auction while the shop fails: %d %s", a.Status, a.Body)
				}
			}
			if shop.requests.Load() != asked || st.sourceCount("breaker_open") != 2 {
				t.Fatalf("bids on a known auction consulted the source")
			}
			if m := st.Admissions("bid", "auctions_source_unavailable"); m != 7 {
				t.Fatalf("edgeq_admissions_total{result=auctions_source_unavailable} = %v, want 7", m)
			}
			if st.BidHits.Load() != 5 {
				t.Fatalf("the origin got %d bids, want only the 5 on the known auction", st.BidHits.Load())
			}
		})
	}
}

// A bid on a known auction does not wait for the source: while a bid on an unknown auction waits for
// a shop that does not answer, bids on a known one are answered.
func TestAuctionsSource_KnownAuctionsNeverWaitForTheShop(t *testing.T) {
	st := newStack(t, storetest.Redis(t))
	st.AddAuctions(auction("known", "1.00", "1.00", time.Hour))
	shop := newTestShop(t, map[string]string{"new": shopAuction(`"1.00"`, `"1.00"`, time.Hour, "")})
	held := make(chan struct{})
	shop.release.Store(&held)
	st.kind().useSource(shop.settings(5*time.Second, time.Minute))
	waiting := make(chan answer)
	go func() { waiting <- st.Bid("new", "alice", "5.00") }()
	eventually(t, 5*time.Second, "the shop is asked", func() bool { return shop.requests.Load() == 1 })
	for i := range 3 {
		if a := st.Bid("known", fmt.Sprintf("b%d", i), fmt.Sprintf("%d.00", 10+i)); a.Status != 200 {
			t.Fatalf("bid on a known auction: %d %s", a.Status, a.Body)
		}
	}
	select {
	case a := <-waiting:
		t.Fatalf("the bid on the unknown auction was answered before the shop: %d %s", a.Status, a.Body)
	default:
	}
	close(held)
	if a := <-waiting; a.Status != 200 || shop.requests.Load() != 1 {
		t.Fatalf("the bid on the shop's auction: %d %s (shop asked %d times)", a.Status, a.Body, shop.requests.Load())
	}
}

// After the cool-down one probe goes through: a failing probe opens the breaker again, a healthy
// shop's answer closes it.
func TestAuctionsSource_BreakerClosesAfterTheCooldownWithAHealthyShop(t *testing.T) {
	st := newStack(t, storetest.Redis(t))
	shop := newTestShop(t, map[string]string{
		"vase":  shopAuction(`"1.00"`, `"1.00"`, time.Hour, ""),
		"chair": shopAuction(`"1.00"`, `"1.00"`, time.Hour, ""),
	})
	st.kind().useSource(shop.settings(time.Second, time.Minute))
	shop.mode.Store("fail")
	for i := range 5 {
		st.Bid(fmt.Sprintf("x%d", i), "alice", "5.00")
	}
	if shop.requests.Load() != 5 || testutil.ToFloat64(st.kind().sourceMetrics.breakerOpen) != 1 {
		t.Fatalf("breaker not open after 5 failures: %d requests", shop.requests.Load())
	}
	// The cool-down passes; the probe fails: open again, the next bid is not let through.
	time.Sleep(sourceCooldown + 100*time.Millisecond)
	if a := st.Bid("vase", "alice", "5.00"); a.Status != 503 || shop.requests.Load() != 6 {
		t.Fatalf("the probe: %d %s, %d requests", a.Status, a.Body, shop.requests.Load())
	}
	if a := st.Bid("vase", "alice", "5.00"); a.Status != 503 || shop.requests.Load() != 6 {
		t.Fatalf("after a failed probe the breaker is open again: %d, %d requests", a.Status, shop.requests.Load())
	}
	// The shop recovers; the next probe closes the breaker.
	shop.mode.Store("ok")
	if a := st.Bid("vase", "alice", "5.00"); a.Status != 503 {
		t.Fatalf("still open within the cool-down: %d %s", a.Status, a.Body)
	}
	time.Sleep(sourceCooldown + 100*time.Millisecond)
	if a := st.Bid("vase", "alice", "5.00"); a.Status != 200 || shop.requests.Load() != 7 {
		t.Fatalf("the probe to a healthy shop: %d %s, %d requests", a.Status, a.Body, shop.requests.Load())
	}
	if testutil.ToFloat64(st.kind().sourceMetrics.breakerOpen) != 0 {
		t.Fatalf("breaker gauge still 1 after a successful probe")
	}
	if a := st.Bid("chair", "alice", "5.00"); a.Status != 200 || shop.requests.Load() != 8 {
		t.Fatalf("closed again: %d %s, %d requests", a.Status, a.Body, shop.requests.Load())
	}
}

// 50 first bids at once on one auction the store does not know make one request to the shop.
func TestAuctionsSource_ConcurrentFirstBidsMakeOneRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		shop := newTestShop(t, map[string]string{"vase": shopAuction(`"1.00"`, `"0.01"`, time.Hour, "")})
		shop.delay.Store(int64(300 * time.Millisecond)) // every bid arrives while the first waits
		st.kind().useSource(shop.settings(5*time.Second, time.Minute))
		var wg sync.WaitGroup
		var accepted, tooLow atomic.Int64
		for i := range 50 {
			wg.Go(func() {
				a := st.Bid("vase", fmt.Sprintf("u%d", i), fmt.Sprintf("%d.00", 1+i))
				switch {
				case a.Status == 200:
					accepted.Add(1)
				case a.Status == 409 && a.JSON["error"] == "BID_TOO_LOW":
					tooLow.Add(1)
				default:
					t.Errorf("bid %d: %d %s", i, a.Status, a.Body)
				}
			})
		}
		wg.Wait()
		if shop.requests.Load() != 1 {
			t.Fatalf("50 concurrent first bids asked the shop %d times", shop.requests.Load())
		}
		if accepted.Load() < 1 || accepted.Load()+tooLow.Load() != 50 {
			t.Fatalf("accepted %d, too low %d", accepted.Load(), tooLow.Load())
		}
	})
}

// What the shop answers is checked like an auctions[] entry of the configuration file; the reason is
// reported, never the answer itself.
func TestAuctionsSource_AnswersAreCheckedLikeTheConfigurationFile(t *testing.T) {
	ends := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	good := map[string]string{
		`{"starting_price":"10.00","ends_at":"` + ends + `"}`:                             "10.00/1.00",
		`{"starting_price":10,"min_increment":0.5,"ends_at":"` + ends + `","extra":[1]}`:  "10/0.5",
		`{"id":"lot","starting_price":"1","min_increment":null,"ends_at":"` + ends + `"}`: "1/1.00",
	}
	for body, want := range good {
		a, err := parseSourcedAuction("lot", []byte(body))
		if err != nil || a.StartingPrice+"/"+a.MinIncrement != want || a.ID != "lot" {
			t.Errorf("%s: %+v %v, want %s", body, a, err, want)
		}
	}
	bad := map[string]string{
		`<html>SECRET</html>`:        "not an auction object",
		`[1,2]`:                      "not an auction object",
		`{"starting_price":"10.00"}`: "ends_at: required",
		`{"starting_price":"-1","ends_at":"` + ends + `"}`:             "starting_price",
		`{"starting_price":"1.001","ends_at":"` + ends + `"}`:          "starting_price",
		`{"starting_price":"SECRET","ends_at":"` + ends + `"}`:         "starting_price",
		`{"starting_price":{"x":1},"ends_at":"` + ends + `"}`:          "starting_price: must be a string or a number",
		`{"starting_price":"1","ends_at":"tomorrow"}`:                  "ends_at: not an RFC 3339 time",
		`{"id":"other","starting_price":"1","ends_at":"` + ends + `"}`: "id: the answer is about another auction",
		`{"starting_price":"1","ends_at":"` + ends + `"} {}`:           "not an auction object",
	}
	for body, want := range bad {
		_, err := parseSourcedAuction("lot", []byte(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "<html>") {
			t.Errorf("%s: the answer is in the error: %v", body, err)
		}
	}
}

// Answers about the id asked for (400, 404) are facts about that id, from any
// client's bid: before, five bids on ids the shop answers 400 to opened the breaker, and a legitimate
// first bid on another auction got 503 for the cool-down. They are cached as unknown for cache_ttl and
// never count as failures; bids on them are refused as on any unknown auction.
func TestAuctionsSource_AnswersAboutAnIdNeverOpenTheBreaker(t *testing.T) {
	st := newStack(t, storetest.Redis(t))
	shop := newTestShop(t, map[string]string{"vase": shopAuction(`"1.00"`, `"1.00"`, time.Hour, "")})
	st.kind().useSource(shop.settings(time.Second, time.Minute))
	for i := range 10 {
		for _, id := range []string{fmt.Sprintf("bad-%d", i), fmt.Sprintf("gone-%d", i)} {
			if a := st.Bid(id, fmt.Sprintf("mallory-%d", i), "5.00"); a.Status != 404 || a.JSON["error"] != "AUCTION_NOT_FOUND" {
				t.Fatalf("bid on %s: %d %s", id, a.Status, a.Body)
			}
		}
	}
	if open := testutil.ToFloat64(st.kind().sourceMetrics.breakerOpen); open != 0 || st.sourceCount("not_found") != 20 ||
		st.sourceCount("error") != 0 {
		t.Fatalf("after 20 answers about ids: breaker gauge %v, not_found %v, error %v", open, st.sourceCount("not_found"), st.sourceCount("error"))
	}
	if a := st.Bid("vase", "alice", "5.00"); a.Status != 200 {
		t.Fatalf("a legitimate first bid on another auction: %d %s", a.Status, a.Body)
	}
	// Cached as unknown: asking again within cache_ttl costs the shop nothing.
	for _, id := range []string{"bad-0", "gone-0"} {
		if a := st.Bid(id, "mallory", "5.00"); a.Status != 404 || shop.asked(id) != 1 {
			t.Fatalf("bid on %s again: %d %s, shop asked %d times", id, a.Status, a.Body, shop.asked(id))
		}
	}
}

// Answers that say the shop is unwell count towards the breaker: 5xx, 401, 403, 429 (timeouts,
// connection errors and a 200 that is not an auction: TestAuctionsSource_BreakerOpensAndKnownAuctionsGoOn).
func TestAuctionsSource_AnswersThatSayTheShopIsUnwellOpenTheBreaker(t *testing.T) {
	for _, status := range []int{401, 403, 429, 500, 502, 503} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			st := newStack(t, storetest.Redis(t))
			shop := newTestShop(t, nil)
			st.kind().useSource(shop.settings(time.Second, time.Minute))
			shop.mode.Store("status")
			shop.status.Store(int64(status))
			for i := range 5 {
				if a := st.Bid(fmt.Sprintf("new-%d", i), "alice", "5.00"); a.Status != 503 || a.JSON["error"] != "AUCTIONS_SOURCE_UNAVAILABLE" {
					t.Fatalf("bid %d: %d %s", i, a.Status, a.Body)
				}
			}
			if open := testutil.ToFloat64(st.kind().sourceMetrics.breakerOpen); open != 1 || st.sourceCount("error") != 5 {
				t.Fatalf("after five %d answers: breaker gauge %v, error %v", status, open, st.sourceCount("error"))
			}
			if a := st.Bid("new-9", "alice", "5.00"); a.Status != 503 || shop.requests.Load() != 5 {
				t.Fatalf("while open: %d %s, shop asked %d times", a.Status, a.Body, shop.requests.Load())
			}
		})
	}
}
