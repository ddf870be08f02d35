package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/edgetest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// Two edgeq replicas (each its own node id, service, proxy and worker) share one store and one
// origin, and take a flash sale and an auction's bids at the same time, requests alternating between
// them. The stock and bid invariants must hold across replicas exactly as within one:
// stock never below zero, sold + remaining = initial, no buyer above per_user_limit, every admission
// once at the origin, accepted bids strictly increasing with the highest the largest of them, ids
// unique across replicas, and the two workers index every event once.
func TestReplicas_StockAndBidInvariants(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		const units, perUser, buyers = 100, 2, 1000
		const bidders, bids = 200, 600
		const collectors, spare = 100, 10_000
		productID, auctionID := spreadIDs(t, s)
		const spareID = "spare"
		products := []products.Product{product(productID, units, perUser), product(spareID, spare, perUser)}
		first := newStack(t, s, products...)
		second := first.replica(2, products...)
		replicas := []*stack{first, second}
		lot := auction(auctionID, "100.00", "1.00", time.Hour)
		first.AddAuctions(lot)
		second.AddAuctions(lot)
		first.StartWorker()
		second.StartWorker()
		ctx := context.Background()

		// A watcher samples the stock while the sale runs.
		stop := make(chan struct{})
		var samples atomic.Int64
		var watcher sync.WaitGroup
		watcher.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := s.Client.Get(ctx, stockKey(s.Keys, productID)).Int64()
				if err != nil {
					continue
				}
				samples.Add(1)
				if n < 0 {
					t.Errorf("stock went below zero: %d", n)
				}
				time.Sleep(time.Millisecond) // sample, do not flood the store the replicas need
			}
		})

		// Every admission id is checked against the replica that answered: each makes its own ids.
		type sale struct{ product, buyer string }
		var mu sync.Mutex
		admittedIDs := map[string]sale{} // admission id -> what it bought
		perBuyer := map[sale]int{}
		byReplica := [2]int{}
		checkout := func(r int, productID, buyer string) (refusal string) {
			a := replicas[r].Checkout(productID, buyer, nil)
			switch {
			case a.Status == 200:
				id, ok := strings.CutPrefix(a.Body, "origin took admission ")
				if !ok || id == "" {
					t.Errorf("%s admitted without an admission id at the origin: %s", buyer, a.Body)
					return ""
				}
				if node := nodeOf(t, id); node != uint64(r+1) {
					t.Errorf("replica %d admitted %s with an id of node %d", r+1, buyer, node)
				}
				mu.Lock()
				defer mu.Unlock()
				if other, dup := admittedIDs[id]; dup {
					t.Errorf("admission id %s given to %v and %s", id, other, buyer)
				}
				admittedIDs[id] = sale{productID, buyer}
				perBuyer[sale{productID, buyer}]++
				byReplica[r]++
				return ""
			case a.Status == 409 && (a.JSON["error"] == "INSUFFICIENT_STOCK" || a.JSON["error"] == "PURCHASE_IN_PROGRESS" ||
				a.JSON["error"] == "ALREADY_PURCHASED"):
				return a.JSON["error"].(string)
			default:
				t.Errorf("%s: %d %s", buyer, a.Status, a.Body)
				return "?"
			}
		}
		// Bidders arrive over most of a second with amounts rising with time, so that bids race across
		// the replicas and many, not all, are accepted.
		o := edgetest.NewBidOutcomes()
		acceptedIDs := map[string]int{} // bid id -> replica that answered
		start := time.Now()
		bid := func(j int) {
			r := j % 2
			time.Sleep(rand.N(800 * time.Millisecond))
			amount := 10000 + time.Since(start).Milliseconds()*200 + rand.Int64N(200)
			a := replicas[r].Bid(auctionID, fmt.Sprintf("bidder-%d", j%bidders), money.Format(amount))
			o.Record(t, auctionID, amount, a)
			if a.Status != 200 {
				return
			}
			id := a.Header.Get("X-Bid-Id")
			if node := nodeOf(t, id); node != uint64(r+1) {
				t.Errorf("replica %d accepted bid %s with an id of node %d", r+1, id, node)
			}
			mu.Lock()
			defer mu.Unlock()
			if _, dup := acceptedIDs[id]; dup {
				t.Errorf("bid id %s answered twice", id)
			}
			acceptedIDs[id] = r
		}
		// The flash sale: each buyer sends two checkouts at once, one to each replica.
		var wg sync.WaitGroup
		for i := range buyers {
			wg.Go(func() { checkout(i%2, productID, fmt.Sprintf("buyer-%d", i)) })
			wg.Go(func() { checkout((i+1)%2, productID, fmt.Sprintf("buyer-%d", i)) })
		}
		for j := range bids {
			wg.Go(func() { bid(j) })
		}
		wg.Wait()
		close(stop)
		watcher.Wait()
		if samples.Load() == 0 {
			t.Fatal("the watcher never read the stock")
		}

		// Then collectors of a product with stock to spare send pairs of checkouts, one to each
		// replica, until told they reached the limit: the per-user limit, not the stock, stops each.
		// (After the rush, not during it: a commit that times out under the rush's load leaves the
		// claim for ClaimTTL, by design, and a collector would wait for it.)
		for k := range collectors {
			wg.Go(func() {
				collector := fmt.Sprintf("collector-%d", k)
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					var both sync.WaitGroup
					var limited atomic.Bool
					for r := range 2 {
						both.Go(func() {
							if checkout(r, spareID, collector) == "ALREADY_PURCHASED" {
								limited.Store(true)
							}
						})
					}
					both.Wait()
					if limited.Load() {
						return
					}
				}
				t.Errorf("%s was never told ALREADY_PURCHASED", collector)
			})
		}
		wg.Wait()

		// Stock: sold + remaining = initial for both products, the sale sold out, every collector got
		// exactly the limit, and the buyer records agree with what the buyers were told.
		for _, p := range []struct {
			id       string
			initial  int64
			soldOut  bool
			atLimit  bool
			visitors int
		}{{productID, units, true, false, buyers}, {spareID, spare, false, true, collectors}} {
			remaining := first.remaining(p.id)
			buyersHash, err := s.Client.HGetAll(ctx, buyersKey(s.Keys, p.id)).Result()
			if err != nil {
				t.Fatal(err)
			}
			var sold int64
			for pseudonym, v := range buyersHash {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 1 || n > perUser {
					t.Errorf("%s: buyer %s holds %q units, limit %d", p.id, pseudonym, v, perUser)
				}
				sold += n
			}
			answered := 0
			for _, bought := range admittedIDs {
				if bought.product == p.id {
					answered++
				}
			}
			if sold+remaining != p.initial || int64(answered) != sold || p.soldOut && remaining != 0 {
				t.Fatalf("%s: sold %d (buyer records) + remaining %d, initial %d; %d admissions answered 200",
					p.id, sold, remaining, p.initial, answered)
			}
			if p.atLimit && sold != int64(p.visitors*perUser) {
				t.Fatalf("%s: %d collectors bought %d units, want %d each", p.id, p.visitors, sold, perUser)
			}
			if total := s.Client.HGet(ctx, infoKey(s.Keys, p.id), "total_stock").Val(); total != strconv.FormatInt(p.initial, 10) {
				t.Fatalf("%s: total_stock %s", p.id, total)
			}
			for bought, n := range perBuyer {
				if bought.product != p.id {
					continue
				}
				if n > perUser || p.atLimit && n != perUser {
					t.Errorf("%s was admitted %d times to %s, limit %d", bought.buyer, n, p.id, perUser)
				}
				if got := buyersHash[first.svc.pseudonyms.of(bought.buyer)]; got != strconv.Itoa(n) {
					t.Errorf("%s: %s admitted %d times, the store records %q", p.id, bought.buyer, n, got)
				}
			}
		}
		reached := 0
		first.IDs.Range(func(id, _ any) bool {
			reached++
			if _, ok := admittedIDs[id.(string)]; !ok {
				t.Errorf("admission %s reached the origin without a 200 to its buyer", id)
			}
			return true
		})
		if reached != len(admittedIDs) {
			t.Fatalf("%d admission ids reached the origin, %d admissions were answered 200", reached, len(admittedIDs))
		}
		var counted float64
		for _, rp := range replicas {
			counted += testutil.ToFloat64(rp.svc.metrics.admissions.WithLabelValues("stock", "admitted"))
		}
		if counted != float64(len(admittedIDs)) {
			t.Fatalf("the replicas counted %v admissions, %d were answered 200", counted, len(admittedIDs))
		}

		// Bids: strictly increasing in acceptance order, each at the origin once, the highest the largest.
		edgetest.CheckAuction(t, first.Stack, auctionID, s.Keys.Entity("a", auctionID, "events"), o, func(id string) { forget(first.bids(), id) })
		events := edgetest.AuctionEvents(t, first.Stack, s.Keys.Entity("a", auctionID, "events"))
		bidsByReplica := [2]int{}
		inStore := map[string]bool{}
		for _, e := range events {
			r, ok := acceptedIDs[e.ID]
			if !ok || inStore[e.ID] {
				t.Fatalf("accepted bid %s: answered 200 %v, twice in the store %v", e.ID, ok, inStore[e.ID])
			}
			inStore[e.ID] = true
			bidsByReplica[r]++
		}
		if len(acceptedIDs) != len(events) {
			t.Fatalf("%d bids answered 200, %d accepted in the store", len(acceptedIDs), len(events))
		}
		var maxAccepted int64
		first.Bids.Range(func(_, amount any) bool {
			cents, err := money.Parse(amount.(string))
			if err != nil {
				t.Errorf("the origin got amount %q", amount)
			}
			maxAccepted = max(maxAccepted, cents)
			return true
		})
		for _, rp := range replicas {
			forget(rp.bids(), auctionID)
			h := rp.Get("/_edgeq/auctions/" + auctionID + "/highest-bid")
			hb, _ := h.JSON["highest_bid"].(map[string]any)
			if h.Status != 200 || hb["amount"] != money.Format(maxAccepted) {
				t.Fatalf("highest bid on a replica: %s, want the largest accepted, %s", h.Body, money.Format(maxAccepted))
			}
		}
		if want := int64(reached + len(events)); first.Hits.Load() != want {
			t.Fatalf("%d requests reached the origin, want %d admissions + %d accepted bids", first.Hits.Load(), reached, len(events))
		}

		// The two workers index every event exactly once.
		eventually(t, 30*time.Second, "admissions indexed", func() bool {
			return num(second.AdminGet("/api/admissions?page_size=1").JSON["total_count"]) == int64(len(admittedIDs))
		})
		lb := first.AdminGet("/api/leaderboard")
		items, _ := lb.JSON["items"].([]any)
		sales := map[string]int64{}
		for _, it := range items {
			row, _ := it.(map[string]any)
			sales[fmt.Sprint(row["product_id"])] = num(row["sales"])
		}
		if len(sales) != 2 || sales[productID] != units || sales[spareID] != collectors*perUser {
			t.Fatalf("leaderboard %s, want %d and %d sales counted once", lb.Body, units, collectors*perUser)
		}
		eventually(t, 30*time.Second, "bids indexed", func() bool {
			var total int64
			for b := range bidders {
				total += num(replicas[b%2].AdminGet(fmt.Sprintf("/api/users/bidder-%d/bids?page_size=1", b)).JSON["total_count"])
			}
			return total == int64(len(events))
		})
		for _, stream := range []string{stockOf(first.svc).Stream(productID), admitsStream(stockOf(first.svc), productID), stockOf(first.svc).Stream(spareID),
			admitsStream(stockOf(first.svc), spareID), s.Keys.Entity("a", auctionID, "events")} {
			eventually(t, 30*time.Second, "nothing pending on "+stream, func() bool {
				p, err := s.Client.XPending(ctx, stream, groupName).Result()
				return err == nil && p.Count == 0
			})
		}
		t.Logf("admissions by replica %v, accepted bids by replica %v, %d too low, %d below the start",
			byReplica, bidsByReplica, len(o.TooLow[auctionID]), o.Invalid.Load())
	})
}

