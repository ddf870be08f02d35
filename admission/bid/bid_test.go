package bid

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"
	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/admissiontest"
	"github.com/edgeq/edgeq/internal/testutil/edgetest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// stack is edgeq with admission in front of a counting origin (edgetest.Stack), and its service.
type stack struct {
	*edgetest.Stack
	svc *admission.Service
}

// The stack's helpers, under the names these tests use.
type answer = edgetest.Answer

var (
	do             = edgetest.Do
	auction        = edgetest.Auction
	num            = edgetest.Num
	newBidOutcomes = edgetest.NewBidOutcomes
)

// newService is one replica's admission service, as server builds it, with auctions_source's breaker
// at the default 5 failures and a cool-down short enough to wait for.
var newService = admissiontest.Build(func(o *admission.Options) { o.SourceCooldown = sourceCooldown })

func newStack(t *testing.T, s *store.Store, products ...products.Product) *stack {
	t.Helper()
	return newStackReleasing(t, s, 30*time.Second, nil, products...)
}

// newStackReleasing is newStack with the proxy's origin timeout and every admission route's
// release_on set (nil: edgetest.Routes').
func newStackReleasing(t *testing.T, s *store.Store, originTimeout time.Duration, releaseOn []string, products ...products.Product) *stack {
	t.Helper()
	e := edgetest.New(t, s, edgetest.Options{Build: newService, OriginTimeout: originTimeout, ReleaseOn: releaseOn, Products: products})
	return &stack{Stack: e, svc: e.Svc.(*admission.Service)}
}

// kind is the stack's bid kind.
func (st *stack) kind() *kind { return of(st.svc) }

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, within, what, cond)
}

// auctionEvents reads an auction's event stream.
func auctionEvents(t *testing.T, st *stack, auction string) []edgetest.StreamBid {
	t.Helper()
	return edgetest.AuctionEvents(t, st.Stack, auctionEventsKey(st.Store.Keys, auction))
}

// checkAuction proves the bid invariants of one auction with no withdrawals (edgetest.CheckAuction).
func checkAuction(t *testing.T, st *stack, id string, o *edgetest.BidOutcomes) {
	t.Helper()
	edgetest.CheckAuction(t, st.Stack, id, auctionEventsKey(st.Store.Keys, id), o, st.kind().reads.forget)
}

// randomBid waits for bidder i's moment and returns what it offers: one in twenty bids below the starting price of 100.00, half
// the others outbid the highest they read by a random step (as bidders polling the highest do), the
// rest a random amount around a rising line.
func randomBid(st *stack, auction string, i int) int64 {
	// Arrivals spread over most of a second, so bids overlap and many of them are accepted.
	time.Sleep(rand.N(800 * time.Millisecond))
	switch {
	case rand.IntN(20) == 0:
		return 1 + rand.Int64N(9999)
	case rand.IntN(2) == 0:
		h := st.Get("/_edgeq/auctions/" + auction + "/highest-bid")
		if hb, ok := h.JSON["highest_bid"].(map[string]any); ok {
			cents, _ := money.Parse(fmt.Sprint(hb["amount"]))
			return cents + 100 + rand.Int64N(500)
		}
	}
	return 10000 + int64(i)*50 + rand.Int64N(5000)
}

// 1,000 concurrent bids with random amounts on one auction.
func TestBid_ConcurrentBidsOnOneAuction(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "100.00", "1.00", time.Hour))
		st.StartWorker()
		o := newBidOutcomes()
		var wg sync.WaitGroup
		for i := range 1000 {
			wg.Go(func() {
				amount := randomBid(st, "lot", i)
				o.Record(t, "lot", amount, st.Bid("lot", fmt.Sprintf("bidder-%d", i%300), money.Format(amount)))
			})
		}
		wg.Wait()
		checkAuction(t, st, "lot", o)
		if st.BidHits.Load() != int64(o.Accepted["lot"]) {
			t.Fatalf("%d bids reached the origin, %d were accepted", st.BidHits.Load(), o.Accepted["lot"])
		}
		t.Logf("%d accepted, %d too low, %d below the starting price", o.Accepted["lot"], len(o.TooLow["lot"]), o.Invalid.Load())
		if got := st.Admissions("bid", "admitted"); got != float64(o.Accepted["lot"]) {
			t.Fatalf("admitted counter %v", got)
		}
		if got := st.Admissions("bid", "bid_too_low"); got != float64(len(o.TooLow["lot"])) {
			t.Fatalf("bid_too_low counter %v", got)
		}
		// The worker indexes every accepted bid under its bidder.
		eventually(t, 15*time.Second, "bids indexed", func() bool {
			var total int64
			for u := range 300 {
				total += num(st.AdminGet(fmt.Sprintf("/api/users/bidder-%d/bids?page_size=1", u)).JSON["total_count"])
			}
			return total == int64(o.Accepted["lot"])
		})
	})
}

