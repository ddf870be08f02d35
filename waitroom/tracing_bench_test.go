package waitroom

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/accesslog"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/tracing"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
)

// BenchmarkGateTracing is BenchmarkGate's gated GET with a valid token with tracing off, on at the
// default sample ratio (0.01) and on at 1, side by side: run with -count N, the three alternate.
// Spans go to an exporter that drops them, through the batching processor edgeq uses, so the figures
// are edgeq's own cost of tracing (spans made, kept, handed over), not a receiver's.
func BenchmarkGateTracing(b *testing.B) {
	for _, c := range []struct {
		name  string
		ratio float64 // < 0: off
	}{{"off", -1}, {"ratio_0.01", 0.01}, {"ratio_1", 1}} {
		var tracer trace.Tracer
		if c.ratio >= 0 {
			provider := sdktrace.NewTracerProvider(sdktrace.WithSampler(tracing.Sampler(c.ratio)), sdktrace.WithIDGenerator(tracing.IDs{}),
				sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() { provider.Shutdown(context.Background()) })
			tracer = provider.Tracer("bench")
		}
		edge, cookie := gatedEdge(b, tracer)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest("GET", "/gated/page", nil)
					req.Header.Set("Cookie", cookie)
					w := httptest.NewRecorder()
					edge.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}

// gatedEdge is edgeq's handler with a queue gate on /gated/ over an in-memory origin, traced by tracer
// (nil: tracing off), and a valid token cookie for it.
func gatedEdge(b *testing.B, tracer trace.Tracer) (http.Handler, string) {
	b.Helper()
	s := storetest.Embedded(b)
	key, _ := token.GenerateKey()
	keys := token.NewKeyring(key)
	room := New(Options{
		Store: s, Keyring: keys, Verifier: token.NewVerifier(keys, "edgeq", 5*time.Second), Issuer: "edgeq",
		IDKey: keys.DeriveKey("edgeq request ids v1"), Prefix: "/_edgeq", Cookies: web.Cookies{Secure: "auto"},
		Responder: &web.Responder{Brand: "edgeq", Lang: "en"}, Logger: slog.New(slog.DiscardHandler), Tracer: tracer,
	})
	ctx := context.Background()
	if err := room.Apply(ctx, []config.Queue{testQueue("drop", 10)}, nil); err != nil {
		b.Fatal(err)
	}
	snap := room.snapshotOf(ctx, "drop")
	res, err := room.assignNow(ctx, "drop", []assignReq{{claim: true}})
	if err != nil || res[0].exp == 0 {
		b.Fatalf("assign: %v", err)
	}
	t, e := room.sign("drop", snap.Epoch, room.ids.make("drop", snap.Epoch, res[0].pos), res[0].pos, res[0].iat, res[0].exp, 0)
	if e != nil {
		b.Fatal(e)
	}
	originURL, _ := url.Parse("http://origin.internal")
	edge := proxy.New(proxy.Options{
		Origin: originURL, Prefix: "/_edgeq", Endpoints: http.NotFoundHandler(), Steps: []proxy.Step{room.Gate()},
		Responder: &web.Responder{Brand: "edgeq", Lang: "en"}, Metrics: metrics.New(prometheus.NewRegistry()),
		Logger:    slog.New(accesslog.NewHandler(io.Discard, "json", slog.LevelInfo)),
		Transport: memoryOrigin{body: []byte(strings.Repeat("x", 1024))}, Tracer: tracer,
	})
	table, err := edge.Compile([]config.Route{{Name: "gated", Match: "GET /gated/", Queue: "drop"}})
	if err != nil {
		b.Fatal(err)
	}
	edge.Use(table)
	return edge, "edgeq_tk_drop=" + t.Raw + "; session=abc"
}