// spreadIDs picks a product and an auction id. On a cluster they are chosen so that the product's keys,
// the auction's keys and the admin indexes ({adm}) live on three different masters: the workers then
// read streams on two nodes and write indexes on a third, and a command spanning them cannot pass.
func spreadIDs(t *testing.T, s *store.Store) (productID, auctionID string) {
	t.Helper()
	adm := storetest.MasterOf(t, s, productIndexKey(s.Keys))
	if adm == "" {
		return "sale", "lot"
	}
	var productNode string
	for i := 0; productID == "" || auctionID == ""; i++ {
		if i == 1000 {
			t.Fatalf("no ids spread over three masters (product %q, auction %q)", productID, auctionID)
		}
		if productID == "" {
			id := fmt.Sprintf("sale-%d", i)
			if node := storetest.MasterOf(t, s, stockKey(s.Keys, id)); node != adm {
				productID, productNode = id, node
			}
			continue
		}
		id := fmt.Sprintf("lot-%d", i)
		if node := storetest.MasterOf(t, s, s.Keys.Entity("a", id, "info")); node != adm && node != productNode {
			auctionID = id
		}
	}
	return productID, auctionID
}

// nodeOf returns the node number inside an id (internal/ids: 41 bits of time, 10 of node, 12 of
// sequence); 0, never a replica's, for what is not an id. Tests call it from many goroutines.
func nodeOf(t *testing.T, id string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		t.Errorf("id %q: %v", id, err)
		return 0
	}
	return n >> 12 & 1023
}
