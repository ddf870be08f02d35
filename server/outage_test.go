package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// privateRedis starts a redis-server of the test's own, with the append-only file on (appendfsync
// everysec, as the production notes recommend), that the test may kill and restart.
func privateRedis(t *testing.T) *redisserver.Server {
	t.Helper()
	return privateRedisWith(t, "--appendonly", "yes", "--appendfsync", "everysec")
}

// privateRedisWith starts a redis-server of its own with extra arguments, stopped when t ends.
func privateRedisWith(t *testing.T, extra ...string) *redisserver.Server {
	t.Helper()
	srv, err := redisserver.Start(extra...)
	if errors.Is(err, redisserver.ErrNotInstalled) {
		if storetest.InCI() {
			t.Fatal("this test needs redis-server (apt-get install redis-server); .ci/run installs it")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server); skipped outside CI")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// outageConfig is a sale: a queue with room for everyone, a product of 100 units, a closed checkout,
// a gated product page (closed) and a gated news page (open), with a quick store health check.
func outageConfig(originURL, redisAddr string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 20s}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
store_health: {interval: 100ms, failures_to_degrade: 2, successes_to_recover: 2, cooldown: 0s}
queues:
  - {id: drop, capacity: 100000, token_ttl: 10m}
products:
  - {id: sneaker, stock: 100, per_user_limit: 1, name: "Sneaker"}
routes:
  - {name: products, match: "GET /products/{id}", queue: drop}
  - {name: news, match: "GET /news", queue: drop, on_store_error: open}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, originURL, redisAddr)
}

// joinAndToken takes a place in a queue and returns its request id and access token.
func joinAndToken(t testing.TB, in *instance, queue string) (string, string) {
	t.Helper()
	resp, err := http.PostForm(in.public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {queue}})
	if err != nil {
		t.Fatal(err)
	}
	var joined struct {
		RequestID string `json:"request_id"`
	}
	json.NewDecoder(resp.Body).Decode(&joined)
	resp.Body.Close()
	if resp.StatusCode != 200 || joined.RequestID == "" {
		t.Fatalf("join: %d", resp.StatusCode)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	eventually(t, "token issued", func() bool {
		resp, err := http.PostForm(in.public+"/_edgeq/generate_token", url.Values{"queue_id": {queue}, "request_id": {joined.RequestID}})
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&tok) == nil && tok.AccessToken != ""
	})
	return joined.RequestID, tok.AccessToken
}

type reply struct {
	status int
	header http.Header
	body   string
}

func send(method, target string, header http.Header) (reply, error) {
	return sendVia(http.DefaultClient, method, target, header)
}

// sendVia is send with a client of the caller's (HTTP/2 over TLS: tls_test.go).
func sendVia(client *http.Client, method, target string, header http.Header) (reply, error) {
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		return reply{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}, nil
}

