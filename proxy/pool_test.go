package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/accesslog"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
)

// shopServer is one shop server of a pool on a loopback port of its own: it records the id (X-Id) of
// every request its handler receives, answers "served by ADDR", and answers GET /healthz with
// health (200 unless set). kill stops it as a dying process would: its listener and every
// connection closed at once; restart listens on the same address again.
type shopServer struct {
	addr   string
	delay  time.Duration
	health atomic.Int32
	hits   atomic.Int64

	mu  sync.Mutex
	srv *http.Server
	ids map[string]int
}

func newShopServer(t *testing.T, delay time.Duration) *shopServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &shopServer{addr: ln.Addr().String(), delay: delay, ids: map[string]int{}}
	s.health.Store(http.StatusOK)
	s.serve(ln)
	t.Cleanup(s.kill)
	return s
}

func (s *shopServer) URL() string { return "http://" + s.addr }

func (s *shopServer) serve(ln net.Listener) {
	srv := &http.Server{Handler: s}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln)
}

func (s *shopServer) kill() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	srv.Close()
}

func (s *shopServer) restart(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may take a moment to be free again
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

func (s *shopServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.WriteHeader(int(s.health.Load()))
		return
	}
	s.hits.Add(1)
	io.Copy(io.Discard, r.Body)
	if id := r.Header.Get("X-Id"); id != "" {
		s.mu.Lock()
		s.ids[id]++
		s.mu.Unlock()
	}
	time.Sleep(s.delay)
	fmt.Fprint(w, "served by ", s.addr)
}

func (s *shopServer) seen(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// poolRig is a proxy whose route "pool" (everything under /p/) goes to the pool "shop".
type poolRig struct {
	proxy   *Proxy
	server  *httptest.Server
	metrics *metrics.Metrics
	logs    *syncBuffer
}

func newPoolRig(t *testing.T, shop config.Pool, timeout time.Duration) *poolRig {
	t.Helper()
	if shop.Name == "" {
		shop.Name = "shop"
	}
	if shop.LB == "" {
		shop.LB = config.LBRoundRobin
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "origin") }))
	t.Cleanup(origin.Close)
	originURL, _ := url.Parse(origin.URL)
	rg := &poolRig{metrics: metrics.New(prometheus.NewRegistry()), logs: &syncBuffer{}}
	responder := testResponder(t, "/_edgeq")
	endpoints := http.NewServeMux()
	endpoints.HandleFunc("GET /_edgeq/hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	rg.proxy = New(Options{
		Origin: originURL, OriginTimeout: timeout, Prefix: "/_edgeq", Endpoints: web.Routes(endpoints, responder),
		Responder: responder, Metrics: rg.metrics, Logger: slog.New(accesslog.NewHandler(rg.logs, "json", nil)),
	})
	table, err := rg.proxy.CompileWith([]config.Route{{Name: "pool", Match: "/p/", Origin: shop.Name}}, []config.Pool{shop})
	if err != nil {
		t.Fatal(err)
	}
	rg.proxy.Use(table)
	rg.server = httptest.NewServer(rg.proxy)
	t.Cleanup(rg.server.Close)
	return rg
}