// 10 auctions x 100 concurrent bids each, all at once.
func TestBid_TenAuctionsConcurrently(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		var ids []string
		for a := range 10 {
			id := fmt.Sprintf("lot-%d", a)
			ids = append(ids, id)
			st.AddAuctions(auction(id, "100.00", "1.00", time.Hour))
		}
		o := newBidOutcomes()
		var wg sync.WaitGroup
		for i := range 1000 {
			wg.Go(func() {
				id := ids[i%10]
				amount := randomBid(st, id, i/10)
				o.Record(t, id, amount, st.Bid(id, fmt.Sprintf("bidder-%d", i%37), money.Format(amount)))
			})
		}
		wg.Wait()
		total := 0
		for _, id := range ids {
			checkAuction(t, st, id, o)
			total += o.Accepted[id]
		}
		if st.BidHits.Load() != int64(total) {
			t.Fatalf("%d bids reached the origin, %d were accepted", st.BidHits.Load(), total)
		}
	})
}

// 5,000 concurrent highest-bid reads all succeed and cost a handful of store loads;
// then 500 bids and 2,000 reads at once stay correct.
func TestBid_ReadsUnderLoad(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "100.00", "1.00", time.Hour))
		if a := st.Bid("lot", "first", "100.00"); a.Status != 200 {
			t.Fatal(a.Body)
		}
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1000, MaxIdleConnsPerHost: 1000}}
		defer client.CloseIdleConnections()
		read := func() (map[string]any, error) {
			resp, err := client.Get(st.Public.URL + "/_edgeq/auctions/lot/highest-bid")
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var body map[string]any
			if resp.StatusCode != 200 || json.Unmarshal(raw, &body) != nil || body["auction_id"] != "lot" {
				return nil, fmt.Errorf("%d %s", resp.StatusCode, raw)
			}
			return body, nil
		}

		loadsBefore := st.kind().reads.loads.Load()
		start := time.Now()
		var failed atomic.Int64
		var wg sync.WaitGroup
		for range 5000 {
			wg.Go(func() {
				body, err := read()
				if err != nil {
					failed.Add(1)
					t.Error(err)
					return
				}
				if hb, _ := body["highest_bid"].(map[string]any); hb["amount"] != "100.00" {
					failed.Add(1)
					t.Errorf("highest %v", body)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		loads := st.kind().reads.loads.Load() - loadsBefore
		if failed.Load() != 0 {
			t.Fatalf("%d of 5000 reads failed", failed.Load())
		}
		// One load per auction per readTTL at most (concurrent misses share one).
		if limit := int64(elapsed/readTTL) + 2; loads > limit {
			t.Fatalf("5000 reads in %s made %d store loads, want at most %d", elapsed, loads, limit)
		}
		t.Logf("5000 reads in %s: %d store loads", elapsed, loads)

		// Mixed: every read shows an accepted bid; the invariants hold afterwards.
		o := newBidOutcomes()
		o.Accepted["lot"] = 1 // the first bid
		var seen sync.Map     // bid id -> amount a reader saw
		for i := range 2500 {
			wg.Go(func() {
				if i%5 == 0 {
					amount := 10100 + int64(i/5)*100 + rand.Int64N(300)
					o.Record(t, "lot", amount, st.Bid("lot", fmt.Sprintf("bidder-%d", i%50), money.Format(amount)))
					return
				}
				body, err := read()
				if err != nil {
					t.Error(err)
					return
				}
				hb := body["highest_bid"].(map[string]any)
				seen.Store(hb["bid_id"], hb["amount"])
			})
		}
		wg.Wait()
		checkAuction(t, st, "lot", o)
		accepted := map[string]string{}
		for _, e := range auctionEvents(t, st, "lot") {
			accepted[e.ID] = money.Format(e.Amount)
		}
		seen.Range(func(id, amount any) bool {
			if accepted[id.(string)] != amount {
				t.Errorf("a reader saw bid %v at %v, which was not accepted", id, amount)
			}
			return true
		})
	})
}

// auctionState is everything the store holds for an auction, to show that a refusal changed nothing.
func auctionState(t *testing.T, st *stack, id string) string {
	t.Helper()
	ctx := context.Background()
	c, k := st.Store.Client, st.Store.Keys
	info := c.HGetAll(ctx, auctionInfoKey(k, id)).Val()
	highest := c.HGetAll(ctx, auctionHighestKey(k, id)).Val()
	bids := c.ZRangeWithScores(ctx, auctionBidsKey(k, id), 0, -1).Val()
	bidders := c.HGetAll(ctx, auctionBiddersKey(k, id)).Val()
	events := c.XLen(ctx, auctionEventsKey(k, id)).Val()
	return fmt.Sprint(info, highest, bids, bidders, events)
}

// Bad input gets its code and changes nothing.
func TestBid_BadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		owned := auction("lot", "100.00", "1.00", time.Hour)
		owned.Owner = "seller"
		st.AddAuctions(owned, auction("over", "100.00", "1.00", -time.Minute))
		if a := st.Bid("lot", "alice", "150.00"); a.Status != 200 {
			t.Fatal(a.Body)
		}
		cases := []struct {
			name, auction, user, amount string
			status                      int
			code                        string
		}{
			{"letters", "lot", "bob", "abc", 400, "INVALID_BID"},
			{"three decimals", "lot", "bob", "1.234", 400, "INVALID_BID"},
			{"negative", "lot", "bob", "-5", 400, "INVALID_BID"},
			{"zero", "lot", "bob", "0", 400, "INVALID_BID"},
			{"exponent", "lot", "bob", "1e9", 400, "INVALID_BID"},
			{"40 digits", "lot", "bob", strings.Repeat("9", 40), 400, "INVALID_BID"},
			{"missing", "lot", "bob", "", 400, "INVALID_BID"},
			{"spaces", "lot", "bob", " 200.00", 400, "INVALID_BID"},
			{"too low", "lot", "bob", "150.99", 409, "BID_TOO_LOW"},
			{"equal", "lot", "bob", "150.00", 409, "BID_TOO_LOW"},
			{"unknown auction", "nope", "bob", "200.00", 404, "AUCTION_NOT_FOUND"},
			{"bad auction id", "a.b", "bob", "200.00", 400, "INVALID_REQUEST"},
			{"ended auction", "over", "bob", "200.00", 409, "AUCTION_ENDED"},
			{"self bid", "lot", "seller", "200.00", 403, "SELF_BID"},
			{"no user", "lot", "", "200.00", 400, "INVALID_REQUEST"},
		}
		before, beforeOver := auctionState(t, st, "lot"), auctionState(t, st, "over")
		hits := st.Hits.Load()
		for _, c := range cases {
			a := st.Bid(c.auction, c.user, c.amount)
			if a.Status != c.status || a.JSON["error"] != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, a.Status, a.Body, c.status, c.code)
			}
			if c.code == "BID_TOO_LOW" && a.JSON["highest_amount"] != "150.00" {
				t.Errorf("%s: highest_amount %v", c.name, a.JSON["highest_amount"])
			}
		}
		// An amount given twice: PHP and Rails would read the last, Go the first.
		req, _ := http.NewRequest("POST", st.Public.URL+"/auctions/lot/bid", strings.NewReader("amount=5000.00&amount=200.00"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("X-User", "bob")
		if a := do(t, req); a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" || a.JSON["field"] != "amount" {
			t.Errorf("amount twice: %d %s", a.Status, a.Body)
		}
		if after := auctionState(t, st, "lot"); after != before {
			t.Fatalf("refused bids changed the auction:\n%s\n%s", before, after)
		}
		if after := auctionState(t, st, "over"); after != beforeOver {
			t.Fatalf("a bid on an ended auction changed it:\n%s\n%s", beforeOver, after)
		}
		if st.Hits.Load() != hits {
			t.Fatalf("%d refused bids reached the origin", st.Hits.Load()-hits)
		}
		// Below the starting price names it.
		fresh := auction("fresh", "100.00", "1.00", time.Hour)
		st.AddAuctions(fresh)
		if a := st.Bid("fresh", "bob", "99.99"); a.Status != 400 || a.JSON["error"] != "INVALID_BID" || a.JSON["starting_price"] != "100.00" {
			t.Fatalf("below the starting price: %d %s", a.Status, a.Body)
		}
		if a := st.Bid("fresh", "bob", "100.00"); a.Status != 200 {
			t.Fatalf("the starting price itself: %d %s", a.Status, a.Body)
		}
	})
}

