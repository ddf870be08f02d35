package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/inflight"
	"github.com/edgeq/edgeq/internal/accesslog"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/testutil/wait"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// rig is a proxy in front of an httptest origin, with its logs and metrics at hand.
type rig struct {
	proxy   *Proxy
	server  *httptest.Server // edgeq's public listener
	origin  *httptest.Server
	metrics *metrics.Metrics
	logs    *syncBuffer
	hits    atomic.Int64 // requests that reached the origin
}

type rigOptions struct {
	originHandler http.HandlerFunc
	routes        []config.Route
	steps         []Step
	trusted       []string
	timeout       time.Duration
	bodyTimeout   time.Duration
	inflight      *inflight.Limiter
	maxBodyBytes  int64
	spoolBytes    int64
	writeTimeout  time.Duration
	visitors      *Visitors
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	rg := &rig{logs: &syncBuffer{}}
	if o.originHandler == nil {
		o.originHandler = func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "origin:", r.URL.Path) }
	}
	rg.origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.hits.Add(1)
		o.originHandler(w, r)
	}))
	t.Cleanup(rg.origin.Close)
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	var trusted []netip.Prefix
	for _, s := range o.trusted {
		p, err := config.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		trusted = append(trusted, p)
	}
	rg.metrics = metrics.New(prometheus.NewRegistry())
	responder := testResponder(t, "/_edgeq")
	endpoints := http.NewServeMux()
	endpoints.HandleFunc("GET /_edgeq/hello", func(w http.ResponseWriter, r *http.Request) {
		web.WriteJSON(w, 200, map[string]string{"correlation_id": web.RequestFrom(r.Context()).CorrelationID})
	})
	originURL, _ := url.Parse(rg.origin.URL)
	rg.proxy = New(Options{
		Origin: originURL, OriginTimeout: o.timeout, Prefix: "/_edgeq", TrustedProxies: trusted,
		Endpoints: web.Routes(endpoints, responder), Steps: o.steps, Responder: responder,
		Metrics: rg.metrics, Logger: slog.New(accesslog.NewHandler(rg.logs, "json", nil)), BodyTimeout: o.bodyTimeout,
		InFlight: o.inflight, MaxBodyBytes: o.maxBodyBytes, SpoolBytes: o.spoolBytes, WriteTimeout: o.writeTimeout,
		Visitors: o.visitors,
	})
	table, err := rg.proxy.Compile(o.routes)
	if err != nil {
		t.Fatal(err)
	}
	rg.proxy.Use(table)
	rg.server = httptest.NewServer(rg.proxy)
	t.Cleanup(rg.server.Close)
	return rg
}

func testResponder(t *testing.T, prefix string) *web.Responder {
	t.Helper()
	assets := static.New(prefix + "/static/")
	pages, err := templates.Parse("", template.FuncMap{"static": assets.URL})
	if err != nil {
		t.Fatal(err)
	}
	return &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// accessLines returns the decoded access log lines.
func (b *syncBuffer) accessLines(t *testing.T) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	return lines
}

func (rg *rig) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (rg *rig) request(t *testing.T, method, path string, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, rg.server.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return req
}

// echoHeaders makes the origin answer with the request headers it received, as JSON.
func echoHeaders(w http.ResponseWriter, r *http.Request) {
	h := r.Header.Clone()
	h.Set("Host", r.Host)
	json.NewEncoder(w).Encode(h)
}

func decodeHeaders(t *testing.T, body string) http.Header {
	t.Helper()
	var h http.Header
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("origin answer %q: %v", body, err)
	}
	return h
}

func TestForwardedHeaders_UntrustedPeerStartsANewChain(t *testing.T) {
	rg := newRig(t, rigOptions{originHandler: echoHeaders})
	req := rg.request(t, "GET", "/page", http.Header{
		"X-Forwarded-For":   {"6.6.6.6"},
		"X-Forwarded-Proto": {"https"},
		"X-Forwarded-Host":  {"evil.example"},
		"Forwarded":         {"for=6.6.6.6"},
	})
	req.Host = "shop.example"
	_, body := rg.do(t, req)
	h := decodeHeaders(t, body)
	if got := h.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want only the peer", got)
	}
	if got := h.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("X-Forwarded-Proto = %q", got)
	}
	if got := h.Get("X-Forwarded-Host"); got != "shop.example" {
		t.Errorf("X-Forwarded-Host = %q", got)
	}
	if got := h.Get("Host"); got != "shop.example" {
		t.Errorf("Host = %q, want the visitor's Host kept", got)
	}
	if got := h.Get("Forwarded"); got != "" {
		t.Errorf("Forwarded = %q, want it removed", got)
	}
}

