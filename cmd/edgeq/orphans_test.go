package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Two replicas of one Redis; a slow shop (an order is placed when
// its checkout completes: a checkout whose connection drops first places none); the first replica is
// SIGKILLed with purchases admitted and still at the shop. They stay unsettled, their units taken for
// orders that never came.
//   - orphans: release — once the dead replica's lease has run out and they are older than
//     origin.timeout, the other replica's sweep gives their units back: units taken == orders at the
//     shop, within the lease (15 s) plus origin.timeout plus one sweep (5 s) of the kill.
//   - orphans: hold — they are held, each listed as unsettled and marked held, and counted.
func TestOrphans_ASIGKILLedReplicasUnsettledAdmissionsFollowTheRoute(t *testing.T) {
	for _, policy := range []string{"release", "hold"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			const units, originTimeout = 100, 3 * time.Second
			redisSrv := privateRedis(t)
			var mu sync.Mutex
			orders := map[string]bool{}
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select { // a slow checkout
				case <-time.After(1500 * time.Millisecond):
				case <-r.Context().Done():
					return // the connection dropped before the order was placed: no order
				}
				mu.Lock()
				orders[r.Header.Get("Edgeq-Admission-Id")] = true
				mu.Unlock()
				fmt.Fprint(w, "order placed")
			}))
			defer origin.Close()
			path := filepath.Join(t.TempDir(), "edgeq.yaml")
			os.WriteFile(path, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 2s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: %s}
