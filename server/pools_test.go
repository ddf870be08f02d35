package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// poolServer is one shop server of a pool on a loopback port of its own. Its checkout records the
// buyer (X-User) and the admission (Edgeq-Admission-Id) of every request its handler receives; GET
// /healthz answers health. kill stops it as a dying process: listener and connections closed at once.
type poolServer struct {
	addr   string
	health atomic.Int32

	mu     sync.Mutex
	srv    *http.Server
	buyers map[string]int
	hits   int
}

func newPoolServer(t *testing.T) *poolServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &poolServer{addr: ln.Addr().String(), buyers: map[string]int{}}
	s.health.Store(http.StatusOK)
	s.serve(ln)
	t.Cleanup(s.kill)
	return s
}

func (s *poolServer) url() string { return "http://" + s.addr }

func (s *poolServer) serve(ln net.Listener) {
	srv := &http.Server{Handler: s}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln)
}

func (s *poolServer) kill() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	srv.Close()
}

func (s *poolServer) restart(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.serve(ln)
}

func (s *poolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.WriteHeader(int(s.health.Load()))
		return
	}
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.hits++
	if r.Header.Get("Edgeq-Admission-Id") != "" {
		s.buyers[r.Header.Get("X-User")]++
	}
	s.mu.Unlock()
	time.Sleep(3 * time.Millisecond) // payment, stock, e-mail
	fmt.Fprint(w, "order placed at ", s.addr)
}

func (s *poolServer) counts() (hits int, buyers map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buyers = make(map[string]int, len(s.buyers))
	for k, v := range s.buyers {
		buyers[k] = v
	}
	return s.hits, buyers
}

func poolsConfig(originURL, redisAddr string, servers []*poolServer) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = fmt.Sprintf("%q", s.url())
	}
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 10s}
redis: {addr: %q}
log: {level: warn}
origins:
  - name: shop
    urls: [%s]
    health: {path: /healthz, interval: 500ms, timeout: 500ms, unhealthy_after: 2, healthy_after: 2}
    passive: {fail_after: 3, down_for: 1s}
products:
  - {id: sneaker, stock: 100000, per_user_limit: 1}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    origin: shop
    admission: {type: stock, product: "path:product", user: "header:X-User"}
  - {name: pages, match: "GET /products/{id}", origin: shop}