// An origin failure withdraws the bid and restores the previous highest.
func TestBid_OriginFailureWithdraws(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "100.00", "1.00", time.Hour))
		st.StartWorker()
		first := st.Bid("lot", "alice", "150.00")
		if first.Status != 200 {
			t.Fatal(first.Body)
		}
		firstID := auctionEvents(t, st, "lot")[0].ID
		st.Status.Store(503)
		if a := st.Bid("lot", "bob", "200.00"); a.Status != 503 {
			t.Fatalf("failed origin: %d %s", a.Status, a.Body)
		}
		st.Status.Store(200)
		h := st.Get("/_edgeq/auctions/lot/highest-bid")
		if hb, _ := h.JSON["highest_bid"].(map[string]any); hb["bid_id"] != firstID || hb["amount"] != "150.00" {
			t.Fatalf("after the withdrawal the highest is %s, want %s at 150.00", h.Body, firstID)
		}
		stats := st.Get("/_edgeq/auctions/lot/stats")
		if num(stats.JSON["total_bids"]) != 1 || num(stats.JSON["unique_bidders"]) != 1 {
			t.Fatalf("stats after the withdrawal: %s", stats.Body)
		}
		events := auctionEvents(t, st, "lot")
		if len(events) != 3 || events[1].Type != "bid" || events[2].Type != "withdrawn" || events[2].ID != events[1].ID {
			t.Fatalf("events %+v", events)
		}
		// Withdrawal is idempotent: again, it changes nothing.
		before := auctionState(t, st, "lot")
		keys := bidKeys(s.Keys, "lot", events[1].ID)
		if code, err := withdrawScript.Run(context.Background(), s.Client, keys, events[1].ID, 60).Int64(); err != nil || code != 2 {
			t.Fatalf("second withdrawal: %d %v", code, err)
		}
		if after := auctionState(t, st, "lot"); after != before {
			t.Fatalf("a second withdrawal changed the auction")
		}
		// The next bid must beat the restored highest, not the withdrawn one.
		if a := st.Bid("lot", "carol", "151.00"); a.Status != 200 {
			t.Fatalf("a bid above the restored highest: %d %s", a.Status, a.Body)
		}
		if got := st.Admissions("bid", "released"); got != 1 {
			t.Fatalf("released counter %v", got)
		}
		// The worker shows bob's bid as withdrawn.
		eventually(t, 10*time.Second, "withdrawal indexed", func() bool {
			items, _ := st.AdminGet("/api/users/bob/bids").JSON["items"].([]any)
			return len(items) == 1 && items[0].(map[string]any)["state"] == "withdrawn"
		})
		bob := st.AdminGet("/api/users/bob/bids").JSON["items"].([]any)[0].(map[string]any)
		if bob["amount"] != "200.00" || bob["auction_id"] != "lot" || bob["withdrawn_at"] == nil || strings.Contains(fmt.Sprint(bob), "bob") {
			t.Fatalf("bob's bid record %v", bob)
		}
	})
}