// runHealth runs the active health checks until the test ends.
func (rg *poolRig) runHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rg.proxy.RunHealth(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// send makes one request through edgeq and returns its status and body.
func (rg *poolRig) send(t *testing.T, method, path, id string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, rg.server.URL+path, strings.NewReader(body))
	if body == "" {
		req.Body = nil
	}
	req.Header.Set("X-Id", id)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// sample returns the value of one series of the pool collector, -1 when it has none.
func (rg *poolRig) sample(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rg.proxy.PoolCollector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// closedAddr is a loopback address nothing listens on: connections to it are refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestPool_EveryPolicyOfTheConfigurationHasASelector(t *testing.T) {
	for _, lb := range config.LBPolicies {
		if selectors[lb] == nil {
			t.Errorf("lb %q has no selector", lb)
		}
	}
	if len(selectors) != len(config.LBPolicies) {
		t.Errorf("%d selectors for %d policies", len(selectors), len(config.LBPolicies))
	}
}

func TestPool_RoundRobinTakesTheServersInTurn(t *testing.T) {
	a, b, c := newShopServer(t, 0), newShopServer(t, 0), newShopServer(t, 0)
	rg := newPoolRig(t, config.Pool{URLs: []string{a.URL(), b.URL(), c.URL()}}, 5*time.Second)
	for i := range 30 {
		if status, body := rg.send(t, "GET", "/p/page", strconv.Itoa(i), ""); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	for _, s := range []*shopServer{a, b, c} {
		if n := s.hits.Load(); n != 10 {
			t.Errorf("%s: %d requests, want 10", s.addr, n)
		}
		if n := rg.sample(t, "edgeq_origin_requests_total", "pool", "shop", "url", s.URL(), "class", "2xx"); n != 10 {
			t.Errorf("%s: edgeq_origin_requests_total{class=2xx} = %v", s.addr, n)
		}
	}
	// Unrouted requests go to origin:, the pool "default".
	if status, body := rg.send(t, "GET", "/elsewhere", "x", ""); status != 200 || body != "origin" {
		t.Fatalf("%d %q", status, body)
	}
	if n := rg.sample(t, "edgeq_origin_requests_total", "pool", "default", "class", "2xx"); n != 1 {
		t.Errorf("default pool: %v requests", n)
	}
}

// A request refused at connect (nothing listens) goes to the next server, whatever its method and
// body: the short path's (a GET, a small POST) and net/http's (a body over 4 KiB, a chunked one).
func TestPool_ARequestRefusedAtConnectGoesToTheNextServer(t *testing.T) {
	good := newShopServer(t, 0)
	dead := "http://" + closedAddr(t)
	rg := newPoolRig(t, config.Pool{URLs: []string{dead, good.URL()}, LB: config.LBFirst,
		Passive: config.PoolPassive{FailAfter: 100, DownFor: time.Minute}}, 5*time.Second)
	cases := []struct{ method, body string }{
		{"GET", ""}, {"POST", "quantity=1"}, {"POST", strings.Repeat("x", 6<<10)}, {"PUT", "chunked"},
	}
	for i, c := range cases {
		id := "req-" + strconv.Itoa(i)
		req, _ := http.NewRequest(c.method, rg.server.URL+"/p/buy", strings.NewReader(c.body))
		if c.body == "" {
			req.Body = nil
		}
		if c.body == "chunked" {
			req.ContentLength = -1 // sent chunked
		}
		req.Header.Set("X-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(answer) != "served by "+good.addr {
			t.Errorf("%s with %d bytes: %d %q", c.method, len(c.body), resp.StatusCode, answer)
		}
		if n := good.seen(id); n != 1 {
			t.Errorf("%s: the good server saw it %d times", c.method, n)
		}
	}
	if n := rg.sample(t, "edgeq_origin_requests_total", "url", dead, "class", "error"); n != float64(len(cases)) {
		t.Errorf("refusals counted: %v", n)
	}

	// Every server refuses: 502, each refusal counted once at its server.
	dead2 := "http://" + closedAddr(t)
	rg = newPoolRig(t, config.Pool{URLs: []string{dead, dead2}}, 5*time.Second)
	if status, body := rg.send(t, "POST", "/p/buy", "none", "sku=1"); status != http.StatusBadGateway || !strings.Contains(body, "ORIGIN_UNAVAILABLE") {
		t.Errorf("every server refused: %d %s", status, body)
	}
	for _, u := range []string{dead, dead2} {
		if n := rg.sample(t, "edgeq_origin_requests_total", "url", u, "class", "error"); n != 1 {
			t.Errorf("%s: %v refusals counted, want 1", u, n)
		}
	}
}

// A request that may have reached a shop server is never sent to another, GET included: the server
// accepted the connection, so a byte of the request may have been read. Real sockets: a server that
// closes what it accepts, one that reads the header and resets the connection mid-body, one that
// reads the request and never answers, and one that served a kept-alive connection and closes it as
// the next request arrives, its listener gone (the transport's own second try on a new connection is
// refused, which proves nothing about the first).
func TestPool_ARequestThatMayHaveReachedAServerIsNeverSentToAnother(t *testing.T) {
	closes := rawServer(t, func(c net.Conn, br *bufio.Reader) {})
	resets := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br) // the header; the body is still arriving
		c.(*net.TCPConn).SetLinger(0)
	})
	silent := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		time.Sleep(2 * time.Second)
	})
	for _, c := range []struct {
		name, addr, method, body string
		status                   int
	}{
		{"accepts and closes, GET", closes, "GET", "", 502},
		{"accepts and closes, small POST", closes, "POST", "sku=1", 502},
		{"accepts and closes, large POST", closes, "POST", strings.Repeat("x", 64<<10), 502},
		{"resets mid-body", resets, "POST", strings.Repeat("x", 4<<20), 502},
		{"never answers, GET", silent, "GET", "", 504},
		{"never answers, POST", silent, "POST", "sku=1", 504},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := newShopServer(t, 0)
			rg := newPoolRig(t, config.Pool{URLs: []string{"http://" + c.addr, other.URL()}, LB: config.LBFirst}, 300*time.Millisecond)
			if status, body := rg.send(t, c.method, "/p/buy", "once", c.body); status != c.status {
				t.Errorf("%d %s, want %d", status, body, c.status)
			}
			if n := other.hits.Load(); n != 0 {
				t.Fatalf("the request was sent to a second server (%d times)", n)
			}
		})
	}

	t.Run("kept-alive connection closed as the next request arrives", func(t *testing.T) {
		var ln net.Listener
		requests := atomic.Int64{}
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			requests.Add(1)
			ln.Close() // the process stops listening...
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if _, err := http.ReadRequest(br); err == nil { // ... and dies with the next request read
				requests.Add(1)
			}
		}()
		other := newShopServer(t, 0)
		rg := newPoolRig(t, config.Pool{URLs: []string{"http://" + ln.Addr().String(), other.URL()}, LB: config.LBFirst}, 5*time.Second)
		if status, body := rg.send(t, "GET", "/p/first", "1", ""); status != 200 || body != "ok" {
			t.Fatalf("%d %q", status, body)
		}
		status, _ := rg.send(t, "GET", "/p/second", "2", "")
		if requests.Load() == 2 && other.hits.Load() != 0 {
			t.Fatalf("the second GET reached the first server and then the other one too (%d)", status)
		}
		if status != 502 || other.hits.Load() != 0 {
			t.Fatalf("status %d, other server %d requests: want 502 and none", status, other.hits.Load())
		}
	})
}

