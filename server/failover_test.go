package server

import (
	"context"
	"encoding/json"
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

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/tcpproxy"
)

// shop is an origin that takes orders: it records each admission id it receives with the buyer, as a
// shop records an order, and answers at once.
type shop struct {
	*httptest.Server
	mu     sync.Mutex
	orders map[string]string // admission id -> buyer
	byUser map[string]int    // buyer -> orders
}

func newShop(t *testing.T) *shop {
	s := &shop{orders: map[string]string{}, byUser: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, user := r.Header.Get("Edgeq-Admission-Id"), r.Header.Get("X-User")
		s.mu.Lock()
		if _, dup := s.orders[id]; id != "" && !dup {
			s.orders[id] = user
			s.byUser[user]++
		}
		s.mu.Unlock()
		fmt.Fprint(w, "order placed")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *shop) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders)
}

// buyers has each of n buyers try to buy one unit until the answer is final: 200 (bought) or a 409
// that says no (sold out, already bought); a 503 or a purchase still in progress is tried again, as a
// shopper's retry button does. A buyer who bought clicks once more a moment later, to be refused by
// the per-user limit. It returns when every buyer is done or stop is closed.
func buyers(base string, n, concurrency int, stop <-chan struct{}) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				user := "buyer-" + strconv.Itoa(i)
				again := false
				for {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest("POST", base+"/checkout/p", nil)
					req.Header.Set("X-User", user)
					req.Header.Set("Accept", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var body struct {
						Error string `json:"error"`
					}
					json.Unmarshal(raw, &body)
					if resp.StatusCode == 200 && !again {
						// A second click a moment later: the per-user limit must refuse it, failover or not.
						again = true
						time.Sleep(100 * time.Millisecond)
						continue
					}
					if resp.StatusCode == 200 || resp.StatusCode == 409 && body.Error != "PURCHASE_IN_PROGRESS" {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-stop:
		}
	}
	close(next)
	wg.Wait()
}

// A sale of 600 units to 1,200 buyers who retry on 503, on a Sentinel-managed
// master whose replica lags 150 ms behind it (another zone). When a third of the stock is sold, the
// master is lost with what it had on the wire, and Sentinel promotes the lagging replica; the old master
// comes back later as a replica of the new one, and the sale goes on to the end.
//   - wait_replicas 1: every order that reached the shop is a unit taken on the promoted master, no
//     unit is sold twice and no buyer has two orders.
//   - wait_replicas 0 (the counterfactual): the promoted replica never saw the last reservations, and
//     their units and buyers' claims are sold again.
func TestFailover_LaggingReplicaSellsNothingTwice(t *testing.T) {
	for _, wait := range []int{1, 0} {
		t.Run(fmt.Sprintf("wait_replicas=%d", wait), func(t *testing.T) {
			const units, people = 600, 1200
			top := storetest.Topology(t, redisserver.TopologyOptions{Replicas: []redisserver.ReplicaOptions{{Delay: 150 * time.Millisecond}}})
			origin := newShop(t)
			in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 10s}
redis: {addrs: [%s], master_name: %q, wait_replicas: %d, wait_timeout: 1s}
log: {level: warn}
store_health: {interval: 500ms, failures_to_degrade: 30, successes_to_recover: 1, cooldown: 0s}
products:
  - {id: p, stock: %d, per_user_limit: 1, name: "Sneaker"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, origin.URL, quoteAll(top.SentinelAddrs()), top.MasterName(), wait, units))

			// The sale starts once the replica has the product, as a sale configured ahead of time does.
			replica := redis.NewClient(&redis.Options{Addr: top.Replica(0).Addr()})
			defer replica.Close()
			eventually(t, "the product on the replica", func() bool {
				return replica.Exists(context.Background(), "edgeq:{p:p}:info").Val() == 1
			})
			stop := make(chan struct{})
			sold := make(chan struct{})
			go func() { buyers(in.public, people, 32, stop); close(sold) }()
			eventually(t, "a third of the stock sold", func() bool { return origin.count() >= units/3 })
			from, err := top.LoseMaster()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			promoted, err := top.WaitFailover(ctx, from)
			if err != nil {
				t.Fatal(err)
			}
			// The old master comes back as the new one's replica: with wait_replicas 1 the sale resumes
			// only then (the promoted replica has no replica of its own before).
			if err := top.RestartOldMaster(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-sold:
			case <-time.After(90 * time.Second):
				close(stop)
				<-sold
				t.Fatalf("the sale did not end: %d orders\nlogs:\n%s", origin.count(), in.logs)
			}

			master := redis.NewClient(&redis.Options{Addr: promoted})
			defer master.Close()
			remaining, err := master.Get(ctx, "edgeq:{p:p}:stock").Int64()
			if err != nil {
				t.Fatal(err)
			}
			taken := units - remaining
			origin.mu.Lock()
			orders := len(origin.orders)
			var lost, twice []string
			for id := range origin.orders {
				if admissionRecordState(ctx, master, id) == "" {
					lost = append(lost, id)
				}
			}
			for user, n := range origin.byUser {
				if n > 1 {
					twice = append(twice, user)
				}
			}
			origin.mu.Unlock()
			t.Logf("wait_replicas %d: %d orders at the shop, %d units taken on the promoted master, %d orders whose reservation it lost, %d buyers with two orders",
				wait, orders, taken, len(lost), len(twice))
			if wait == 0 {
				// The counterfactual: what the asynchronous replication lost is sold again.
				if orders <= units && len(lost) == 0 {
					t.Fatalf("without wait_replicas the failover lost nothing (%d orders, %d units): the lag did not show", orders, taken)
				}
				return
			}
			if len(lost) > 0 {
				t.Errorf("%d orders reached the shop with reservations the promoted master does not have: %v", len(lost), lost[:min(5, len(lost))])
			}
			if len(twice) > 0 {
				t.Errorf("buyers with two orders (per_user_limit 1): %v", twice[:min(5, len(twice))])
			}
			if int64(orders) != taken {
				t.Errorf("%d orders at the shop, %d units taken on the promoted master", orders, taken)
			}
			if orders > units {
				t.Errorf("%d orders for %d units", orders, units)
			}
			// Commits the failover lost were sent again (replay.go): nothing is left unsettled.
			eventually(t, "no admission unsettled", func() bool {
				req, _ := http.NewRequest("GET", in.admin+"/api/admissions?state=admitted&older_than=0", nil)
				req.Header.Set("Authorization", "Bearer test-key")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				var list struct {
					Total int `json:"total_count"`
				}
				return json.NewDecoder(resp.Body).Decode(&list) == nil && list.Total == 0
			})
		})
	}
}

