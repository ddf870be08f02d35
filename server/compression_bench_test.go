package server

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
)

// BenchmarkOwnAnswers is a waiting visitor's two requests through edgeq's public handler, built as
// the server builds it: the status poll its page makes every few seconds (short JSON) and a reload of
// the waiting page, each from a browser (Accept-Encoding: gzip, deflate, br, zstd) and from a client
// that asks for no compression. body-B/op is what goes on the wire. Run it on a tree without
// compression for the figures before (docs/benchmarks.md "Compression of edgeq's own answers").
func BenchmarkOwnAnswers(b *testing.B) {
	path := filepath.Join(b.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(`
server: { listen: "127.0.0.1:0" }
admin: { listen: "127.0.0.1:0" }
origin: { url: "http://127.0.0.1:9" }
queues:
  - { id: drop, capacity: 0 }
limits: { join_per_ip_per_minute: 0, status_per_ip_per_minute: 0 }
log: { level: warn }
`), 0o644)
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	built, err := build(cfg, slog.New(slog.DiscardHandler), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { built.store.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := built.room.Apply(ctx, cfg.Queues, nil); err != nil {
		b.Fatal(err)
	}
	go built.room.Run(ctx)

	// One visitor joins; its cookies and its page's status URL are what it polls and reloads with.
	var first *httptest.ResponseRecorder
	for range 100 {
		first = httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/_edgeq/wait/drop?return=%2F", nil)
		req.Header.Set("Accept", "text/html")
		built.proxy.ServeHTTP(first, req)
		if first.Code == 200 {
			break
		}
	}
	statusURL := regexp.MustCompile(`/_edgeq/status/drop/[0-9a-f-]+`).FindString(first.Body.String())
	if first.Code != 200 || statusURL == "" {
		b.Fatalf("join: %d %s", first.Code, first.Body)
	}
	var cookies []string
	for _, c := range first.Result().Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}

	for _, c := range []struct {
		name, path, accept string
		status             int
	}{
		{"status_poll", statusURL, "application/json", 200},
		{"waiting_page", "/_edgeq/wait/drop?return=%2F", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", 200},
	} {
		for _, client := range []struct{ name, acceptEncoding string }{
			{"browser", "gzip, deflate, br, zstd"}, {"no_accept_encoding", ""},
		} {
			b.Run(c.name+"/"+client.name, func(b *testing.B) {
				b.ReportAllocs()
				var bytes int64
				for b.Loop() {
					req := httptest.NewRequest("GET", c.path, nil)
					req.Header.Set("Accept", c.accept)
					if client.acceptEncoding != "" {
						req.Header.Set("Accept-Encoding", client.acceptEncoding)
					}
					for _, cookie := range cookies {
						req.Header.Add("Cookie", cookie)
					}
					w := httptest.NewRecorder()
					built.proxy.ServeHTTP(w, req)
					if w.Code != c.status {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
					bytes = int64(w.Body.Len())
					io.Copy(io.Discard, w.Body)
				}
				b.ReportMetric(float64(bytes), "body-B/op")
			})
		}
	}
}