redis: {addr: %q}
products:
  - {id: shoe, stock: %d, per_user_limit: 1, name: "Shoe"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User", orphans: %s}
`, origin.URL, originTimeout, redisSrv.Addr(), units, policy)), 0o644)
			doomed, _, kill := serveReplica(t, path)
			_, admin, _ := serveReplica(t, path)

			// Buyers on the doomed replica, one after the other in 8 lanes: some orders are placed, some
			// purchases are at the shop when it dies.
			stop := make(chan struct{})
			var buyers sync.WaitGroup
			for lane := range 8 {
				buyers.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						req, _ := http.NewRequest("POST", "http://"+doomed+"/checkout/shoe", nil)
						req.Header.Set("X-User", "buyer-"+strconv.Itoa(lane)+"-"+strconv.Itoa(i))
						if resp, err := http.DefaultClient.Do(req); err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						} else {
							return // its replica is dead
						}
					}
				})
			}
			time.Sleep(4 * time.Second) // a few rounds of orders, then the kill mid-checkout
			kill()
			killedAt := time.Now()
			close(stop)
			buyers.Wait()

			client := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
			defer client.Close()
			ctx := context.Background()
			taken := func() int64 {
				n, _ := client.Get(ctx, "edgeq:{p:shoe}:stock").Int64()
				return units - n
			}
			placed := func() int64 {
				mu.Lock()
				defer mu.Unlock()
				return int64(len(orders))
			}
			time.Sleep(2 * time.Second) // the shop's last checkouts end (and place no order)
			stranded := taken() - placed()
			if stranded <= 0 {
				t.Fatalf("the kill left no admission at the shop (%d taken, %d orders): nothing to test", taken(), placed())
			}
			api := func(path string) map[string]any {
				req, _ := http.NewRequest("GET", "http://"+admin+path, nil)
				req.Header.Set("Authorization", "Bearer test-key")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var body map[string]any
				json.NewDecoder(resp.Body).Decode(&body)
				return body
			}
			bound := 15*time.Second + originTimeout + 5*time.Second
			if policy == "release" {
				deadline := killedAt.Add(bound + 3*time.Second)
				for taken() != placed() {
					if time.Now().After(deadline) {
						t.Fatalf("%s after the kill: %d units taken, %d orders (%d stranded at the kill) live=%v time=%v", time.Since(killedAt).Round(time.Second), taken(), placed(), stranded, client.HGetAll(ctx, "edgeq:{edgeq}:live").Val(), client.Time(ctx).Val().UnixMilli())
					}
					time.Sleep(200 * time.Millisecond)
				}
				t.Logf("release: %d stranded units back %s after the kill (bound: lease 15s + origin.timeout %s + one sweep 5s)",
					stranded, time.Since(killedAt).Round(100*time.Millisecond), originTimeout)
				if tally := api("/api/admissions?state=admitted&older_than=0")["orphans"].(map[string]any); tally["released"] != float64(stranded) {
					t.Fatalf("orphans tally %v, want %d released", tally, stranded)
				}
				return
			}
			deadline := killedAt.Add(bound + 3*time.Second)
			for {
				list := api("/api/admissions?state=admitted&older_than=0")
				held := 0
				for _, it := range list["items"].([]any) {
					if it.(map[string]any)["orphan"] == "held" {
						held++
					}
				}
				if int64(held) == stranded && list["orphans"].(map[string]any)["held"] == float64(stranded) {
					t.Logf("hold: %d stranded units held and listed %s after the kill", stranded, time.Since(killedAt).Round(100*time.Millisecond))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("held %d of %d stranded: %v", held, stranded, list)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if taken()-placed() != stranded {
				t.Fatalf("held units changed: %d taken, %d orders", taken(), placed())
			}
		})
	}
}

// A replica stopped (SIGSTOP: a long GC pause, a frozen VM, a container throttled to nothing) with
// purchases admitted and waiting in a max_in_flight hold line. Its lease runs out; the other replica's
// sweep gives their units back (orphans: release), and they may sell again. When the stopped replica
// resumes (SIGCONT), none of the purchases whose units were given back reaches the shop: its lease
// lapsed since their admission, so each is answered 503 STORE_UNAVAILABLE unsent (docs/reference.md
// "Failover").
func TestOrphans_APausedReplicaForwardsNothingReleased(t *testing.T) {
	const purchases = 12
	redisSrv := privateRedis(t)
	var mu sync.Mutex
	arrived := map[string]bool{} // admission ids that reached the shop
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived[r.Header.Get("Edgeq-Admission-Id")] = true
		mu.Unlock()
		time.Sleep(300 * time.Millisecond) // a checkout takes a while: the others wait in the hold line
		fmt.Fprint(w, "order placed")
	}))
	defer origin.Close()
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 2s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 2s}
redis: {addr: %q}
products:
  - {id: shoe, stock: 100, per_user_limit: 1, name: "Shoe"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    max_in_flight: 1
    hold: 60s
    hold_per_client: 20
    admission: {type: stock, product: "path:product", user: "header:X-User", orphans: release}
`, origin.URL, redisSrv.Addr())), 0o644)
	paused, _, process := serveReplicaProcess(t, path)
	_, admin, _ := serveReplica(t, path)
	client := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer client.Close()
	ctx := context.Background()
	taken := func() int64 {
		n, _ := client.Get(ctx, "edgeq:{p:shoe}:stock").Int64()
		return 100 - n
	}
	shop := func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(arrived)
	}

	statuses := buyShoes(paused, purchases, 120*time.Second)
	// Every purchase admitted, one at the shop, the others in the hold line: then the pause.
	deadline := time.Now().Add(20 * time.Second)
	for taken() < purchases || len(shop()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d admitted, %d at the shop", taken(), len(shop()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	before := shop()

	// The other replica's sweep gives back what the stopped one left unsettled, once its lease ran
	// out (15 s after its last renewal, plus the sweep's margin and period).
	api := func(path string) map[string]any {
		req, _ := http.NewRequest("GET", "http://"+admin+path, nil)
		req.Header.Set("Authorization", "Bearer test-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return body
	}
	var released float64
	for {
		list := api("/api/admissions?state=admitted&older_than=0")
		released, _ = list["orphans"].(map[string]any)["released"].(float64)
		if released > 0 && len(list["items"].([]any)) == 0 {
			break
		}
		if time.Since(stoppedAt) > 40*time.Second {
			t.Fatalf("%s after the stop, the sweep released %v: %v", time.Since(stoppedAt).Round(time.Second), released, list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%v admissions of the stopped replica given back %s after the stop; %d units still taken (orders placed before)",
		released, time.Since(stoppedAt).Round(100*time.Millisecond), taken())
	if err := process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	unavailable := 0
	for range purchases {
		select {
		case code := <-statuses:
			if code == http.StatusServiceUnavailable {
				unavailable++
			}
		case <-time.After(90 * time.Second):
			t.Fatal("a purchase of the resumed replica never got an answer")
		}
	}
	var late []string
	for id := range shop() {
		if !before[id] {
			late = append(late, id)
		}
	}
	if len(late) > 0 {
		t.Fatalf("after SIGCONT the resumed replica sent the shop %d purchases whose units the sweep had given back: %v", len(late), late)
	}
	if unavailable < purchases-len(before) {
		t.Errorf("%d purchases answered 503, want at least the %d never sent", unavailable, purchases-len(before))
	}
}

// A replica stopped while its purchases are at the shop, for longer than origin.timeout: the shop
// answers 200 meanwhile, and the answers wait in the replica's sockets. When it resumes, the timer
// and the answer are ready at once; the answer is read (200 to the buyer, the unit kept), not a 504
// that gives back a unit the shop sold (before: 83 orders for 60 units).
func TestSettle_AnAnswerReadyAtTheTimeoutIsRead(t *testing.T) {
	const purchases = 60
	redisSrv := privateRedis(t)
	var mu sync.Mutex
	arrived := 0
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		mu.Unlock()
		time.Sleep(time.Second)
		fmt.Fprint(w, "order placed")
	}))
	defer origin.Close()
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 2s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 2s}
redis: {addr: %q}
products:
  - {id: shoe, stock: 100, per_user_limit: 1, name: "Shoe"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User", orphans: hold}
`, origin.URL, redisSrv.Addr())), 0o644)
	public, _, process := serveReplicaProcess(t, path)
	statuses := buyShoes(public, purchases, 60*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := arrived
		mu.Unlock()
		if n == purchases {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d purchases reached the shop", n, purchases)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past origin.timeout; the shop answered 1 s in
	if err := process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for range purchases {
		if code := <-statuses; code != 200 {
			t.Errorf("a purchase the shop answered 200 to was answered %d", code)
		}
	}
	client := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer client.Close()
	left, _ := client.Get(context.Background(), "edgeq:{p:shoe}:stock").Int64()
	if taken := 100 - left; taken != purchases {
		t.Fatalf("%d units taken for %d orders placed", taken, purchases)
	}
}

// buyShoes sends n purchases of a shoe to a replica at once, each as another buyer, and delivers each
// answer's status (0 for no answer within timeout).
func buyShoes(replica string, n int, timeout time.Duration) <-chan int {
	statuses := make(chan int, n)
	client := &http.Client{Timeout: timeout}
	for i := range n {
		go func() {
			req, _ := http.NewRequest("POST", "http://"+replica+"/checkout/shoe", nil)
			req.Header.Set("X-User", "buyer-"+strconv.Itoa(i))
			resp, err := client.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	return statuses
}
