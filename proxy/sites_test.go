package proxy

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
)

// tagRoute makes each route answer through the origin with the route's name in X-Route.
var tagRoute = stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Route", route.Name)
		next.ServeHTTP(w, r)
	})
}}

// echoHost makes the origin answer with the Host it received.
func echoHost(w http.ResponseWriter, r *http.Request) { w.Write([]byte("host " + r.Host)) }

// Two shops and a family of sites behind one edgeq: each route applies to its own host (by host:, or
// by the host of its pattern, as before), in any case, with a port or the trailing dot; a wildcard
// takes one label, not two nor the bare name. Every route names a host, so a request for a host none
// names gets 421 MISDIRECTED_REQUEST (JSON for API clients, a page for browsers) and never reaches the
// shop; edgeq's own endpoints answer on any host.
func TestSites_EachRouteServesItsHostAndUnknownHostsAre421(t *testing.T) {
	rg := newRig(t, rigOptions{steps: []Step{tagRoute}, originHandler: echoHost, routes: []config.Route{
		{Name: "a_checkout", Match: "POST /checkout/{p}", Host: "shop-a.example"},
		{Name: "b_checkout", Match: "POST /checkout/{p}", Host: "Shop-B.Example."},
		{Name: "stores", Match: "GET /account", Host: "*.stores.example"},
		{Name: "legacy", Match: "GET legacy.example/old"},
	}})
	for _, c := range []struct {
		method, host, path string
		status             int
		route              string
	}{
		{"POST", "shop-a.example", "/checkout/1", 200, "a_checkout"},
		{"POST", "SHOP-A.Example.:8080", "/checkout/1", 200, "a_checkout"},
		{"POST", "shop-b.example", "/checkout/1", 200, "b_checkout"},
		{"POST", "shop-b.example:443", "/checkout/1", 200, "b_checkout"},
		{"GET", "eu.stores.example", "/account", 200, "stores"},
		{"GET", "EU.Stores.Example.:8443", "/account", 200, "stores"},
		{"GET", "legacy.example", "/old", 200, "legacy"},
		// Known hosts, paths no route guards: the shop's as always.
		{"GET", "shop-a.example", "/", 200, ""},
		{"GET", "eu.stores.example", "/cart", 200, ""},
		{"GET", "Legacy.Example", "/new", 200, ""},
		// Hosts no route names.
		{"POST", "shop-c.example", "/checkout/1", 421, ""},
		{"GET", "a.eu.stores.example", "/account", 421, ""}, // two labels under the wildcard's name
		{"GET", "stores.example", "/account", 421, ""},      // the bare name
		{"GET", "xstores.example", "/account", 421, ""},
		{"GET", "127.0.0.1", "/", 421, ""},
		{"GET", "[::1]:8080", "/", 421, ""},
	} {
		t.Run(c.method+" "+c.host+c.path, func(t *testing.T) {
			req := rg.request(t, c.method, c.path, nil)
			req.Host = c.host
			before := rg.hits.Load()
			resp, body := rg.do(t, req)
			if resp.StatusCode != c.status || resp.Header.Get("X-Route") != c.route {
				t.Fatalf("status %d route %q, want %d %q: %s", resp.StatusCode, resp.Header.Get("X-Route"), c.status, c.route, body)
			}
			rg.wantForwarded(t, before, c.status == 200)
			if c.status == 421 {
				assertJSONError(t, resp, body, 421, "MISDIRECTED_REQUEST")
			} else if want := "host " + canonicalHost(c.host); body != want && c.route != "" {
				t.Fatalf("the shop saw %q, want %q", body, want)
			}
		})
	}
	// A browser gets the error page, in its language.
	req := rg.request(t, "GET", "/", http.Header{"Accept": {"text/html"}, "Accept-Language": {"de"}})
	req.Host = "www.unknown.example"
	resp, body := rg.do(t, req)
	if resp.StatusCode != 421 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, "Unbekannte Website") || !strings.Contains(body, "Diese Adresse bedient diesen Hostnamen nicht.") {
		t.Fatalf("browser: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	// edgeq's own endpoints (the waiting room, its page's assets) answer whatever the host.
	req = rg.request(t, "GET", "/_edgeq/hello", nil)
	req.Host = "www.unknown.example"
	if resp, body := rg.do(t, req); resp.StatusCode != 200 || !strings.Contains(body, "correlation_id") {
		t.Fatalf("an edgeq endpoint on an unknown host: %d %s", resp.StatusCode, body)
	}
	if n := testutil.ToFloat64(rg.metrics.HTTPRequests.WithLabelValues(metrics.RouteEdgeq, "421")); n != 7 {
		t.Fatalf("%v requests counted as edgeq's 421, want 7", n)
	}
	if !strings.Contains(rg.logs.String(), `no route names the host \"shop-c.example\"`) {
		t.Fatalf("the 421's cause is not logged:\n%s", rg.logs)
	}
}

// Routes are tried in file order, host routes and host-less ones alike: a host-less route listed
// above a host route takes that host's requests too (a single ServeMux would prefer the pattern with
// a host; edgeq's first-match-wins does not), and while one route names no host, no host is unknown.
func TestSites_FirstMatchWinsAcrossHostAndHostlessRoutes(t *testing.T) {
	for _, c := range []struct {
		name   string
		routes []config.Route
		want   map[string]string // host -> route
	}{
		{"host-less first", []config.Route{
			{Name: "any", Match: "POST /checkout/{p}"},
			{Name: "shop", Match: "POST /checkout/{p}", Host: "shop.example"},
		}, map[string]string{"shop.example": "any", "other.example": "any"}},
		{"host first", []config.Route{
			{Name: "shop", Match: "POST /checkout/{p}", Host: "shop.example"},
			{Name: "any", Match: "POST /checkout/{p}"},
		}, map[string]string{"shop.example": "shop", "other.example": "any"}},
		{"host-less first, host in the pattern", []config.Route{
			{Name: "any", Match: "POST /checkout/{p}"},
			{Name: "shop", Match: "POST shop.example/checkout/{p}"},
		}, map[string]string{"shop.example": "any", "other.example": "any"}},
		{"wildcard first", []config.Route{
			{Name: "wild", Match: "POST /checkout/{p}", Host: "*.example"},
			{Name: "shop", Match: "POST /checkout/{p}", Host: "shop.example"},
		}, map[string]string{"shop.example": "wild", "x.example": "wild"}},
		{"one host-less route: nothing is misdirected", []config.Route{
			{Name: "shop", Match: "POST /checkout/{p}", Host: "shop.example"},
			{Name: "search", Match: "GET /search"},
		}, map[string]string{"shop.example": "shop", "other.example": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rg := newRig(t, rigOptions{steps: []Step{tagRoute}, routes: c.routes})
			for host, want := range c.want {
				req := rg.request(t, "POST", "/checkout/1", nil)
				req.Host = host
				resp, body := rg.do(t, req)
				if resp.StatusCode != 200 || resp.Header.Get("X-Route") != want {
					t.Errorf("%s: %d route %q, want %q: %s", host, resp.StatusCode, resp.Header.Get("X-Route"), want, body)
				}
			}
		})
	}
}

// An HTTP/1.1 request in absolute form names its host twice. Go's server takes the request target's
// (RFC 9112 section 3.2.2: a server ignores the Host header then), edgeq routes by it, and the shop
// receives it as its Host: the gate and the shop see the same site.
func TestSites_AbsoluteFormTargetWinsOverTheHostHeader(t *testing.T) {
	rg := newRig(t, rigOptions{steps: []Step{tagRoute}, originHandler: echoHost, routes: []config.Route{
		{Name: "a", Match: "GET /page", Host: "shop-a.example"},
		{Name: "b", Match: "GET /page", Host: "shop-b.example"},
	}})
	a := rg.sendRaw(t, "GET", "GET http://shop-b.example/page HTTP/1.1\r\nHost: shop-a.example\r\n")
	if a.status != 200 || a.header.Get("X-Route") != "b" || a.body != "host shop-b.example" {
		t.Fatalf("%d route %q, the shop saw %q", a.status, a.header.Get("X-Route"), a.body)
	}
	a = rg.sendRaw(t, "GET", "GET http://SHOP-A.example:8080/page HTTP/1.1\r\nHost: shop-b.example\r\n")
	if a.status != 200 || a.header.Get("X-Route") != "a" || a.body != "host shop-a.example:8080" {
		t.Fatalf("%d route %q, the shop saw %q", a.status, a.header.Get("X-Route"), a.body)
	}
	before := rg.hits.Load()
	a = rg.sendRaw(t, "GET", "GET http://elsewhere.example/page HTTP/1.1\r\nHost: shop-a.example\r\n")
	var body struct{ Error string }
	if json.Unmarshal([]byte(a.body), &body); a.status != 421 || body.Error != "MISDIRECTED_REQUEST" {
		t.Fatalf("an unknown host in the target: %d %s", a.status, a.body)
	}
	rg.wantForwarded(t, before, false)
}

// A route names its host in one place: Compile refuses a route with both (configuration validation
// does too), and a wildcard that is not "*." and a name.
func TestSites_CompileRefusesAHostTwiceAndBadWildcards(t *testing.T) {
	rg := newRig(t, rigOptions{})
	for _, route := range []config.Route{
		{Name: "twice", Match: "GET shop.example/x", Host: "shop.example"},
		{Name: "star", Match: "GET /x", Host: "*"},
		{Name: "dot", Match: "GET /x", Host: "*."},
		{Name: "glued", Match: "GET /x", Host: "*example.com"},
	} {
		if _, err := rg.proxy.Compile([]config.Route{route}); err == nil || !strings.Contains(err.Error(), "routes[0].host") {
			t.Errorf("%s: %v", route.Name, err)
		}
	}
}

func TestSite_Matches(t *testing.T) {
	exact, _ := routeSite(config.Route{Host: "Shop.Example."}, "/")
	wild, _ := routeSite(config.Route{Host: "*.Example.com"}, "/")
	for _, c := range []struct {
		s    site
		host string
		want bool
	}{
		{exact, "shop.example", true},
		{exact, "shop.example:8080", true},
		{exact, "www.shop.example", false},
		{exact, "shop.example.com", false},
		{wild, "a.example.com", true},
		{wild, "a-b.example.com:443", true},
		{wild, "a.b.example.com", false},
		{wild, "example.com", false},
		{wild, ".example.com", false},
		{wild, "aexample.com", false},
		{site{}, "anything.example", true},
		{site{}, "", true},
	} {
		if got := c.s.matches(canonicalHost(c.host)); got != c.want {
			t.Errorf("%+v matches %q = %v, want %v", c.s, c.host, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { wild.matches("a.example.com:443") }); n != 0 {
		t.Errorf("matching a host allocates %v times", n)
	}
}

// BenchmarkLookup is the route lookup of a gated GET, the one step of the gated path a route's host
// adds to: routes without a host, and the same table with every route scoped to the request's host.
// Single-threaded, unlike BenchmarkProxy, whose timings on a shared machine are too noisy for a cost
// this small.
func BenchmarkLookup(b *testing.B) {
	originURL, _ := url.Parse("http://origin.internal")
	p := New(Options{
		Origin: originURL, Prefix: "/_edgeq", Endpoints: http.NotFoundHandler(), Responder: &web.Responder{},
		Metrics: metrics.New(prometheus.NewRegistry()), Logger: slog.New(slog.DiscardHandler),
	})
	for _, host := range []string{"", "shop.example"} {
		table, err := p.Compile([]config.Route{
			{Name: "checkout", Match: "POST /checkout/{product}", Host: host},
			{Name: "plain", Match: "GET /plain/", Host: host},
			{Name: "gated", Match: "GET /gated/", Host: host},
		})
		if err != nil {
			b.Fatal(err)
		}
		name := "hostless_routes"
		if host != "" {
			name = "host_routes"
		}
		b.Run(name, func(b *testing.B) {
			r, _ := http.NewRequest("GET", "http://shop.example:8080/gated/page", nil)
			b.ReportAllocs()
			for b.Loop() {
				if route, _, _, _ := table.lookup(r); route == nil || route.name != "gated" {
					b.Fatal("no route")
				}
			}
		})
	}
}