// Three servers under concurrent load, one killed as a process dies: every request its handler
// received is answered by it or fails, none is sent to a second server; requests it refuses at
// connect go on to the others and succeed.
func TestPool_AServerKilledUnderLoadNeverGetsARequestSentTwice(t *testing.T) {
	servers := []*shopServer{newShopServer(t, 2*time.Millisecond), newShopServer(t, 2*time.Millisecond), newShopServer(t, 2*time.Millisecond)}
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	rg := newPoolRig(t, config.Pool{URLs: urls, Passive: config.PoolPassive{FailAfter: 3, DownFor: time.Minute}}, 5*time.Second)
	const workers, each = 40, 30
	var killed atomic.Bool
	var after, failedAfter atomic.Int64 // requests started after the kill, and those of them that failed
	statuses := make([]int, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				body := "sku=1"
				if n%4 == 0 {
					body = strings.Repeat("x", 6<<10) // net/http's way
				}
				startedAfter := killed.Load()
				status, _ := rg.send(t, "POST", "/p/buy", "purchase-"+strconv.Itoa(n), body)
				statuses[n] = status
				if startedAfter {
					after.Add(1)
					if status != 200 {
						failedAfter.Add(1)
					}
				}
				if w == 0 && i == each/3 {
					servers[1].kill()
					killed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	var ok, failed int
	for n, status := range statuses {
		id := "purchase-" + strconv.Itoa(n)
		seen := servers[0].seen(id) + servers[1].seen(id) + servers[2].seen(id)
		switch {
		case seen > 1:
			t.Errorf("%s was sent to %d servers", id, seen)
		case status == 200 && seen != 1:
			t.Errorf("%s answered 200 but no server saw it", id)
		}
		if status == 200 {
			ok++
		} else {
			failed++
		}
	}
	// Only requests already at the killed server when it died can fail: at most one per worker.
	if failed > workers || failedAfter.Load() > workers {
		t.Errorf("%d requests failed (%d started after the kill), more than were in flight", failed, failedAfter.Load())
	}
	if after.Load() == 0 || rg.sample(t, "edgeq_origin_requests_total", "url", urls[1], "class", "error") == 0 {
		t.Error("no request met the dead server: the test proves nothing")
	}
	t.Logf("%d answered, %d failed (in flight at the kill); %d started after it", ok, failed, after.Load())
}

// The passive check takes a server that refuses connections out after fail_after refusals in a row,
// for down_for, and tries it again after.
func TestPool_PassiveCheckTakesARefusingServerOutForDownFor(t *testing.T) {
	good := newShopServer(t, 0)
	dead := "http://" + closedAddr(t)
	rg := newPoolRig(t, config.Pool{URLs: []string{dead, good.URL()}, LB: config.LBFirst,
		Passive: config.PoolPassive{FailAfter: 2, DownFor: 300 * time.Millisecond}}, 5*time.Second)
	refusals := func() float64 { return rg.sample(t, "edgeq_origin_requests_total", "url", dead, "class", "error") }
	for i := range 6 {
		if status, _ := rg.send(t, "GET", "/p/x", strconv.Itoa(i), ""); status != 200 {
			t.Fatalf("status %d", status)
		}
	}
	if n := refusals(); n != 2 {
		t.Fatalf("%v refusals, want 2: out after fail_after", n)
	}
	if up := rg.sample(t, "edgeq_origin_up", "url", dead); up != 0 {
		t.Fatalf("edgeq_origin_up = %v while out", up)
	}
	waitFor(t, func() bool { return rg.sample(t, "edgeq_origin_up", "url", dead) == 1 }) // after down_for
	rg.send(t, "GET", "/p/x", "again", "")
	rg.send(t, "GET", "/p/x", "again2", "")
	if n := refusals(); n != 3 {
		t.Fatalf("%v refusals, want 3: tried once more after down_for, then out again at its first failure", n)
	}
}

// An answer, a 5xx too, is not a failure: the server takes requests.
func TestPool_A5xxAnswerDoesNotTakeAServerOut(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "duplicate key", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	rg := newPoolRig(t, config.Pool{URLs: []string{failing.URL}, Passive: config.PoolPassive{FailAfter: 1, DownFor: time.Minute}}, 5*time.Second)
	for i := range 5 {
		if status, _ := rg.send(t, "POST", "/p/checkout", strconv.Itoa(i), "a=1"); status != 500 {
			t.Fatalf("status %d", status)
		}
	}
	if up := rg.sample(t, "edgeq_origin_up", "url", failing.URL); up != 1 {
		t.Fatalf("edgeq_origin_up = %v", up)
	}
	if n := rg.sample(t, "edgeq_origin_requests_total", "url", failing.URL, "class", "5xx"); n != 5 {
		t.Fatalf("5xx = %v", n)
	}
}

// Health checks take a dead server out within the check's interval and put it back once it
// recovers; meanwhile its requests go to the others.
func TestPool_HealthChecksTakeADeadServerOutAndBackIn(t *testing.T) {
	a, b := newShopServer(t, 0), newShopServer(t, 0)
	rg := newPoolRig(t, config.Pool{URLs: []string{a.URL(), b.URL()},
		Health:  config.PoolHealth{Path: "/healthz", Interval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond, UnhealthyAfter: 2, HealthyAfter: 2},
		Passive: config.PoolPassive{FailAfter: 0}}, 5*time.Second)
	rg.runHealth(t)
	b.kill()
	killedAt := time.Now()
	waitFor(t, func() bool { return rg.sample(t, "edgeq_origin_up", "url", b.URL()) == 0 })
	// Two failed checks 100 ms apart, each within its 50 ms timeout (a refused one at once).
	if took := time.Since(killedAt); took > time.Second {
		t.Errorf("taken out after %s", took)
	}
	before := a.hits.Load()
	for i := range 10 {
		if status, _ := rg.send(t, "GET", "/p/x", strconv.Itoa(i), ""); status != 200 {
			t.Fatalf("status %d with one server out", status)
		}
	}
	if a.hits.Load()-before != 10 {
		t.Fatalf("%d of 10 requests went to the live server", a.hits.Load()-before)
	}
	b.restart(t)
	waitFor(t, func() bool { return rg.sample(t, "edgeq_origin_up", "url", b.URL()) == 1 })
	before = b.hits.Load()
	for i := range 10 {
		rg.send(t, "GET", "/p/x", "back-"+strconv.Itoa(i), "")
	}
	if b.hits.Load()-before != 5 {
		t.Fatalf("%d of 10 requests to the recovered server, want 5", b.hits.Load()-before)
	}
	if !strings.Contains(rg.logs.String(), "its health checks fail") || !strings.Contains(rg.logs.String(), "its health checks pass") {
		t.Errorf("the changes are not logged:\n%s", rg.logs)
	}
}

// lb: first sends every request to the first server that is up: to the backup while the primary is
// out, and back to the primary once it is up again.
func TestPool_FirstFallsOverToTheSecondAndBack(t *testing.T) {
	primary, backup := newShopServer(t, 0), newShopServer(t, 0)
	rg := newPoolRig(t, config.Pool{URLs: []string{primary.URL(), backup.URL()}, LB: config.LBFirst,
		Health: config.PoolHealth{Path: "/healthz", Interval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond, UnhealthyAfter: 1, HealthyAfter: 1}}, 5*time.Second)
	rg.runHealth(t)
	servedBy := func() string {
		_, body := rg.send(t, "GET", "/p/x", "", "")
		return strings.TrimPrefix(body, "served by ")
	}
	for range 5 {
		if by := servedBy(); by != primary.addr {
			t.Fatalf("served by %s, want the primary", by)
		}
	}
	primary.health.Store(http.StatusServiceUnavailable)
	waitFor(t, func() bool { return servedBy() == backup.addr })
	primary.health.Store(http.StatusOK)
	waitFor(t, func() bool { return servedBy() == primary.addr })
}

// least_conn sends a slow server fewer requests than round_robin would: it counts this replica's
// requests in flight at each server.
func TestPool_LeastConnSendsASlowServerFewerRequests(t *testing.T) {
	share := func(lb string) float64 {
		slow, fast := newShopServer(t, 100*time.Millisecond), newShopServer(t, 0)
		rg := newPoolRig(t, config.Pool{URLs: []string{slow.URL(), fast.URL()}, LB: lb}, 5*time.Second)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 25 {
					rg.send(t, "GET", "/p/x", fmt.Sprint(w, "-", i), "")
				}
			})
		}
		wg.Wait()
		s, f := float64(slow.hits.Load()), float64(fast.hits.Load())
		t.Logf("%s: slow %v, fast %v", lb, s, f)
		return s / (s + f)
	}
	roundRobin, leastConn := share(config.LBRoundRobin), share(config.LBLeastConn)
	if leastConn >= roundRobin/3 {
		t.Fatalf("the slow server's share: %.2f with least_conn, %.2f with round_robin", leastConn, roundRobin)
	}
}