// A bid the shop refuses with a 4xx (a bidder who is not signed in) is the shop's final word: kept
// under the default release_on, withdrawn when release_on lists 4xx, as config.example.yaml's bid route
// does. With 4xx listed nobody can park an unpayable top bid on an auction.
func TestBid_OriginRefusalWithdraws(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "100.00", "1.00", time.Hour))
		if a := st.Bid("lot", "alice", "150.00"); a.Status != 200 {
			t.Fatal(a.Body)
		}
		st.Status.Store(401)
		if a := st.BidOn("/strict/auctions/", "lot", "mallory", "999999999999.99"); a.Status != 401 {
			t.Fatalf("refused by the shop: %d %s", a.Status, a.Body)
		}
		h := st.Get("/_edgeq/auctions/lot/highest-bid")
		if hb, _ := h.JSON["highest_bid"].(map[string]any); hb["amount"] != "150.00" {
			t.Fatalf("after a refusal with 4xx in release_on the highest is %s", h.Body)
		}
		st.Status.Store(200)
		if a := st.BidOn("/strict/auctions/", "lot", "bob", "151.00"); a.Status != 200 {
			t.Fatalf("a real bid after the refused one: %d %s", a.Status, a.Body)
		}
		// The default release_on keeps what the shop refused with a 4xx.
		st.Status.Store(401)
		if a := st.Bid("lot", "mallory", "500.00"); a.Status != 401 {
			t.Fatalf("refused by the shop: %d %s", a.Status, a.Body)
		}
		st.Status.Store(200)
		h = st.Get("/_edgeq/auctions/lot/highest-bid")
		if hb, _ := h.JSON["highest_bid"].(map[string]any); hb["amount"] != "500.00" {
			t.Fatalf("under the default release_on a 4xx commits; the highest is %s", h.Body)
		}
	})
}