// Two replicas sell one product; one replica's link to Redis is
// black-holed for 10 s mid-sale (nothing passes, nothing is reset: a network partition) while the other
// keeps selling. The cut replica refuses (on_store_error: closed) and sends the shop nothing it has not
// reserved; when the link is back it serves again by itself, and in the end every order at the shop is
// a unit taken, none lost, none sold twice. The time it takes to serve again is measured (logged): with
// these store_health settings it is within 5 s; with the defaults (cooldown 30s) the replica stays
// degraded until 30 s after it degraded (docs/reference.md, "Store outages").
func TestPartition_ACutReplicaRefusesThenRecoversByItself(t *testing.T) {
	const units = 50_000
	srv := privateRedisWith(t)
	link, err := tcpproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	origin := newShop(t)
	config := func(redisAddr string) string {
		return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 10s}
redis: {addr: %q}
log: {level: warn}
store_health: {interval: 500ms, failures_to_degrade: 3, successes_to_recover: 3, cooldown: 5s}
products:
  - {id: p, stock: %d, per_user_limit: 1, name: "Sneaker"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    on_store_error: closed
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, origin.URL, redisAddr, units)
	}
	cut := start(t, config(link.Addr()))
	other := start(t, config(srv.Addr()))

	type attempt struct {
		replica    string
		start, end time.Time
		status     int
	}
	var mu sync.Mutex
	var attempts []attempt
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var next atomic.Int64
	for _, rp := range []struct{ name, base string }{{"cut", cut.public}, {"other", other.public}} {
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest("POST", rp.base+"/checkout/p", nil)
					req.Header.Set("X-User", "buyer-"+strconv.FormatInt(next.Add(1), 10))
					req.Header.Set("Accept", "application/json")
					a := attempt{replica: rp.name, start: time.Now()}
					if resp, err := http.DefaultClient.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						a.status = resp.StatusCode
					}
					a.end = time.Now()
					mu.Lock()
					attempts = append(attempts, a)
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
	}
	time.Sleep(time.Second)
	link.Cut()
	cutAt := time.Now()
	time.Sleep(10 * time.Second)
	link.Restore()
	restoredAt := time.Now()
	var back time.Time
	eventually(t, "the cut replica serving again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range attempts {
			if a.replica == "cut" && a.status == 200 && a.start.After(restoredAt) {
				back = a.end
				return true
			}
		}
		return false
	})
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	recovery := back.Sub(restoredAt)
	var during, otherSold, cutRefused int
	var slowest time.Duration
	for _, a := range attempts {
		inCut := a.start.After(cutAt) && a.end.Before(restoredAt)
		if a.replica == "cut" && a.start.After(cutAt) && a.start.Before(restoredAt) {
			slowest = max(slowest, a.end.Sub(a.start))
		}
		switch {
		case a.replica == "cut" && inCut && a.status == 200:
			during++
		case a.replica == "cut" && inCut && a.status == 503:
			cutRefused++
		case a.replica == "other" && inCut && a.status == 200:
			otherSold++
		}
	}
	t.Logf("during the 10 s cut: the cut replica refused %d, admitted %d (its slowest answer %s); the other sold %d; the cut replica served again %s after the link came back",
		cutRefused, during, slowest.Round(10*time.Millisecond), otherSold, recovery.Round(10*time.Millisecond))
	// Fail fast: a purchase on the cut replica waits at most for the call ahead of it in its product's
	// group and for its own, each bounded by the store's call timeout (2 s), not for the link to return.
	if slowest > 5*time.Second {
		t.Errorf("a purchase on the cut replica took %s to be answered during the cut, want within 5 s (two store calls)", slowest)
	}
	if during > 0 {
		t.Errorf("the cut replica admitted %d purchases while it could not reach Redis", during)
	}
	if otherSold == 0 || cutRefused == 0 {
		t.Errorf("the other replica sold %d and the cut one refused %d during the cut: the test saw no sale", otherSold, cutRefused)
	}
	if recovery > 5*time.Second {
		t.Errorf("the cut replica served again %s after the link came back, want within 5 s", recovery)
	}
	// Every order is a unit taken (compensations for what the cut replica could not confirm have run).
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	ctx := context.Background()
	eventually(t, "orders == units taken", func() bool {
		remaining, err := client.Get(ctx, "edgeq:{p:p}:stock").Int64()
		return err == nil && int64(origin.count()) == units-remaining
	})
	origin.mu.Lock()
	defer origin.mu.Unlock()
	for id := range origin.orders {
		if st := admissionRecordState(ctx, client, id); st != "admitted" && st != "committed" {
			t.Fatalf("order %s reached the shop with its admission %q in the store", id, st)
		}
	}
	for user, n := range origin.byUser {
		if n > 1 {
			t.Fatalf("buyer %s has %d orders", user, n)
		}
	}
}