func TestForwardedHeaders_TrustedPeerChainIsKept(t *testing.T) {
	rg := newRig(t, rigOptions{originHandler: echoHeaders, trusted: []string{"127.0.0.0/8"}})
	req := rg.request(t, "GET", "/page", http.Header{
		"X-Forwarded-For":   {"203.0.113.9, 10.0.0.1"},
		"X-Forwarded-Proto": {"https"},
		"X-Forwarded-Host":  {"shop.example"},
	})
	_, body := rg.do(t, req)
	h := decodeHeaders(t, body)
	if got := h.Get("X-Forwarded-For"); got != "203.0.113.9, 10.0.0.1, 127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q", got)
	}
	if got := h.Get("X-Forwarded-Proto"); got != "https" {
		t.Errorf("X-Forwarded-Proto = %q", got)
	}
	if got := h.Get("X-Forwarded-Host"); got != "shop.example" {
		t.Errorf("X-Forwarded-Host = %q", got)
	}
	lines := rg.logs.accessLines(t)
	if len(lines) != 1 || lines[0]["client_ip"] != "10.0.0.1" {
		t.Errorf("client_ip in the access log = %v, want 10.0.0.1 (the nearest untrusted hop)", lines)
	}
}

func TestClientAddress(t *testing.T) {
	trusted := trustedSet{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	cases := []struct {
		name, remote string
		xff          []string
		want         string
		wantTrusted  bool
	}{
		{"untrusted peer ignores XFF", "198.51.100.7:1234", []string{"1.2.3.4"}, "198.51.100.7", false},
		{"trusted peer without XFF", "10.0.0.2:1234", nil, "10.0.0.2", true},
		{"trusted peer, one hop", "10.0.0.2:1234", []string{"203.0.113.5"}, "203.0.113.5", true},
		{"skips trusted hops from the right", "10.0.0.2:1", []string{"6.6.6.6, 203.0.113.5, 10.1.1.1"}, "203.0.113.5", true},
		{"several header lines", "10.0.0.2:1", []string{"6.6.6.6", "203.0.113.5"}, "203.0.113.5", true},
		{"garbage stops the walk", "10.0.0.2:1", []string{"6.6.6.6, not-an-ip, 10.1.1.1"}, "10.1.1.1", true},
		{"all trusted", "10.0.0.2:1", []string{"10.9.9.9"}, "10.9.9.9", true},
		{"ipv6 peer", "[2001:db8::1]:443", []string{"[2001:db8::2]", "2001:db9::5"}, "2001:db9::5", true},
		{"v4-mapped peer", "[::ffff:10.0.0.2]:1", []string{"203.0.113.5"}, "203.0.113.5", true},
		// Load balancers that write the client's port (Azure Application Gateway, some ingresses).
		{"an IPv4 entry with a port", "10.0.0.2:1", []string{"203.0.113.7:5123"}, "203.0.113.7", true},
		{"an IPv6 entry with a port", "10.0.0.2:1", []string{"[2001:db9::7]:443"}, "2001:db9::7", true},
		{"trusted hops with ports are skipped", "10.0.0.2:1", []string{"203.0.113.7:5123, 10.1.1.1:80, [2001:db8::3]:8080"}, "203.0.113.7", true},
		{"a port that is not one stops the walk", "10.0.0.2:1", []string{"6.6.6.6, 203.0.113.7:99999"}, "10.0.0.2", true},
		{"an empty port stops the walk", "10.0.0.2:1", []string{"6.6.6.6, 203.0.113.7:"}, "10.0.0.2", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, trustedPeer := trusted.clientAddress(c.remote, c.xff)
			if got.String() != c.want || trustedPeer != c.wantTrusted {
				t.Fatalf("got %s trusted=%v, want %s trusted=%v", got, trustedPeer, c.want, c.wantTrusted)
			}
		})
	}
}