// A withdrawn bid that is no longer the highest leaves the highest alone.
func TestBid_WithdrawBelowTheHighest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "100.00", "1.00", time.Hour))
		ctx := context.Background()
		bid := func(id, user string, cents int64) {
			res, err := bidScript.Run(ctx, s.Client, bidKeys(s.Keys, "lot", id), id, user, cents, 60).Int64Slice()
			if err != nil || res[0] != 0 {
				t.Fatalf("bid %s: %v %v", id, res, err)
			}
		}
		bid("1", "u1", 10000)
		bid("2", "u2", 11000)
		bid("3", "u3", 12000)
		if code, err := withdrawScript.Run(ctx, s.Client, bidKeys(s.Keys, "lot", "2"), "2", 60).Int64(); err != nil || code != 0 {
			t.Fatalf("withdraw: %d %v", code, err)
		}
		if h := s.Client.HGet(ctx, auctionHighestKey(s.Keys, "lot"), "bid_id").Val(); h != "3" {
			t.Fatalf("highest is bid %s, want 3", h)
		}
		for _, id := range []string{"3", "1"} {
			if code, _ := withdrawScript.Run(ctx, s.Client, bidKeys(s.Keys, "lot", id), id, 60).Int64(); code != 0 {
				t.Fatalf("withdraw %s: %d", id, code)
			}
		}
		if n := s.Client.Exists(ctx, auctionHighestKey(s.Keys, "lot")).Val(); n != 0 {
			t.Fatal("with every bid withdrawn there is still a highest bid")
		}
		// A committed bid cannot be withdrawn.
		bid("4", "u4", 10000)
		if code, _ := bidCommitScript.Run(ctx, s.Client, bidKeys(s.Keys, "lot", "4"), "4", "0").Int64(); code != 0 {
			t.Fatalf("commit: %d", code)
		}
		if code, _ := withdrawScript.Run(ctx, s.Client, bidKeys(s.Keys, "lot", "4"), "4", 60).Int64(); code != 3 {
			t.Fatalf("withdrawing a committed bid: %d, want 3", code)
		}
	})
}