// No server up: 503 ORIGIN_UNAVAILABLE at once, no server tried, while edgeq's own endpoints answer.
func TestPool_NoServerUpIsAnswered503AtOnce(t *testing.T) {
	a, b := newShopServer(t, 0), newShopServer(t, 0)
	for _, s := range []*shopServer{a, b} {
		s.health.Store(http.StatusInternalServerError)
	}
	rg := newPoolRig(t, config.Pool{URLs: []string{a.URL(), b.URL()},
		Health: config.PoolHealth{Path: "/healthz", Interval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond, UnhealthyAfter: 1, HealthyAfter: 1}}, 5*time.Second)
	rg.runHealth(t)
	waitFor(t, func() bool {
		return rg.sample(t, "edgeq_origin_up", "url", a.URL()) == 0 && rg.sample(t, "edgeq_origin_up", "url", b.URL()) == 0
	})
	start := time.Now()
	req, _ := http.NewRequest("POST", rg.server.URL+"/p/checkout", strings.NewReader("sku=1"))
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	assertJSONError(t, resp, string(body), http.StatusServiceUnavailable, "ORIGIN_UNAVAILABLE")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	// The connect timeout is 5 s: nothing was tried, so the answer takes what a local request takes.
	if took > 500*time.Millisecond {
		t.Errorf("answered after %s", took)
	}
	if a.hits.Load()+b.hits.Load() != 0 {
		t.Error("a server was tried")
	}
	if status, body := rg.send(t, "GET", "/_edgeq/hello", "", ""); status != 200 || body != "hello" {
		t.Errorf("edgeq's own endpoint: %d %q", status, body)
	}
	if status, body := rg.send(t, "GET", "/elsewhere", "", ""); status != 200 || body != "origin" {
		t.Errorf("origin:'s pool: %d %q", status, body)
	}
}