// Redis is killed in the middle of a flash sale (100 units, 1,000 buyers who
// retry until they get a definite answer) and restarted. While it is down the closed checkout answers
// 503 with Retry-After, joins are refused, gated pages keep working for visitors with a token, and the
// open route passes. Afterwards: no oversell, no lost unit, nobody above the limit, nothing pending.
func TestStoreOutage_FlashSaleLosesNothing(t *testing.T) {
	redisSrv := privateRedis(t)
	var (
		mu      sync.Mutex
		sold    = map[string]string{} // admission id -> buyer, for purchases the origin accepted
		perUser = map[string]int{}
		killed  = make(chan struct{})
		kill    sync.Once
	)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Edgeq-Admission-Id")
		if id == "" {
			fmt.Fprint(w, "page ", r.URL.Path)
			return
		}
		time.Sleep(time.Duration(5+rand.IntN(30)) * time.Millisecond)
		if rand.IntN(10) == 0 { // the shop fails one purchase in ten: the unit must come back
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		if _, dup := sold[id]; dup {
			t.Errorf("admission %s reached the origin twice", id)
		}
		sold[id] = r.Header.Get("X-User")
		perUser[r.Header.Get("X-User")]++
		n := len(sold)
		mu.Unlock()
		if n == 40 {
			// Mid-sale, with purchases in flight: Redis dies.
			kill.Do(func() { redisSrv.Kill(); close(killed) })
		}
		fmt.Fprint(w, "order placed")
	}))
	t.Cleanup(origin.Close)
	in := start(t, outageConfig(origin.URL, redisSrv.Addr()))
	_, token := joinAndToken(t, in, "drop")
	bearer := http.Header{"Authorization": {"Bearer " + token}}

	// 1,000 buyers, each retrying until the answer is definite, and 50 more who arrive once Redis is
	// down (grouped reservations decide the first wave in a few script calls, before the kill).
	var (
		wg                     sync.WaitGroup
		bought, soldOut, limit atomic.Int64
		unavailable            atomic.Int64
	)
	deadline := time.Now().Add(60 * time.Second)
	for i := range 1050 {
		wg.Go(func() {
			if i >= 1000 {
				select {
				case <-killed:
				case <-time.After(30 * time.Second):
					return
				}
			}
			h := http.Header{"X-User": {fmt.Sprintf("buyer-%d", i)}, "Accept": {"application/json"}}
			for time.Now().Before(deadline) {
				a, err := send("POST", in.public+"/checkout/sneaker", h)
				switch {
				case err != nil:
				case a.status == 200:
					bought.Add(1)
					return
				case a.status == 409 && strings.Contains(a.body, "INSUFFICIENT_STOCK"):
					soldOut.Add(1)
					return
				case a.status == 409 && strings.Contains(a.body, "ALREADY_PURCHASED"):
					limit.Add(1)
					return
				case a.status == 503 && strings.Contains(a.body, "STORE_UNAVAILABLE"):
					unavailable.Add(1)
					if a.header.Get("Retry-After") == "" {
						t.Errorf("503 without Retry-After")
					}
				case a.status == 500, a.status == 409 && strings.Contains(a.body, "PURCHASE_IN_PROGRESS"):
				default:
					t.Errorf("buyer %d: %d %s", i, a.status, a.body)
					return
				}
				time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond)
			}
			t.Errorf("buyer %d got no definite answer in time", i)
		})
	}

	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the sale never reached 40 purchases")
	}
	eventually(t, "edgeq notices the store is down", func() bool { return in.metric(t, "edgeq_store_degraded") == 1 })
	// While Redis is down.
	if a, _ := send("POST", in.public+"/checkout/sneaker", http.Header{"X-User": {"late"}, "Accept": {"application/json"}}); a.status != 503 ||
		!strings.Contains(a.body, "STORE_UNAVAILABLE") || a.header.Get("Retry-After") == "" {
		t.Errorf("closed checkout during the outage: %d %s", a.status, a.body)
	}
	if a, _ := send("GET", in.public+"/products/1", bearer); a.status != 200 || a.body != "page /products/1" {
		t.Errorf("a gated page with a valid token during the outage: %d %s", a.status, a.body)
	}
	if a, _ := send("GET", in.public+"/products/1", http.Header{"Accept": {"text/html"}}); a.status != 503 ||
		!strings.Contains(a.body, "<html") || a.header.Get("Retry-After") == "" {
		t.Errorf("a gated page without a token during the outage: %d", a.status)
	}
	if a, _ := send("GET", in.public+"/news", nil); a.status != 200 || a.body != "page /news" {
		t.Errorf("the open route during the outage: %d %s", a.status, a.body)
	}
	if in.metric(t, `edgeq_store_bypass_total{route="news"}`) < 1 {
		t.Error("the open route's pass is not counted")
	}
	if resp, err := http.PostForm(in.public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}}); err != nil || resp.StatusCode != 503 {
		t.Errorf("a join during the outage: %v %v", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	// The outage lasts until buyers have been answered during it: the first requests after the kill
	// wait out the Redis client's dial retries (go-redis: 5 tries 100 ms apart, per command attempt)
	// before their 503, which a fixed second of outage did not always cover.
	eventually(t, "a buyer answered 503 during the outage", func() bool { return unavailable.Load() > 0 })
	if err := redisSrv.Restart(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	eventually(t, "edgeq recovers", func() bool { return in.metric(t, "edgeq_store_degraded") == 0 })
	eventually(t, "compensations applied", func() bool { return in.metric(t, "edgeq_pending_compensations") == 0 })

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer rdb.Close()
	stock, err := rdb.Get(ctx, "edgeq:{p:sneaker}:stock").Int64()
	if err != nil {
		t.Fatal(err)
	}
	buyers, err := rdb.HGetAll(ctx, "edgeq:{p:sneaker}:buyers").Result()
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for who, n := range buyers {
		if n != "1" {
			t.Errorf("buyer %s holds %s units, the limit is 1", who, n)
		}
		held++
	}
	mu.Lock()
	defer mu.Unlock()
	for user, n := range perUser {
		if n > 1 {
			t.Errorf("the origin accepted %d purchases of %s", n, user)
		}
	}
	t.Logf("sold %d, stock left %d, buyers recorded %d; answers: %d bought, %d sold out, %d at the limit, %d store unavailable",
		len(sold), stock, held, bought.Load(), soldOut.Load(), limit.Load(), unavailable.Load())
	if stock < 0 || int64(len(sold))+stock != 100 {
		t.Fatalf("units: %d sold + %d in stock != 100 (oversold or lost)", len(sold), stock)
	}
	if held != int64(len(sold)) || bought.Load() != int64(len(sold)) {
		t.Fatalf("%d buyers recorded, %d purchases at the origin, %d buyers told they bought", held, len(sold), bought.Load())
	}
	if unavailable.Load() == 0 {
		t.Fatal("no buyer was answered 503 during the outage")
	}
}

// Redis with an append-only file (appendfsync everysec) is killed mid-sale and
// restarted. Queue positions, the serving position, a completed visitor's revocation, tokens, stock
// and buyers all survive: visitors and buyers carry on as if nothing happened. (A killed process
// loses nothing it had written to its AOF; everysec only bounds the loss to a second if the whole
// machine fails.)
func TestStoreRestart_AOFKeepsTheSale(t *testing.T) {
	redisSrv := privateRedis(t)
	origin := newOrigin(t)
	cfg := strings.Replace(outageConfig(origin.URL, redisSrv.Addr()), "{id: drop, capacity: 100000, token_ttl: 10m}",
		"{id: drop, capacity: 3, token_ttl: 10m}", 1)
	in := start(t, cfg)
	if strings.Contains(in.logs.String(), "persistence is off") {
		t.Fatalf("edgeq warned about persistence on a Redis with an append-only file:\n%s", in.logs)
	}
	ids := make([]string, 3)
	tokens := make([]string, 3)
	for i := range 3 {
		ids[i], tokens[i] = joinAndToken(t, in, "drop")
	}
	waiting := make([]string, 2) // positions 4 and 5: capacity is 3
	for i := range waiting {
		_, waiting[i] = joinQueue(t, in, "drop")
	}
	for i := range 4 {
		if a, _ := send("POST", in.public+"/checkout/sneaker", http.Header{"X-User": {fmt.Sprintf("buyer-%d", i)}}); a.status != 200 {
			t.Fatalf("purchase %d: %d %s", i, a.status, a.body)
		}
	}
	// Visitor 3 finishes: its token is revoked and position 4 is served.
	adminForm(t, in, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {ids[2]}, "status": {"1"}})
	eventually(t, "position 4 served", func() bool { return position(t, in, "serving_pos/drop") == 4 })

	redisSrv.Kill()
	if err := redisSrv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The joins below need edgeq to count the store as available again: store health may have seen
	// the restart (two pings failed) and answers joins 503 STORE_UNAVAILABLE until two pings pass. A
	// token's page needs no store call, so it cannot tell; on a loaded machine a join met that window.
	// Up and not degraded: a ping passed after the restart, and pings are sequential, so no failure
	// of before it is still on its way.
	eventually(t, "edgeq counts the store available again", func() bool {
		return in.metric(t, "edgeq_store_up") == 1 && in.metric(t, "edgeq_store_degraded") == 0
	})

	bearer := func(tok string) http.Header {
		return http.Header{"Authorization": {"Bearer " + tok}, "Accept": {"application/json"}}
	}
	eventually(t, "a token issued before the restart still opens the page", func() bool {
		a, err := send("GET", in.public+"/products/1", bearer(tokens[0]))
		return err == nil && a.status == 200
	})
	if a, _ := send("GET", in.public+"/products/1", bearer(tokens[2])); a.status == 200 {
		t.Fatal("the completed visitor's token works again after the restart")
	}
	if p := position(t, in, "serving_pos/drop"); p != 4 {
		t.Fatalf("serving position %d after the restart, want 4", p)
	}
	if p := position(t, in, "queue_pos/drop/"+waiting[1]); p != 5 {
		t.Fatalf("the waiting visitor's position is %d after the restart, want 5", p)
	}
	_, _ = joinAndTokenless(t, in)
	if a, _ := send("GET", in.public+"/_edgeq/products/sneaker", nil); !strings.Contains(a.body, `"remaining_stock":96`) {
		t.Fatalf("stock after the restart: %s", a.body)
	}
	if a, _ := send("POST", in.public+"/checkout/sneaker", http.Header{"X-User": {"buyer-0"}, "Accept": {"application/json"}}); a.status != 409 ||
		!strings.Contains(a.body, "ALREADY_PURCHASED") {
		t.Fatalf("a buyer of before the restart buys again: %d %s", a.status, a.body)
	}
	if a, _ := send("POST", in.public+"/checkout/sneaker", http.Header{"X-User": {"buyer-9"}}); a.status != 200 {
		t.Fatalf("a new purchase after the restart: %d %s", a.status, a.body)
	}
}

// joinAndTokenless joins the queue once more: the position continues after the restart (6), it is
// not handed out twice.
func joinAndTokenless(t *testing.T, in *instance) (string, int) {
	t.Helper()
	_, id := joinQueue(t, in, "drop")
	if p := position(t, in, "queue_pos/drop/"+id); p != 6 {
		t.Fatalf("a join after the restart got position %d, want 6", p)
	}
	return id, 6
}

// position reads {"position": n} from a public waiting-room endpoint.
func position(t *testing.T, in *instance, path string) int {
	t.Helper()
	a, err := send("GET", in.public+"/_edgeq/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Position int `json:"position"`
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil || a.status != 200 {
		t.Fatalf("%s: %d %s", path, a.status, a.body)
	}
	return body.Position
}

func adminForm(t *testing.T, in *instance, path string, form url.Values) {
	t.Helper()
	req, _ := http.NewRequest("POST", in.admin+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("admin %s: %d %s", path, resp.StatusCode, b)
	}
}

// edgeq warns at start when the Redis it is given keeps nothing on disk, and when it keeps RDB
// snapshots only (a crash loses minutes of sales); not with an append-only file.
func TestStart_WarnsWhenRedisPersistenceIsOff(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		warns string
	}{
		{"nothing", nil, "Redis persistence is off"},
		{"rdb only", []string{"--save", "60 1"}, "Redis appendonly is off: RDB snapshots alone lose"},
		{"aof", []string{"--appendonly", "yes"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := privateRedisWith(t, c.args...)
			logs := start(t, outageConfig(newOrigin(t).URL, srv.Addr())).logs.String()
			warned := strings.Contains(logs, "Redis persistence is off") || strings.Contains(logs, "Redis appendonly is off")
			if c.warns == "" && warned || c.warns != "" && !strings.Contains(logs, c.warns) {
				t.Fatalf("want warning %q:\n%s", c.warns, logs)
			}
		})
	}
}

// on_store_error is decided once per request and every step answers a store failure the same way
// (web.StorePolicy): here the store dies and the health check has not noticed yet (it never will:
// failures_to_degrade is out of reach), so each step finds out by a failing call. A closed route
// answers 503 STORE_UNAVAILABLE; an open one lets the request go on without the check. Before, the
// queue step sent a browser without a token to the waiting page on both kinds of route.
func TestStoreFailure_EveryStepFollowsOnStoreError(t *testing.T) {
	redisSrv := privateRedisWith(t)
	var hits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "shop ", r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
store_health: {interval: 1h, failures_to_degrade: 1000}
queues:
  - {id: drop, capacity: 100000}
products:
  - {id: sneaker, stock: 100}
routes:
  - {name: page-closed, match: "GET /closed", queue: drop}
  - {name: page-open, match: "GET /open", queue: drop, on_store_error: open}
  - name: buy-closed
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
  - name: buy-open
    match: "POST /buy/{product}"
    on_store_error: open
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, origin.URL, redisSrv.Addr()))
	redisSrv.Kill()

	browser := http.Header{"Accept": {"text/html"}}
	buyer := http.Header{"X-User": {"alice"}, "Accept": {"application/json"}}
	cases := []struct {
		method, path string
		header       http.Header
		open         bool
	}{
		{"GET", "/closed", browser, false},
		{"GET", "/open", browser, true},
		{"POST", "/checkout/sneaker", buyer, false},
		{"POST", "/buy/sneaker", buyer, true},
	}
	for _, c := range cases {
		before := hits.Load()
		a, err := send(c.method, in.public+c.path, c.header)
		if err != nil {
			t.Fatal(err)
		}
		reached := hits.Load() - before
		if c.open {
			if a.status != 200 || reached != 1 {
				t.Errorf("%s %s (open): %d %.80s, origin reached %d times", c.method, c.path, a.status, a.body, reached)
			}
			continue
		}
		if a.status != 503 || !strings.Contains(a.body, "STORE_UNAVAILABLE") && !strings.Contains(a.body, "briefly unavailable") ||
			a.header.Get("Retry-After") == "" || reached != 0 {
			t.Errorf("%s %s (closed): %d %.80s, origin reached %d times", c.method, c.path, a.status, a.body, reached)
		}
	}
	if got := in.metric(t, `edgeq_store_bypass_total{route="page-open"}`); got != 1 {
		t.Errorf("edgeq_store_bypass_total{route=page-open} = %v", got)
	}
	if got := in.metric(t, `edgeq_store_bypass_total{route="buy-open"}`); got != 1 {
		t.Errorf("edgeq_store_bypass_total{route=buy-open} = %v", got)
	}
}