// History paging, stats and the batch read.
func TestBid_Reads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "100.00", "0.50", time.Hour), auction("quiet", "10.00", "1.00", time.Hour))
		for i := range 7 {
			if a := st.Bid("lot", fmt.Sprintf("u%d", i%3), money.Format(10000+int64(i)*50)); a.Status != 200 {
				t.Fatal(a.Body)
			}
		}
		var all []string
		for page := 1; page <= 3; page++ {
			a := st.Get(fmt.Sprintf("/_edgeq/auctions/lot/bids?page=%d&page_size=3", page))
			items, _ := a.JSON["items"].([]any)
			if a.Status != 200 || num(a.JSON["total_count"]) != 7 || num(a.JSON["page"]) != int64(page) || num(a.JSON["page_size"]) != 3 {
				t.Fatalf("page %d: %s", page, a.Body)
			}
			for _, it := range items {
				all = append(all, it.(map[string]any)["amount"].(string))
			}
		}
		want := []string{"103.00", "102.50", "102.00", "101.50", "101.00", "100.50", "100.00"}
		if !slices.Equal(all, want) {
			t.Fatalf("history %v, want %v", all, want)
		}
		if a := st.Get("/_edgeq/auctions/lot/bids?page=9"); a.Status != 200 || len(a.JSON["items"].([]any)) != 0 || num(a.JSON["page_size"]) != 20 {
			t.Fatalf("past the end: %d %s", a.Status, a.Body)
		}
		for _, q := range []string{"page=0", "page=x", "page_size=0", "page_size=101"} {
			if a := st.Get("/_edgeq/auctions/lot/bids?" + q); a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" {
				t.Errorf("%s: %d %s", q, a.Status, a.Body)
			}
		}
		if a := st.Get("/_edgeq/auctions/nope/bids"); a.Status != 404 || a.JSON["error"] != "AUCTION_NOT_FOUND" {
			t.Fatalf("history of an unknown auction: %d %s", a.Status, a.Body)
		}
		stats := st.Get("/_edgeq/auctions/lot/stats")
		growth, _ := stats.JSON["price_growth"].(map[string]any)
		if num(stats.JSON["total_bids"]) != 7 || num(stats.JSON["unique_bidders"]) != 3 || growth["start_price"] != "100.00" ||
			growth["current_highest"] != "103.00" || growth["growth_rate"] != 0.03 {
			t.Fatalf("stats %s", stats.Body)
		}
		quiet := st.Get("/_edgeq/auctions/quiet/stats")
		if g := quiet.JSON["price_growth"].(map[string]any); g["current_highest"] != nil || g["growth_rate"] != 0.0 {
			t.Fatalf("stats without bids %s", quiet.Body)
		}
		if h := st.Get("/_edgeq/auctions/quiet/highest-bid"); h.Status != 200 || h.JSON["highest_bid"] != nil {
			t.Fatalf("highest without bids %s", h.Body)
		}
		// Bidders appear as pseudonyms.
		if h := st.Get("/_edgeq/auctions/lot/highest-bid"); strings.Contains(h.Body, "u0") || strings.Contains(h.Body, "u1") {
			t.Fatalf("a raw user id in a public read: %s", h.Body)
		}

		batch := func(body string) answer {
			req, _ := http.NewRequest("POST", st.Public.URL+"/_edgeq/bids/highest-bids/batch", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			return do(t, req)
		}
		a := batch(`{"auction_ids":["lot","quiet","nope"]}`)
		var items []map[string]any
		if err := json.Unmarshal([]byte(a.Body), &items); err != nil || a.Status != 200 || len(items) != 3 {
			t.Fatalf("batch: %d %s", a.Status, a.Body)
		}
		if items[0]["highest_bid"].(map[string]any)["amount"] != "103.00" || items[1]["highest_bid"] != nil ||
			items[2]["highest_bid"] != nil || items[2]["error"] != "AUCTION_NOT_FOUND" || items[1]["error"] != nil {
			t.Fatalf("batch items %s", a.Body)
		}
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprintf("%q", fmt.Sprint("a", i))
		}
		for _, body := range []string{`{"auction_ids":[]}`, `{"auction_ids":[` + strings.Join(many, ",") + `]}`,
			`{"auction_ids":["a.b"]}`, `{"auction_ids":"lot"}`, `not json`, `{"auction_ids":["lot"],"x":1}`} {
			if a := batch(body); a.Status != 400 {
				t.Errorf("batch %.40s: %d %s", body, a.Status, a.Body)
			}
		}
	})
}