func TestCorrelationID(t *testing.T) {
	rg := newRig(t, rigOptions{originHandler: echoHeaders})
	cases := []struct {
		name, sent string
		kept       bool
	}{
		{"sane id is kept", "req-123_abc.DEF:9", true},
		{"none is generated", "", false},
		{"too long is replaced", strings.Repeat("a", 129), false},
		{"odd characters are replaced", "abc<script>", false},
		{"spaces are replaced", "a b", false},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.sent != "" {
				h.Set(CorrelationHeader, c.sent)
			}
			resp, body := rg.do(t, rg.request(t, "GET", "/x", h))
			echoed := resp.Header.Get(CorrelationHeader)
			atOrigin := decodeHeaders(t, body).Get(CorrelationHeader)
			if echoed == "" || echoed != atOrigin {
				t.Fatalf("echoed %q, origin saw %q", echoed, atOrigin)
			}
			if c.kept != (echoed == c.sent) {
				t.Fatalf("sent %q, got %q", c.sent, echoed)
			}
			if !c.kept && (len(echoed) != 32 || seen[echoed]) {
				t.Fatalf("generated id %q is not a fresh 128-bit hex id", echoed)
			}
			seen[echoed] = true
		})
	}
	// edgeq's own endpoints carry it too.
	resp, body := rg.do(t, rg.request(t, "GET", "/_edgeq/hello", http.Header{CorrelationHeader: {"abc"}}))
	if resp.Header.Get(CorrelationHeader) != "abc" || !strings.Contains(body, `"abc"`) {
		t.Fatalf("endpoint: header %q body %s", resp.Header.Get(CorrelationHeader), body)
	}
}

func TestClientEdgeqHeadersAndCookiesNeverReachTheOrigin(t *testing.T) {
	rg := newRig(t, rigOptions{originHandler: echoHeaders})
	req := rg.request(t, "GET", "/x", nil)
	req.Header["Edgeq-Queue-Id"] = []string{"drop"}
	req.Header["edgeq-admission-id"] = []string{"forged"} // not canonical: must go too
	req.Header.Set("Edgeq-Command", "complete")
	req.Header.Add("Cookie", "a=1; edgeq_token=secret; b=2")
	req.Header.Add("Cookie", "edgeq_req=zzz")
	req.Header.Add("Cookie", "c=3")
	_, body := rg.do(t, req)
	h := decodeHeaders(t, body)
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "edgeq-") {
			t.Errorf("origin received %s", name)
		}
	}
	cookies := strings.Join(h.Values("Cookie"), "; ")
	if strings.Contains(cookies, "edgeq_") || !strings.Contains(cookies, "a=1") || !strings.Contains(cookies, "b=2") || !strings.Contains(cookies, "c=3") {
		t.Errorf("Cookie at origin = %q", cookies)
	}
}

// A client cannot make the proxy drop the gates' Edgeq-* headers by naming them in Connection (which
// makes them hop-by-hop headers to ReverseProxy).
func TestGateEdgeqHeaders_SurviveAConnectionHeader(t *testing.T) {
	mark := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("Edgeq-Queue-Id", "drop")
			r.Header.Set("Edgeq-Admission-Id", "a-1")
			next.ServeHTTP(w, r)
		})
	}}
	rg := newRig(t, rigOptions{originHandler: echoHeaders, steps: []Step{mark},
		routes: []config.Route{{Name: "gated", Match: "/x"}}})
	for _, conn := range []string{"", "Edgeq-Queue-Id, Edgeq-Admission-Id", "edgeq-queue-id,EDGEQ-ADMISSION-ID, close", "X-Correlation-Id"} {
		req := rg.request(t, "GET", "/x", nil)
		if conn != "" {
			req.Header.Set("Connection", conn)
		}
		_, body := rg.do(t, req)
		h := decodeHeaders(t, body)
		if h.Get("Edgeq-Queue-Id") != "drop" || h.Get("Edgeq-Admission-Id") != "a-1" || len(h.Get(CorrelationHeader)) != 32 {
			t.Errorf("Connection %q: origin saw Edgeq-Queue-Id %q, Edgeq-Admission-Id %q", conn,
				h.Get("Edgeq-Queue-Id"), h.Get("Edgeq-Admission-Id"))
		}
	}
}

