package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Issue 31, item 5 and acceptance 2: two replicas of one Redis; a slow shop (an order is placed when
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