// The admin API creates, updates and shows auctions; the configuration seeds them.
func TestBid_AdminAuctions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		ends := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
		a := st.AdminSend("PUT", "/api/auctions/vase", "application/json",
			`{"starting_price":"50.00","min_increment":"2.50","ends_at":"`+ends+`","owner":"seller"}`)
		if a.Status != 200 || a.JSON["starting_price"] != "50.00" || a.JSON["min_increment"] != "2.50" || a.JSON["ends_at"] != ends ||
			a.JSON["ended"] != false || a.JSON["highest_bid"] != nil || strings.Contains(a.Body, "seller") {
			t.Fatalf("PUT: %d %s", a.Status, a.Body)
		}
		if b := st.Bid("vase", "seller", "60.00"); b.Status != 403 {
			t.Fatalf("the owner bid on an auction made by the API: %d %s", b.Status, b.Body)
		}
		if b := st.Bid("vase", "buyer", "50.00"); b.Status != 200 {
			t.Fatal(b.Body)
		}
		if b := st.Bid("vase", "other", "52.49"); b.Status != 409 || b.JSON["highest_amount"] != "50.00" {
			t.Fatalf("below the increment: %d %s", b.Status, b.Body)
		}
		g := st.AdminGet("/api/auctions/vase")
		if g.Status != 200 || num(g.JSON["total_bids"]) != 1 || g.JSON["highest_bid"].(map[string]any)["amount"] != "50.00" {
			t.Fatalf("GET: %d %s", g.Status, g.Body)
		}
		list := st.AdminGet("/api/auctions")
		items, _ := list.JSON["items"].([]any)
		if list.Status != 200 || len(items) != 1 || num(list.JSON["total_count"]) != 1 ||
			items[0].(map[string]any)["id"] != "vase" || num(items[0].(map[string]any)["total_bids"]) != 1 {
			t.Fatalf("list: %d %s", list.Status, list.Body)
		}
		if list := st.AdminGet("/api/auctions?page=2&page_size=1"); list.Status != 200 || len(list.JSON["items"].([]any)) != 0 ||
			num(list.JSON["total_count"]) != 1 || num(list.JSON["page"]) != 2 {
			t.Fatalf("list past the end: %d %s", list.Status, list.Body)
		}
		if list := st.AdminGet("/api/auctions?page_size=101"); list.Status != 400 || list.JSON["field"] != "page_size" {
			t.Fatalf("list with page_size=101: %d %s", list.Status, list.Body)
		}
		before := auctionState(t, st, "vase")
		for _, body := range []string{`{"starting_price":"abc","ends_at":"` + ends + `"}`, `{"starting_price":"10.00"}`,
			`{"starting_price":"10.00","ends_at":"tomorrow"}`, `{"starting_price":"10.00","ends_at":"` + ends + `","extra":1}`,
			`{"starting_price":"10.00","min_increment":"0","ends_at":"` + ends + `"}`} {
			if a := st.AdminSend("PUT", "/api/auctions/vase", "application/json", body); a.Status != 400 {
				t.Errorf("PUT %s: %d %s", body, a.Status, a.Body)
			}
		}
		if a := st.AdminSend("PUT", "/api/auctions/a.b", "application/json", `{"starting_price":"10.00","ends_at":"`+ends+`"}`); a.Status != 400 {
			t.Errorf("PUT with a bad id: %d %s", a.Status, a.Body)
		}
		if after := auctionState(t, st, "vase"); after != before {
			t.Fatalf("refused PUTs changed the auction")
		}
		if a := st.AdminGet("/api/auctions/none"); a.Status != 404 || a.JSON["error"] != "AUCTION_NOT_FOUND" {
			t.Fatalf("unknown: %d %s", a.Status, a.Body)
		}
		// Re-seeding from the configuration keeps the bids.
		cfg := auctions.Auction{ID: "vase", StartingPrice: "50.00", MinIncrement: "5.00", EndsAt: time.Now().Add(time.Hour)}
		if err := st.svc.Apply(context.Background(), auctions.With(&config.Config{}, cfg), nil); err != nil {
			t.Fatal(err)
		}
		if g := st.AdminGet("/api/auctions/vase"); g.JSON["min_increment"] != "5.00" || num(g.JSON["total_bids"]) != 1 {
			t.Fatalf("after seeding: %s", g.Body)
		}
		// An unchanged entry is not written again on reload.
		s.Client.HSet(context.Background(), auctionInfoKey(s.Keys, "vase"), "min_increment", 700)
		if err := st.svc.Apply(context.Background(), auctions.With(&config.Config{}, cfg), auctions.With(&config.Config{}, cfg)); err != nil {
			t.Fatal(err)
		}
		if v := s.Client.HGet(context.Background(), auctionInfoKey(s.Keys, "vase"), "min_increment").Val(); v != "700" {
			t.Fatalf("an unchanged auction was rewritten: %s", v)
		}
		if a := st.AdminSend("GET", "/api/users/buyer/bids?page_size=0", "", ""); a.Status != 400 {
			t.Fatalf("bad paging: %d", a.Status)
		}
	})
}

