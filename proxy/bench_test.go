package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/inflight"
	"github.com/edgeq/edgeq/internal/accesslog"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/web"
)

// memoryOrigin answers every round trip in memory, so the benchmarks below measure the proxies' own
// work per request, without sockets.
type memoryOrigin struct{ body []byte }

func (m memoryOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain"}},
		Body:          io.NopCloser(bytes.NewReader(m.body)),
		ContentLength: int64(len(m.body)),
		Request:       r,
	}, nil
}

// BenchmarkProxy compares edgeq's handler with a bare httputil.ReverseProxy over the same in-memory
// origin. edgeq pools its copy buffers; bare_buffer_pool does too, so edgeq minus bare_buffer_pool is
// edgeq's own per-request cost (headers, correlation id, route match, metrics, access log).
func BenchmarkProxy(b *testing.B) {
	origin := memoryOrigin{body: []byte(strings.Repeat("x", 1024))}
	originURL, _ := url.Parse("http://origin.internal")
	bare := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport: origin,
	}
	pooled := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport:  origin,
		BufferPool: NewBufferPool(),
	}
	responder := &web.Responder{Brand: "edgeq", Lang: "en"}
	edge := New(Options{
		Origin: originURL, Prefix: "/_edgeq", Endpoints: http.NotFoundHandler(), Responder: responder,
		Metrics: metrics.New(prometheus.NewRegistry()), Logger: slog.New(accesslog.NewHandler(io.Discard, "json", slog.LevelInfo)),
		Transport: origin,
		// Built as the server builds it; the routes below have max_in_flight 0, which must cost nothing.
		InFlight: inflight.New(inflight.Options{Store: storetest.Embedded(b)}), MaxBodyBytes: 1 << 20,
		WriteTimeout: 30 * time.Second, SpoolBytes: 8 << 20,
		Steps: []Step{stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
			if route.Name != "gated" {
				return next
			}
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) })
		}}},
	})
	table, err := edge.CompileWith([]config.Route{
		{Name: "checkout", Match: "POST /checkout/{product}"},
		{Name: "plain", Match: "GET /plain/"},
		{Name: "gated", Match: "GET /gated/"},
		{Name: "pooled", Match: "GET /pooled/", Origin: "shop"},
	}, []config.Pool{{Name: "shop", LB: config.LBRoundRobin, URLs: []string{"http://a.internal", "http://b.internal", "http://c.internal"}}})
	if err != nil {
		b.Fatal(err)
	}
	edge.Use(table)
	cases := []struct {
		name    string
		handler http.Handler
		path    string
	}{
		{"bare", bare, "/page"},
		{"bare_buffer_pool", pooled, "/page"},
		{"edgeq_passthrough", edge, "/page"},
		{"edgeq_plain_route", edge, "/plain/page"},
		{"edgeq_gate_seam_route", edge, "/gated/page"},
		{"edgeq_pool_route", edge, "/pooled/page"}, // a server of a pool of three chosen per request
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest("GET", c.path, nil)
					req.Header.Set("Cookie", "session=abc; edgeq_token=xyz")
					w := httptest.NewRecorder()
					c.handler.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}

// BenchmarkArrival measures what the proxy does to every request before routing it (header stripping,
// the method and Host checks) on the headers a browser sends with a page load: BenchmarkProxy's
// timings on a shared machine are too noisy to show a cost this small.
func BenchmarkArrival(b *testing.B) {
	header := http.Header{
		"Accept":                    {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
		"Accept-Encoding":           {"gzip, deflate, br"},
		"Accept-Language":           {"en-GB,en;q=0.9"},
		"Cache-Control":             {"max-age=0"},
		"Cookie":                    {"session=abc; edgeq_tk_drop=xyz"},
		"Sec-Ch-Ua":                 {`"Chromium";v="130"`},
		"Sec-Ch-Ua-Mobile":          {"?0"},
		"Sec-Ch-Ua-Platform":        {`"Linux"`},
		"Sec-Fetch-Dest":            {"document"},
		"Sec-Fetch-Mode":            {"navigate"},
		"Sec-Fetch-Site":            {"same-origin"},
		"Upgrade-Insecure-Requests": {"1"},
		"User-Agent":                {"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/130.0 Safari/537.36"},
	}
	table := &Table{hostRoutes: true}
	r := httptest.NewRequest("GET", "/gated/page", nil)
	r.Host = "shop.example.com"
	b.ReportAllocs()
	for b.Loop() {
		stripClientHeaders(header, false)
		if checkRequest(r, table) != nil {
			b.Fatal("refused")
		}
	}
}
