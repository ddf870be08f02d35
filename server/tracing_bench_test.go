package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkTracing_GatedGET measures gated GETs (a valid token, the queue gate, the shop over
// loopback) through a running edgeq with tracing off, on at the default sample ratio (0.01) and on at
// 1, side by side: in rounds that run the three in turn (off, ratio_0.01, ratio_1, then ratio_1#01,
// ratio_0.01#01, off#01, ...), so a busy moment of the machine falls on all of them; compare within a
// round. Spans are exported over OTLP/HTTP to a receiver that takes and drops them, so the
// figures include the exporter's work. The client, edgeq and the shop share the machine's CPUs: the
// ratios between the three are the point, not the figures.
func BenchmarkTracing_GatedGET(b *testing.B) {
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>the product page</body></html>")
	}))
	b.Cleanup(shop.Close)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(collector.Close)
	type edge struct {
		name, token string
		in          *instance
	}
	var edges []edge
	for _, c := range []struct{ name, tracing string }{
		{"off", ""},
		{"ratio_0.01", fmt.Sprintf("tracing: {exporter: otlp_http, endpoint: %q, sample_ratio: 0.01}", collector.URL)},
		{"ratio_1", fmt.Sprintf("tracing: {exporter: otlp_http, endpoint: %q, sample_ratio: 1}", collector.URL)},
	} {
		in := start(b, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
origin: {url: %q}
log: {level: warn}
queues:
  - {id: drop, capacity: 100000, token_ttl: 1h}
routes:
  - {name: products, match: "GET /products/{id}", queue: drop}
%s
`, shop.URL, c.tracing))
		_, token := joinAndToken(b, in, "drop")
		edges = append(edges, edge{name: c.name, token: token, in: in})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for round := range rounds {
		for i := range edges {
			if round%2 == 1 {
				i = len(edges) - 1 - i // every other round in the other order: none is always first
			}
			gatedGETs(b, client, edges[i].name, edges[i].in.public, edges[i].token)
		}
	}
}

// rounds is how many times BenchmarkTracing_GatedGET runs each configuration, in turn.
const rounds = 10

func gatedGETs(b *testing.B, client *http.Client, name, public, token string) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		before := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest("GET", public+"/products/1", nil)
				req.Header.Set("Cookie", "edgeq_tk_drop="+token)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
		// The process's CPU time per request (the client's, edgeq's and the shop's together): less
		// moved than ns/op by other work on the machine.
		b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