// edgeq says at start (and in a metric) when fewer replicas are online than
// redis.wait_replicas, and every admission is then refused 503 STORE_UNAVAILABLE (replica_timeout),
// whatever on_store_error says.
func TestWaitReplicas_FewerReplicasThanAskedIsSaidAndRefusesAdmissions(t *testing.T) {
	top := storetest.Topology(t, redisserver.TopologyOptions{Replicas: []redisserver.ReplicaOptions{{}}})
	origin := newShop(t)
	in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q, wait_replicas: 2, wait_timeout: 100ms}
log: {level: info}
products:
  - {id: p, stock: 10, per_user_limit: 1, name: "Sneaker"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    on_store_error: open
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, origin.URL, top.Master().Addr()))
	eventually(t, "the warning at start", func() bool {
		return strings.Contains(in.logs.String(), "fewer Redis replicas are online than redis.wait_replicas") &&
			in.metric(t, "edgeq_store_replicas_connected") == 1
	})
	req, _ := http.NewRequest("POST", in.public+"/checkout/p", nil)
	req.Header.Set("X-User", "ann")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(raw), "STORE_UNAVAILABLE") || origin.count() != 0 {
		t.Fatalf("admission with too few replicas: %d %s (%d orders)", resp.StatusCode, raw, origin.count())
	}
	if got := in.metric(t, `edgeq_admissions_total{result="replica_timeout",type="stock"}`); got != 1 {
		t.Fatalf("replica_timeout admissions %v", got)
	}
	if got := in.metric(t, `edgeq_store_replica_waits_total{result="timeout"}`); got != 1 {
		t.Fatalf("replica waits timed out %v", got)
	}
}

func quoteAll(addrs []string) string {
	q := make([]string, len(addrs))
	for i, a := range addrs {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, ", ")
}

// admissionRecordState is the state in product p's store record of admission id: a field of the
// product's records hash for the day of the id's time (admission/scripts/lib.lua).
func admissionRecordState(ctx context.Context, c redis.Cmdable, id string) string {
	n, _ := strconv.ParseUint(id, 10, 64)
	v := c.HGet(ctx, fmt.Sprintf("edgeq:{p:p}:adm@%d", ids.Time(n).Unix()/86400), id).Val()
	state, _, _ := strings.Cut(v, " ")
	return state
}