`, originURL, redisAddr, strings.Join(urls, ", "))
}

// Three shop servers behind a pool take a sale's checkouts (stock admission on a real Redis); one is
// killed under load. No purchase reaches two servers; the checkouts it refuses at connect go to the
// others and are sold; the health check takes it out within its interval and puts it back once it
// is back. With no server up, a checkout is answered 503 ORIGIN_UNAVAILABLE at once and its unit
// given back, while edgeq's own endpoints keep answering.
func TestPools_AShopServerKilledUnderLoadSellsNothingTwice(t *testing.T) {
	redisSrv := privateRedisWith(t)
	origin := newOrigin(t)
	servers := []*poolServer{newPoolServer(t), newPoolServer(t), newPoolServer(t)}
	in := start(t, poolsConfig(origin.URL, redisSrv.Addr(), servers))
	up := func(s *poolServer) float64 {
		return in.metric(t, fmt.Sprintf(`edgeq_origin_up{pool="shop",url=%q}`, s.url()))
	}
	if up(servers[1]) != 1 {
		t.Fatalf("edgeq_origin_up of a live server: %v", up(servers[1]))
	}

	const workers, each = 30, 20
	statuses := make([]int, workers*each)
	var killedAt atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				a, err := send("POST", in.public+"/checkout/sneaker", http.Header{"X-User": {fmt.Sprint("buyer-", n)}, "Accept": {"application/json"}})
				if err != nil {
					t.Error(err)
				}
				statuses[n] = a.status
				if w == 0 && i == each/3 {
					servers[1].kill()
					killedAt.Store(time.Now().UnixNano())
				}
			}
		})
	}
	wg.Wait()

	reached := map[string]int{}
	for _, s := range servers {
		_, buyers := s.counts()
		for buyer, n := range buyers {
			reached[buyer] += n
		}
	}
	sold, failed := 0, 0
	failures := map[int]int{}
	for n, status := range statuses {
		buyer := fmt.Sprint("buyer-", n)
		switch {
		case reached[buyer] > 1:
			t.Errorf("%s's checkout reached %d shop servers", buyer, reached[buyer])
		case status == 200 && reached[buyer] != 1:
			t.Errorf("%s was answered 200 but no server has the order", buyer)
		case status == 200:
			sold++
		default:
			failed++
			failures[status]++
		}
	}
	// Only checkouts at the killed server as it died can fail (502: they may have been taken, so
	// they are not sent to another server): at most one per worker.
	if failed > workers {
		t.Errorf("%d checkouts failed (by status: %v)", failed, failures)
	}
	var product struct {
		Remaining int `json:"remaining_stock"`
	}
	eventually(t, "the stock", func() bool {
		resp, err := http.Get(in.public + "/_edgeq/products/sneaker")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&product) == nil && product.Remaining > 0
	})
	if admitted := 100000 - product.Remaining; len(reached) > admitted || sold > admitted {
		t.Errorf("the shop servers hold %d orders (%d answered), edgeq admitted %d units", len(reached), sold, admitted)
	}
	t.Logf("%d sold, %d failed at the kill, %d orders at the servers", sold, failed, len(reached))

	// Taken out by the health check within two intervals (two failures 500 ms apart): generous bound.
	eventually(t, "the killed server is out", func() bool { return up(servers[1]) == 0 })
	if took := time.Since(time.Unix(0, killedAt.Load())); took > 10*time.Second {
		t.Errorf("out %s after the kill", took)
	}
	servers[1].restart(t)
	eventually(t, "the restarted server is back", func() bool { return up(servers[1]) == 1 })
	hits, _ := servers[1].counts()
	for i := range 6 {
		if a, err := send("GET", in.public+fmt.Sprint("/products/", i), nil); err != nil || a.status != 200 {
			t.Fatalf("GET /products/%d: %v %+v", i, err, a)
		}
	}
	if now, _ := servers[1].counts(); now-hits != 2 {
		t.Errorf("the restarted server took %d of 6 requests, want 2", now-hits)
	}

	// No server up: 503 at once, nothing sent, the unit given back; edgeq's endpoints answer.
	for _, s := range servers {
		s.health.Store(http.StatusServiceUnavailable)
	}
	for _, s := range servers {
		eventually(t, "every server is out", func() bool { return up(s) == 0 })
	}
	eventually(t, "the stock settles", func() bool {
		before := product.Remaining
		resp, err := http.Get(in.public + "/_edgeq/products/sneaker")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&product) == nil && product.Remaining == before
	})
	remaining := product.Remaining
	start := time.Now()
	a, err := send("POST", in.public+"/checkout/sneaker", http.Header{"X-User": {"late-buyer"}, "Accept": {"application/json"}})
	took := time.Since(start)
	if err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "ORIGIN_UNAVAILABLE") {
		t.Fatalf("no server up: %v %d %s", err, a.status, a.body)
	}
	if took > time.Second { // a connect timeout is 5 s; nothing is tried
		t.Errorf("answered after %s", took)
	}
	if _, buyers := servers[0].counts(); buyers["late-buyer"] != 0 {
		t.Error("the checkout reached a server")
	}
	eventually(t, "the unit is given back", func() bool {
		resp, err := http.Get(in.public + "/_edgeq/products/sneaker")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&product) == nil && product.Remaining == remaining
	})
	if a, err := send("GET", in.public+"/news", nil); err != nil || a.status != 200 || a.body != "origin /news" {
		t.Errorf("origin:'s pool: %v %+v", err, a)
	}
}

// A reload swaps the pools with the routes that name them; a route naming no pool is refused and
// the running configuration stays.
func TestPools_AReloadSwapsThePools(t *testing.T) {
	origin := newOrigin(t)
	a, b := newPoolServer(t), newPoolServer(t)
	text := func(urls, routeOrigin string) string {
		return configText(origin.URL, fmt.Sprintf(`  - {name: pages, match: "GET /products/{id}", origin: %s}
origins:
  - {name: shop, urls: [%s]}
  - {name: other, urls: [%q]}`, routeOrigin, urls, b.url()))
	}
	in := start(t, text(fmt.Sprintf("%q", a.url()), "shop"))
	servedBy := func() string {
		r, err := send("GET", in.public+"/products/1", nil)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(r.body, "order placed at ")
	}
	if by := servedBy(); by != a.addr {
		t.Fatalf("served by %q", by)
	}
	in.rewrite(t, text(fmt.Sprintf("%q", b.url()), "shop"))
	eventually(t, "the new pool serves", func() bool { return servedBy() == b.addr })
	in.rewrite(t, text(fmt.Sprintf("%q", a.url()), "nowhere"))
	eventually(t, "the reload is refused", func() bool {
		return strings.Contains(in.logs.String(), `routes[0].origin: \"nowhere\" is not the name of any pool`)
	})
	if by := servedBy(); by != b.addr {
		t.Fatalf("after a refused reload: served by %q", by)
	}
	if strings.Contains(in.logs.String(), "only take effect after a restart") {
		t.Errorf("pools logged as restart keys:\n%s", in.logs)
	}
}