// An auction's bid event that cannot be applied is dead-lettered and can be retried.
func TestBid_WorkerDeadLetters(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		st.AddAuctions(auction("lot", "100.00", "1.00", time.Hour))
		ctx := context.Background()
		stream := auctionEventsKey(s.Keys, "lot")
		s.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []string{"type", "bid", "bid", "9", "user", "x", "amount", "oops", "at", "1"}})
		st.StartWorker()
		eventually(t, 10*time.Second, "dead-lettered", func() bool {
			return num(st.AdminGet("/api/dead-letters").JSON["total_count"]) == 1
		})
		items := st.AdminGet("/api/dead-letters").JSON["items"].([]any)
		d := items[0].(map[string]any)
		if d["auction_id"] != "lot" || d["product_id"] != nil || !strings.HasPrefix(d["id"].(string), "auction.lot.") {
			t.Fatalf("dead letter %v", d)
		}
		if a := st.AdminSend("POST", "/api/dead-letters/"+d["id"].(string)+"/retry", "", ""); a.Status != 409 {
			t.Fatalf("retrying a malformed event: %d %s", a.Status, a.Body)
		}
	})
}

// An auction's history, bidder counts and events go a week after it ends; its info and highest bid
// stay. bid.lua sets those TTLs once per end rather than on every bid: a later end moves them with
// the next bid.
func TestBid_TheAuctionsKeysGoAWeekAfterItsEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s)
		ctx := context.Background()
		a := auction("lot", "1.00", "1.00", time.Hour)
		st.AddAuctions(a)
		expiring := []string{auctionBidsKey(s.Keys, "lot"), auctionBiddersKey(s.Keys, "lot"), auctionEventsKey(s.Keys, "lot")}
		check := func(end time.Time) {
			t.Helper()
			want := end.Add(7 * 24 * time.Hour)
			for _, key := range expiring {
				at := time.Now().Add(s.Client.PTTL(ctx, key).Val())
				if d := at.Sub(want); d < -time.Minute || d > time.Minute {
					t.Fatalf("%s goes at %v, want a week after the end (%v)", key, at, want)
				}
			}
			for _, key := range []string{auctionInfoKey(s.Keys, "lot"), auctionHighestKey(s.Keys, "lot")} {
				if ttl := s.Client.TTL(ctx, key).Val(); ttl != -1 {
					t.Fatalf("%s has a TTL (%v): it stays", key, ttl)
				}
			}
		}
		for i, amount := range []string{"2.00", "3.00", "4.00"} {
			if r := st.Bid("lot", fmt.Sprintf("b%d", i), amount); r.Status != 200 {
				t.Fatalf("bid %s: %d %s", amount, r.Status, r.Body)
			}
		}
		check(a.EndsAt)
		// The end moves (the configuration says so): the next bid moves the TTLs.
		a.EndsAt = a.EndsAt.Add(48 * time.Hour)
		st.AddAuctions(a)
		if r := st.Bid("lot", "b9", "5.00"); r.Status != 200 {
			t.Fatalf("bid after the end moved: %d %s", r.Status, r.Body)
		}
		check(a.EndsAt)
	})
}
