package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/demoshop"
)

// collidingShop is a checkout as real shops write it: read the next order number, take a moment
// (payment, stock, e-mail), insert the order under that number; a second checkout that overlaps reads
// the same number and its insert fails on the unique key: HTTP 500. It also counts the checkouts it
// works on at once and records the most.
type collidingShop struct {
	mu     sync.Mutex
	orders map[int]bool
	inside atomic.Int64
	most   atomic.Int64
	// gate, if set, holds every checkout until it is closed; arrived gets each checkout's X-Seq.
	gate    chan struct{}
	arrived chan string
}

func newCollidingShop() *collidingShop { return &collidingShop{orders: map[int]bool{}} }

func (s *collidingShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inside.Add(1)
	defer s.inside.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	io.Copy(io.Discard, r.Body)
	if s.arrived != nil {
		s.arrived <- r.Header.Get("X-Seq")
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	next := len(s.orders) + 1
	s.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orders[next] {
		http.Error(w, "duplicate key value violates unique constraint \"orders_number_key\"", http.StatusInternalServerError)
		return
	}
	s.orders[next] = true
	fmt.Fprintf(w, `{"order": %d}`, next)
}

// inflightConfig protects a checkout with max_in_flight (0: off) and hold, on the Redis at redisAddr
// ("" for the embedded store). Its checkouts stand for many shoppers but all come from the test's one
// address: hold_per_client is off.
func inflightConfig(originURL, redisAddr string, maxInFlight int, hold string, extraRoutes string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
routes:
  - {name: checkout, match: "POST /api/carts/{cart}/checkout", max_in_flight: %d, hold: %s, hold_per_client: 0}
%s
`, originURL, redisAddr, maxInFlight, hold, extraRoutes)
}

// checkouts sends one checkout per cart at once, through the edgeq replicas in turn, and returns the
// statuses.
func checkouts(t *testing.T, replicas []string, carts []string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, cart := range carts {
		wg.Go(func() {
			<-start
			resp, err := http.Post(replicas[i%len(replicas)]+"/api/carts/"+cart+"/checkout", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return statuses
}

// anyCarts returns n cart ids for a shop that takes any.
func anyCarts(n int) []string {
	carts := make([]string, n)
	for i := range carts {
		carts[i] = "c" + strconv.Itoa(i)
	}
	return carts
}

// 12 simultaneous checkouts at a shop whose checkout fails when two overlap.
// Without max_in_flight some fail with 500 (through edgeq as directly); with max_in_flight: 1 and a
// hold long enough for the line, none does, on Redis and on the embedded store.
func TestMaxInFlight_TwelveSimultaneousCheckoutsNoLongerCollide(t *testing.T) {
	for _, storeName := range []string{"redis", "embedded"} {
		t.Run(storeName, func(t *testing.T) {
			addr := "" // the embedded store
			if storeName == "redis" {
				addr = privateRedisWith(t).Addr()
			}
			without := newCollidingShop()
			origin := httptest.NewServer(without)
			t.Cleanup(origin.Close)
			in := start(t, inflightConfig(origin.URL, addr, 0, "10s", ""))
			if got := checkouts(t, []string{in.public}, anyCarts(12)); got[http.StatusInternalServerError] == 0 {
				t.Fatalf("without max_in_flight: %v; the test shop should collide", got)
			}

			with := newCollidingShop()
			limited := httptest.NewServer(with)
			t.Cleanup(limited.Close)
			in = start(t, inflightConfig(limited.URL, addr, 1, "30s", ""))
			if got := checkouts(t, []string{in.public}, anyCarts(12)); got[http.StatusOK] != 12 {
				t.Fatalf("with max_in_flight 1: %v, want 12 x 200", got)
			}
			if most := with.most.Load(); most != 1 {
				t.Fatalf("the shop had %d checkouts at once", most)
			}
			if waited := in.metric(t, `edgeq_route_held_total{result="waited",route="checkout"}`); waited == 0 {
				t.Error("edgeq_route_held_total{result=waited} stayed 0")
			}
			if now := in.metric(t, `edgeq_route_in_flight{route="checkout"}`); now != 0 {
				t.Errorf("edgeq_route_in_flight = %v after every checkout ended", now)
			}
		})
	}
}

// demoCart makes a cart with one jersey at the demo shop and returns its id.
func demoCart(t *testing.T, shopURL string) string {
	t.Helper()
	resp, err := http.Post(shopURL+"/api/carts", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Cart struct {
			ID string `json:"id"`
		} `json:"cart"`
	}
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	resp, err = http.Post(shopURL+"/api/carts/"+created.Cart.ID+"/items", "application/json", strings.NewReader(`{"sku": "jersey", "quantity": 1}`))
	if err != nil || resp.StatusCode != 200 || created.Cart.ID == "" {
		t.Fatalf("cart %q: %v %v", created.Cart.ID, resp, err)
	}
	resp.Body.Close()
	return created.Cart.ID
}

// With the demo shop (package demoshop: its checkout reads the next order
// number, waits for its database, inserts, and fails with 500 when two overlap): 12 simultaneous
// checkouts through edgeq fail without max_in_flight; with max_in_flight: 1 on two replicas sharing
// one Redis none fails, and the shop, counting, saw no overlap.
func TestMaxInFlight_TheDemoShopsCheckoutsNoLongerCollide(t *testing.T) {
	redisAddr := privateRedisWith(t).Addr()
	newShop := func() (*demoshop.Shop, string) {
		shop, err := demoshop.New(slog.New(slog.DiscardHandler), demoshop.DBLatency(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(shop)
		t.Cleanup(srv.Close)
		return shop, srv.URL
	}
	carts := func(shopURL string) []string {
		out := make([]string, 12)
		for i := range out {
			out[i] = demoCart(t, shopURL)
		}
		return out
	}

	unlimited, unlimitedURL := newShop()
	in := start(t, inflightConfig(unlimitedURL, redisAddr, 0, "10s", ""))
	if got := checkouts(t, []string{in.public}, carts(unlimitedURL)); got[http.StatusInternalServerError] == 0 {
		t.Fatalf("without max_in_flight: %v (shop %+v); the demo shop should collide", got, unlimited.CheckoutStats())
	}

	limited, limitedURL := newShop()
	a := start(t, inflightConfig(limitedURL, redisAddr, 1, "30s", ""))
	b := start(t, inflightConfig(limitedURL, redisAddr, 1, "30s", ""))
	got := checkouts(t, []string{a.public, b.public}, carts(limitedURL))
	st := limited.CheckoutStats()
	if got[http.StatusCreated] != 12 || st.Failed != 0 || st.Overlapping != 0 || st.MaxParallel != 1 {
		t.Fatalf("with max_in_flight 1 on two replicas: %v, shop %+v", got, st)
	}
}

// Two replicas on one store never have more than max_in_flight checkouts at
// the shop together (the shop counts them).
func TestMaxInFlight_TwoReplicasNeverExceedTheLimitTogether(t *testing.T) {
	redisAddr := privateRedisWith(t).Addr()
	shop := newCollidingShop()
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	a := start(t, inflightConfig(origin.URL, redisAddr, 2, "60s", ""))
	b := start(t, inflightConfig(origin.URL, redisAddr, 2, "60s", ""))
	got := checkouts(t, []string{a.public, b.public}, anyCarts(60))
	if most := shop.most.Load(); most > 2 {
		t.Fatalf("the shop had %d checkouts at once, limit 2", most)
	}
	if got[http.StatusOK]+got[http.StatusInternalServerError] != 60 {
		t.Fatalf("statuses %v: every checkout should reach the shop", got)
	}
}

// The line is first come, first served across replicas: with the one slot
// taken, checkouts arriving one after another on alternating replicas reach the shop in that order.
func TestMaxInFlight_WaitersGoFirstComeFirstServed(t *testing.T) {
	redisAddr := privateRedisWith(t).Addr()
	shop := newCollidingShop()
	shop.gate, shop.arrived = make(chan struct{}), make(chan string, 100)
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	replicas := []*instance{
		start(t, inflightConfig(origin.URL, redisAddr, 1, "60s", "")),
		start(t, inflightConfig(origin.URL, redisAddr, 1, "60s", "")),
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	inLine := func() int64 { return rdb.ZCard(context.Background(), "edgeq:{f:checkout}:waiters").Val() }

	const n = 8
	var wg sync.WaitGroup
	post := func(i int) {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", replicas[i%2].public+"/api/carts/c/checkout", strings.NewReader(`{}`))
			req.Header.Set("X-Seq", strconv.Itoa(i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("checkout %d: %v", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("checkout %d: %d", i, resp.StatusCode)
			}
		})
	}
	post(0)
	if first := <-shop.arrived; first != "0" {
		t.Fatalf("first arrival %q", first)
	}
	for i := 1; i <= n; i++ {
		post(i)
		eventually(t, fmt.Sprintf("checkout %d in line", i), func() bool { return inLine() == int64(i) })
	}
	close(shop.gate)
	var order []string
	for range n {
		order = append(order, <-shop.arrived)
	}
	wg.Wait()
	if want := []string{"1", "2", "3", "4", "5", "6", "7", "8"}; !slices.Equal(order, want) {
		t.Fatalf("reached the shop in order %v, want %v", order, want)
	}
}

// When hold runs out the request gets 503 BUSY with Retry-After and never
// reaches the shop: API clients the JSON error, a browser the busy page, which reloads itself.
func TestMaxInFlight_HoldRunsOutWithBusy(t *testing.T) {
	shop := newCollidingShop()
	shop.gate, shop.arrived = make(chan struct{}), make(chan string, 100)
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	page := `  - {name: page, match: "GET /busy-page", max_in_flight: 1, hold: 200ms}`
	in := start(t, inflightConfig(origin.URL, privateRedisWith(t).Addr(), 1, "200ms", page))
	t.Cleanup(func() { close(shop.gate) }) // before edgeq stops: it drains the requests at the shop
	go http.Post(in.public+"/api/carts/c/checkout", "application/json", strings.NewReader(`{}`))
	go http.Get(in.public + "/busy-page")
	<-shop.arrived
	<-shop.arrived

	api, err := send("POST", in.public+"/api/carts/c/checkout", http.Header{"Accept": {"application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	if api.status != 503 || api.header.Get("Retry-After") != "5" || !strings.Contains(api.body, `"error":"BUSY"`) {
		t.Fatalf("API client: %d Retry-After %q %s", api.status, api.header.Get("Retry-After"), api.body)
	}
	browser, err := send("GET", in.public+"/busy-page", http.Header{"Accept": {"text/html"}, "Accept-Language": {"zh-TW"}})
	if err != nil {
		t.Fatal(err)
	}
	if browser.status != 503 || browser.header.Get("Retry-After") != "5" ||
		!strings.Contains(browser.body, `<meta http-equiv="refresh" content="5">`) || !strings.Contains(browser.body, "商店目前忙碌中") ||
		!strings.Contains(browser.header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("browser: %d Retry-After %q CSP %q\n%s", browser.status, browser.header.Get("Retry-After"),
			browser.header.Get("Content-Security-Policy"), browser.body)
	}
	// A form post gets the page too, without a reload that would not send the form again.
	form, err := send("POST", in.public+"/api/carts/c/checkout", http.Header{"Sec-Fetch-Mode": {"navigate"}, "Accept": {"text/html"}})
	if err != nil {
		t.Fatal(err)
	}
	if form.status != 503 || strings.Contains(form.body, `http-equiv="refresh"`) || !strings.Contains(form.body, "send the form again") {
		t.Fatalf("form post: %d\n%s", form.status, form.body)
	}
	select {
	case seq := <-shop.arrived:
		t.Fatalf("a refused request reached the shop (%q)", seq)
	default:
	}
	if busy := in.metric(t, `edgeq_route_held_total{result="busy",route="checkout"}`); busy != 2 {
		t.Errorf("edgeq_route_held_total{busy} = %v, want 2", busy)
	}
	if now := in.metric(t, `edgeq_route_in_flight{route="checkout"}`); now != 1 {
		t.Errorf("edgeq_route_in_flight = %v with one checkout at the shop", now)
	}
}

// A store that cannot be used: the route's on_store_error decides. Closed refuses with 503
// STORE_UNAVAILABLE, open lets the request go to the shop without the limit.
func TestMaxInFlight_StoreOutageFollowsOnStoreError(t *testing.T) {
	redisSrv := privateRedisWith(t)
	shop := newCollidingShop()
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	open := `  - {name: open, match: "POST /open", max_in_flight: 1, on_store_error: open}`
	// Store health that never trips: the failure is met by the in-flight stage's own store call.
	text := inflightConfig(origin.URL, redisSrv.Addr(), 1, "1s", open) +
		"store_health: {interval: 1h, failures_to_degrade: 100, successes_to_recover: 1, cooldown: 0s}\n"
	in := start(t, text)
	redisSrv.Kill()
	closed, err := send("POST", in.public+"/api/carts/c/checkout", http.Header{"Accept": {"application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	if closed.status != 503 || !strings.Contains(closed.body, "STORE_UNAVAILABLE") || closed.header.Get("Retry-After") == "" {
		t.Fatalf("closed route: %d %s", closed.status, closed.body)
	}
	if a, err := send("POST", in.public+"/open", nil); err != nil || a.status != 200 {
		t.Fatalf("open route: %v %v", a, err)
	}
	if n := in.metric(t, `edgeq_route_held_total{result="store_error",route="open"}`); n != 1 {
		t.Errorf("edgeq_route_held_total{store_error} = %v", n)
	}
}

// A reload changes max_in_flight for the requests that come after it.
func TestMaxInFlight_ReloadTakesEffectForNewRequests(t *testing.T) {
	shop := newCollidingShop()
	shop.gate, shop.arrived = make(chan struct{}), make(chan string, 100)
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	redisAddr := privateRedisWith(t).Addr()
	in := start(t, inflightConfig(origin.URL, redisAddr, 1, "100ms", ""))
	t.Cleanup(func() { close(shop.gate) }) // before edgeq stops: it drains the requests at the shop
	go http.Post(in.public+"/api/carts/c/checkout", "application/json", strings.NewReader(`{}`))
	<-shop.arrived
	if a, _ := send("POST", in.public+"/api/carts/c/checkout", nil); a.status != 503 {
		t.Fatalf("over the limit of 1: %d", a.status)
	}
	in.rewrite(t, inflightConfig(origin.URL, redisAddr, 2, "100ms", ""))
	eventually(t, "a second checkout let in after the reload", func() bool {
		go http.Post(in.public+"/api/carts/c/checkout", "application/json", strings.NewReader(`{}`))
		select {
		case <-shop.arrived:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	})
}

// A visitor who hangs up while the shop works on the request does not free the slot: the shop is
// still working on it, and the next checkout would overlap it. The slot is free once the shop answered.
// Over each protocol (tls_test.go).
func TestMaxInFlight_AHangUpKeepsTheSlotUntilTheShopAnswers(t *testing.T) {
	e := newTLSEdge(t)
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) { hangUpKeepsTheSlot(t, e, proto) })
	}
}

func hangUpKeepsTheSlot(t *testing.T, e *tlsEdge, proto string) {
	shop := newCollidingShop()
	shop.gate, shop.arrived = make(chan struct{}), make(chan string, 100)
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	in := e.start(t, inflightConfig(origin.URL, privateRedisWith(t).Addr(), 1, "200ms", ""), nil)
	client, base := e.over(t, in, proto)
	hangUpOver(t, client, proto, base, "POST", "/api/carts/c/checkout", http.Header{"Content-Type": {"application/json"}}, `{}`)
	<-shop.arrived
	time.Sleep(100 * time.Millisecond) // edgeq has seen the hang-up
	if a, err := sendVia(client, "POST", base+"/api/carts/c/checkout", nil); err != nil || a.status != 503 {
		t.Fatalf("while the shop works on the hung-up checkout: %v %v, want 503 BUSY", a, err)
	}
	close(shop.gate)
	eventually(t, "the slot free after the shop answered", func() bool {
		a, err := sendVia(client, "POST", base+"/api/carts/c/checkout", nil)
		return err == nil && a.status == 200
	})
	if most := shop.most.Load(); most != 1 {
		t.Fatalf("the shop had %d checkouts at once", most)
	}
}