func TestStripEdgeqCookies(t *testing.T) {
	cases := []struct{ in, want []string }{
		{[]string{"a=1; b=2"}, []string{"a=1; b=2"}},
		{[]string{"edgeq_t=1"}, nil},
		{[]string{"a=1;edgeq_t=1;b=2"}, []string{"a=1;b=2"}},
		{[]string{"a=1; edgeq_t=1"}, []string{"a=1"}},
		{[]string{"edgeq_t=1", "a=1"}, []string{"a=1"}},
		{[]string{"xedgeq_t=1; EDGEQ_T=2"}, []string{"xedgeq_t=1; EDGEQ_T=2"}}, // cookie names are case-sensitive
	}
	for _, c := range cases {
		h := http.Header{"Cookie": append([]string(nil), c.in...)}
		stripEdgeqCookies(h)
		if got := h["Cookie"]; strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("strip(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStreamingResponsesAreFlushedAsTheyArrive(t *testing.T) {
	release := make(chan struct{})
	rg := newRig(t, rigOptions{originHandler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: second\n\n")
	}})
	defer close(release)
	resp, err := http.Get(rg.server.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event = %q, %v (the origin is still holding the response open)", line, err)
	}
}

func TestUpgradeRoundTrip(t *testing.T) {
	rg := newRig(t, rigOptions{originHandler: func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo: " + line)
		brw.Flush()
	}})
	conn, err := net.Dial("tcp", rg.server.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: shop.example\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get(CorrelationHeader) == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	fmt.Fprint(conn, "hello over the upgraded connection\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo: hello over the upgraded connection\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
}

func TestOriginDown_502JSONAndPage(t *testing.T) {
	rg := newRig(t, rigOptions{})
	rg.origin.Close() // nothing listens at the origin's address any more
	resp, body := rg.do(t, rg.request(t, "POST", "/checkout/1", http.Header{"Accept": {"application/json"}}))
	assertJSONError(t, resp, body, http.StatusBadGateway, "ORIGIN_UNAVAILABLE")

	resp, body = rg.do(t, rg.request(t, "GET", "/products/1", http.Header{"Accept": {"text/html,application/xhtml+xml"}}))
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"The shop is not answering", "ORIGIN_UNAVAILABLE", resp.Header.Get(CorrelationHeader), "Try again"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if got := testutil.ToFloat64(rg.metrics.OriginErrors.WithLabelValues("unavailable")); got != 2 {
		t.Errorf("origin_errors_total{unavailable} = %v", got)
	}
}

func TestOriginSlow_504(t *testing.T) {
	rg := newRig(t, rigOptions{timeout: 100 * time.Millisecond, originHandler: func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}})
	resp, body := rg.do(t, rg.request(t, "GET", "/slow", nil))
	assertJSONError(t, resp, body, http.StatusGatewayTimeout, "ORIGIN_TIMEOUT")
	resp, body = rg.do(t, rg.request(t, "GET", "/slow", http.Header{"Accept": {"text/html"}}))
	if resp.StatusCode != 504 || !strings.Contains(body, "The shop is taking too long") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if got := testutil.ToFloat64(rg.metrics.OriginErrors.WithLabelValues("timeout")); got != 2 {
		t.Errorf("origin_errors_total{timeout} = %v", got)
	}
}

func TestClientLeaves_499IsLoggedNotBlamedOnOrigin(t *testing.T) {
	arrived := make(chan struct{})
	rg := newRig(t, rigOptions{originHandler: func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	req := rg.request(t, "GET", "/slow", nil).WithContext(ctx)
	go func() { <-arrived; cancel() }()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request was cancelled, want an error")
	}
	waitFor(t, func() bool { return testutil.ToFloat64(rg.metrics.OriginErrors.WithLabelValues("client_gone")) == 1 })
	waitFor(t, func() bool {
		lines := rg.logs.accessLines(t)
		return len(lines) == 1 && lines[0]["status"] == float64(499)
	})
	if got := testutil.ToFloat64(rg.metrics.OriginErrors.WithLabelValues("unavailable")); got != 0 {
		t.Errorf("origin blamed: unavailable = %v", got)
	}
}

// waitFor polls cond until it holds; the deadline only bounds a broken test, it asserts no timing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	wait.Until(t, 10*time.Second, "the condition", cond)
}

func assertJSONError(t *testing.T, resp *http.Response, body string, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	var e struct {
		Success *bool  `json:"success"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if e.Success == nil || *e.Success || e.Error != code || e.Message == "" {
		t.Fatalf("body = %s, want error %s", body, code)
	}
	if resp.Header.Get(CorrelationHeader) == "" {
		t.Fatal("error answer without X-Correlation-ID")
	}
}

func TestOriginCommandIsRecordedAndNotForwarded(t *testing.T) {
	var seen atomic.Value
	step := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			seen.Store(web.OutcomeFrom(r.Context()))
		})
	}}
	rg := newRig(t, rigOptions{
		routes: []config.Route{{Name: "checkout", Match: "POST /checkout/{p}"}},
		steps:  []Step{step},
		originHandler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Edgeq-Command", "complete")
			w.WriteHeader(201)
		},
	})
	resp, _ := rg.do(t, rg.request(t, "POST", "/checkout/9", nil))
	if resp.Header.Get("Edgeq-Command") != "" || resp.StatusCode != 201 {
		t.Fatalf("status %d, Edgeq-Command forwarded: %q", resp.StatusCode, resp.Header.Get("Edgeq-Command"))
	}
	o := seen.Load().(*web.Outcome)
	if !o.Forwarded || o.Status != 201 || o.Command != "complete" || o.TransportError {
		t.Fatalf("outcome = %+v", o)
	}
}

type stepFunc struct {
	requirement string
	wrap        func(route config.Route, next http.Handler) http.Handler
}

func (s stepFunc) Requirement() string { return s.requirement }
func (s stepFunc) Wrap(route config.Route, next http.Handler) (http.Handler, error) {
	return s.wrap(route, next), nil
}

func TestRoutes_FirstMatchWinsAndTheRestPassesThrough(t *testing.T) {
	// A tagging step shows which route served each request.
	tag := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Route", route.Name)
			w.Header().Set("X-Product", r.PathValue("product"))
			next.ServeHTTP(w, r)
		})
	}}
	rg := newRig(t, rigOptions{
		steps: []Step{tag},
		routes: []config.Route{
			{Name: "any_checkout", Match: "POST /checkout/{product}"},
			// More specific, so ServeMux alone would prefer it; listed second, so it never wins.
			{Name: "special", Match: "POST /checkout/special"},
			{Name: "drop_pages", Match: "GET /drop/"},
			{Name: "host_only", Match: "GET shop.example/host"},
			{Name: "upper_host", Match: "GET Upper.Example./up"}, // written with capitals and a dot
		},
	})
	cases := []struct {
		method, path, host, route, product string
	}{
		{"POST", "/checkout/7", "", "any_checkout", "7"},
		{"POST", "/checkout/special", "", "any_checkout", "special"},
		{"GET", "/checkout/7", "", "", ""}, // method does not match: pass through
		{"GET", "/drop/a/b", "", "drop_pages", ""},
		{"HEAD", "/drop/x", "", "drop_pages", ""}, // GET patterns match HEAD
		{"GET", "/host", "shop.example", "host_only", ""},
		{"GET", "/host", "SHOP.Example", "host_only", ""},  // host names are case-insensitive
		{"GET", "/host", "shop.example.", "host_only", ""}, // the fully qualified spelling
		{"GET", "/host", "Shop.Example.:8080", "host_only", ""},
		{"GET", "/up", "upper.example", "upper_host", ""},
		{"GET", "/up", "UPPER.example.", "upper_host", ""},
		{"GET", "/host", "other.example", "", ""},
		{"GET", "/elsewhere", "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.host+c.path, func(t *testing.T) {
			req := rg.request(t, c.method, c.path, nil)
			if c.host != "" {
				req.Host = c.host
			}
			before := rg.hits.Load()
			resp, _ := rg.do(t, req)
			if got := resp.Header.Get("X-Route"); got != c.route {
				t.Fatalf("served by route %q, want %q", got, c.route)
			}
			if got := resp.Header.Get("X-Product"); got != c.product {
				t.Fatalf("{product} = %q, want %q", got, c.product)
			}
			if rg.hits.Load() != before+1 || resp.StatusCode != 200 {
				t.Fatalf("status %d, origin hits %d -> %d", resp.StatusCode, before, rg.hits.Load())
			}
		})
	}
	counter := func(route string) float64 {
		return testutil.ToFloat64(rg.metrics.HTTPRequests.WithLabelValues(route, "200"))
	}
	if counter("any_checkout") != 2 || counter("drop_pages") != 2 || counter(metrics.RoutePassThrough) != 3 {
		t.Fatalf("route counters: checkout %v drop %v passthrough %v", counter("any_checkout"), counter("drop_pages"), counter(metrics.RoutePassThrough))
	}
}

// Paths an origin's router may treat as a protected one must meet the gate: unclean paths are
// redirected to their clean form, encoded and trailing-slash variants are gated directly.
func TestRoutes_PathVariantsCannotSlipPastTheGate(t *testing.T) {
	refuse := stepFunc{requirement: config.RequireQueue, wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Product", r.PathValue("p"))
			http.Error(w, "gated", http.StatusForbidden)
		})
	}}
	rg := newRig(t, rigOptions{steps: []Step{refuse}, routes: []config.Route{{Name: "c", Match: "POST /checkout/{p}", Queue: "drop"}}})
	cases := []struct {
		path, want, product string
	}{
		{"/checkout/1", "403", "1"},
		{"/checkout/1/", "403", "1"},
		{"/checkout%2F1", "403", "1"},
		{"/chec%6bout/1", "403", "1"},
		{"/x/../checkout/1", "307 /checkout/1", ""},
		{"/checkout//1", "307 /checkout/1", ""},
		{"/checkout/./1", "307 /checkout/1", ""},
		{"/%2e%2e/checkout/1", "307 /checkout/1", ""},
		{"/checkout/../checkout//1?x=1", "307 /checkout/1?x=1", ""},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range cases {
		req, _ := http.NewRequest("POST", rg.server.URL, nil)
		req.URL.Opaque, req.URL.RawQuery, _ = strings.Cut(c.path, "?") // sent exactly as written
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := fmt.Sprint(resp.StatusCode)
		if resp.StatusCode == http.StatusTemporaryRedirect {
			got += " " + resp.Header.Get("Location")
		}
		if got != c.want || resp.Header.Get("X-Product") != c.product {
			t.Errorf("%s: got %q product %q, want %q product %q", c.path, got, resp.Header.Get("X-Product"), c.want, c.product)
		}
	}
	if rg.hits.Load() != 0 {
		t.Fatalf("%d requests reached the origin around the gate", rg.hits.Load())
	}
	// Paths no route claims in any form pass through untouched.
	req, _ := http.NewRequest("POST", rg.server.URL, nil)
	req.URL.Opaque = "/shop//cart"
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || rg.hits.Load() != 1 {
		t.Fatalf("unclean unprotected path: status %d, hits %d", resp.StatusCode, rg.hits.Load())
	}
}

func TestRoutes_RefusingStepKeepsTheOriginOut(t *testing.T) {
	order := make(chan string, 10)
	mk := func(name string, refuse bool) Step {
		return stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				order <- name
				if refuse {
					web.WriteJSON(w, 403, map[string]any{"success": false, "error": "QUEUE_REQUIRED"})
					return
				}
				next.ServeHTTP(w, r)
			})
		}}
	}
	rg := newRig(t, rigOptions{
		steps:  []Step{mk("first", false), mk("second", true), mk("third", false)},
		routes: []config.Route{{Name: "r", Match: "/gated/"}},
	})
	resp, _ := rg.do(t, rg.request(t, "GET", "/gated/x", nil))
	if resp.StatusCode != 403 || rg.hits.Load() != 0 {
		t.Fatalf("status %d, origin hits %d", resp.StatusCode, rg.hits.Load())
	}
	if a, b := <-order, <-order; a != "first" || b != "second" || len(order) != 0 {
		t.Fatalf("steps ran as %s, %s (+%d)", a, b, len(order))
	}
}

func TestRoutes_RequirementWithoutAStepIsClosed(t *testing.T) {
	rg := newRig(t, rigOptions{routes: []config.Route{
		{Name: "checkout", Match: "POST /checkout/{p}", Queue: "drop"},
		{Name: "bid", Match: "POST /bid", Admission: config.Admission{Type: "bid"}},
	}})
	if m := rg.proxy.CurrentTable().Missing; len(m["checkout"]) != 1 || m["checkout"][0] != "queue" || m["bid"][0] != "admission" {
		t.Fatalf("Missing = %v", m)
	}
	resp, body := rg.do(t, rg.request(t, "POST", "/checkout/1", nil))
	assertJSONError(t, resp, body, http.StatusServiceUnavailable, "GATE_UNAVAILABLE")
	if rg.hits.Load() != 0 {
		t.Fatal("a route whose gate is missing let a request through")
	}
}

func TestRoutes_SwapWhileServing(t *testing.T) {
	tag := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Route", route.Name)
			next.ServeHTTP(w, r)
		})
	}}
	rg := newRig(t, rigOptions{steps: []Step{tag}, routes: []config.Route{{Name: "old", Match: "/a"}}})
	next, err := rg.proxy.Compile([]config.Route{{Name: "new", Match: "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				resp, err := http.Get(rg.server.URL + "/a")
				if err != nil || resp.StatusCode != 200 {
					bad.Add(1)
				} else {
					resp.Body.Close()
				}
			}
		}()
	}
	rg.proxy.Use(next)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d requests failed during the swap", bad.Load())
	}
	resp, _ := rg.do(t, rg.request(t, "GET", "/b", nil))
	if resp.Header.Get("X-Route") != "new" {
		t.Fatalf("after the swap /b is served by %q", resp.Header.Get("X-Route"))
	}
	resp, _ = rg.do(t, rg.request(t, "GET", "/a", nil))
	if resp.Header.Get("X-Route") != "" {
		t.Fatalf("after the swap /a is still routed to %q", resp.Header.Get("X-Route"))
	}
}

func TestEndpoints_UnknownPathIs404JSONOrPage(t *testing.T) {
	rg := newRig(t, rigOptions{})
	resp, body := rg.do(t, rg.request(t, "GET", "/_edgeq/nope", nil))
	assertJSONError(t, resp, body, 404, "NOT_FOUND")
	resp, body = rg.do(t, rg.request(t, "POST", "/_edgeq/hello", nil))
	assertJSONError(t, resp, body, 405, "METHOD_NOT_ALLOWED")
	resp, body = rg.do(t, rg.request(t, "GET", "/_edgeq/nope", http.Header{"Accept": {"text/html"}}))
	if resp.StatusCode != 404 || !strings.Contains(body, "Page not found") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if rg.hits.Load() != 0 {
		t.Fatal("edgeq's own paths reached the origin")
	}
}

func TestAccessLogLine(t *testing.T) {
	rg := newRig(t, rigOptions{routes: []config.Route{{Name: "home", Match: "GET /{$}"}}})
	rg.do(t, rg.request(t, "GET", "/?secret=do-not-log", http.Header{CorrelationHeader: {"trace-1"}}))
	lines := rg.logs.accessLines(t)
	if len(lines) != 1 {
		t.Fatalf("want one access line, got %v", lines)
	}
	l := lines[0]
	if l["correlation_id"] != "trace-1" || l["route"] != "home" || l["status"] != float64(200) ||
		l["method"] != "GET" || l["path"] != "/" || l["duration_ms"] == nil {
		t.Fatalf("access line = %v", l)
	}
	if strings.Contains(rg.logs.String(), "do-not-log") {
		t.Fatal("the query string was logged")
	}
	// The line as log/slog writes it, field for field and in this order (the rig logs through the
	// server's handler, whose fast path writes it; package accesslog holds that path to slog's bytes).
	raw := strings.TrimSpace(rg.logs.String())
	raw = raw[strings.LastIndex(raw, "\n")+1:]
	want := regexp.MustCompile(`^\{"time":"[0-9T:.Z+-]+","level":"INFO","msg":"request","correlation_id":"trace-1",` +
		`"method":"GET","path":"/","route":"home","status":200,"bytes":[0-9]+,"duration_ms":[0-9.]+,"client_ip":"[0-9.]+"\}$`)
	if !want.MatchString(raw) {
		t.Fatalf("access line %s", raw)
	}
}

func TestPageErrorsAreEscaped(t *testing.T) {
	responder := testResponder(t, "/_edgeq")
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Accept", "text/html")
	// A code without a message of its own in the catalog: the page shows the error's message.
	responder.Error(rec, req, web.Errorf(400, "TEST_NO_CATALOG_MESSAGE", "bad <script>alert(1)</script>"))
	body := rec.Body.String()
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("unescaped: %s", body)
	}
	if rec.Header().Get("Content-Security-Policy") == "" || rec.Header().Get("X-Frame-Options") != "DENY" {
		t.Fatalf("page headers: %v", rec.Header())
	}
}

func TestBufferPool_ReusesWithoutAllocating(t *testing.T) {
	pool := NewBufferPool()
	b := pool.Get()
	if len(b) != 32<<10 {
		t.Fatalf("a buffer of %d bytes, want 32 KiB", len(b))
	}
	pool.Put(b)
	pool.Put(make([]byte, 10)) // not one of the pool's: dropped, not converted
	if n := testing.AllocsPerRun(100, func() { pool.Put(pool.Get()) }); n != 0 {
		t.Errorf("%v allocations per Get and Put, want 0", n)
	}
}