// A reload that keeps a pool's server keeps what is known of it; a server it removes leaves no
// series behind.
func TestPool_AReloadKeepsTheStateOfTheServersItKeeps(t *testing.T) {
	good := newShopServer(t, 0)
	dead := "http://" + closedAddr(t)
	shop := config.Pool{Name: "shop", LB: config.LBFirst, URLs: []string{dead, good.URL()}, Passive: config.PoolPassive{FailAfter: 1, DownFor: time.Minute}}
	rg := newPoolRig(t, shop, 5*time.Second)
	rg.send(t, "GET", "/p/x", "1", "")
	if up := rg.sample(t, "edgeq_origin_up", "url", dead); up != 0 {
		t.Fatalf("up = %v", up)
	}
	other := newShopServer(t, 0)
	shop.URLs = []string{dead, other.URL()}
	table, err := rg.proxy.CompileWith([]config.Route{{Name: "pool", Match: "/p/", Origin: "shop"}}, []config.Pool{shop})
	if err != nil {
		t.Fatal(err)
	}
	rg.proxy.Use(table)
	if up := rg.sample(t, "edgeq_origin_up", "url", dead); up != 0 {
		t.Errorf("the kept server is up again after the reload: %v", up)
	}
	if n := rg.sample(t, "edgeq_origin_up", "url", good.URL()); n != -1 {
		t.Errorf("the removed server still has a series")
	}
	if _, body := rg.send(t, "GET", "/p/x", "2", ""); body != "served by "+other.addr {
		t.Errorf("after the reload: %q", body)
	}
	if _, err := rg.proxy.CompileWith([]config.Route{{Name: "r", Match: "/r", Origin: "nope"}}, nil); err == nil ||
		!strings.Contains(err.Error(), "routes[0].origin") {
		t.Errorf("a route naming no pool compiled: %v", err)
	}
}

func TestHealthURL_IsBelowTheServersPath(t *testing.T) {
	for _, c := range []struct{ base, path, want string }{
		{"http://10.0.0.1:3000", "/healthz", "http://10.0.0.1:3000/healthz"},
		{"http://10.0.0.1:3000/", "/healthz?deep=1", "http://10.0.0.1:3000/healthz?deep=1"},
		{"https://shop.internal/shop/", "/up", "https://shop.internal/shop/up"},
	} {
		u, _ := url.Parse(c.base)
		if got := healthURL(u, c.path); got != c.want {
			t.Errorf("%s + %s = %s, want %s", c.base, c.path, got, c.want)
		}
	}
}
