package waitroom

import (
	"bytes"
	"context"
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

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store/storetest"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
)

type memoryOrigin struct{ body []byte }

func (m memoryOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(bytes.NewReader(m.body)),
		ContentLength: int64(len(m.body)), Request: r,
	}, nil
}

// BenchmarkGate measures a gated GET with a valid token cookie through edgeq's handler, beside a bare
// ReverseProxy with pooled buffers, over the same in-memory origin: the difference is the gate's and
// edgeq's own cost per request. The valid-token path makes no store call.
func BenchmarkGate(b *testing.B) {
	s := storetest.Embedded(b)
	key, _ := token.GenerateKey()
	keys := token.NewKeyring(key)
	room := New(Options{
		Store: s, Keyring: keys, Verifier: token.NewVerifier(keys, "edgeq", 5*time.Second), Issuer: "edgeq",
		IDKey: keys.DeriveKey("edgeq request ids v1"), Prefix: "/_edgeq", Cookies: web.Cookies{Secure: "auto"},
		Responder: &web.Responder{Brand: "edgeq", Lang: "en"}, Logger: slog.New(slog.DiscardHandler),
	})
	ctx := context.Background()
	q := testQueue("drop", 10)
	if err := room.Apply(ctx, []config.Queue{q}, nil); err != nil {
		b.Fatal(err)
	}
	snap := room.snapshotOf(ctx, "drop")
	res := room.scripts.run(ctx, room.client, room.scripts.assign, queueKeys(room.keys, "drop"), "1", 0)
	pos, iat, exp := res.int(1), res.int(5), res.int(6)
	if res.err != nil || exp == 0 {
		b.Fatalf("assign: %v", res.err)
	}
	t, e := room.sign("drop", snap.Epoch, room.ids.make("drop", snap.Epoch, pos), pos, iat, exp, 0)
	if e != nil {
		b.Fatal(e)
	}
	origin := memoryOrigin{body: []byte(strings.Repeat("x", 1024))}
	originURL, _ := url.Parse("http://origin.internal")
	edge := proxy.New(proxy.Options{
		Origin: originURL, Prefix: "/_edgeq", Endpoints: http.NotFoundHandler(), Steps: []proxy.Step{room.Gate()},
		Responder: &web.Responder{Brand: "edgeq", Lang: "en"}, Metrics: metrics.New(prometheus.NewRegistry()),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Transport: origin,
	})
	table, err := edge.Compile([]config.Route{{Name: "gated", Match: "GET /gated/", Queue: "drop"}})
	if err != nil {
		b.Fatal(err)
	}
	edge.Use(table)
	bare := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport: origin, BufferPool: proxy.NewBufferPool(),
	}
	cookie := "edgeq_tk_drop=" + t.Raw + "; session=abc"
	for _, c := range []struct {
		name    string
		handler http.Handler
	}{{"bare_buffer_pool", bare}, {"edgeq_gated_valid_token", edge}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest("GET", "/gated/page", nil)
					req.Header.Set("Cookie", cookie)
					w := httptest.NewRecorder()
					c.handler.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
