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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/accesslog"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
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

// benchRoom is a waiting room on s with a fresh signing key, logging nowhere: what the benchmarks
// measure against.
func benchRoom(s *store.Store) *Room {
	key, _ := token.GenerateKey()
	keys := token.NewKeyring(key)
	return New(Options{
		Store: s, Keyring: keys, Verifier: token.NewVerifier(keys, "edgeq", 5*time.Second), Issuer: "edgeq",
		IDKey: keys.DeriveKey("edgeq request ids v1"), Prefix: "/_edgeq", Cookies: web.Cookies{Secure: "auto"},
		Responder: &web.Responder{Brand: "edgeq", Lang: "en"}, Logger: slog.New(slog.DiscardHandler),
	})
}

// BenchmarkGate measures a gated GET with a valid token cookie through edgeq's handler, beside a bare
// ReverseProxy with pooled buffers, over the same in-memory origin: the difference is the gate's and
// edgeq's own cost per request. The valid-token path makes no store call, nor does one that renews the
// token (session_renewal: every request of the renewal case sends a token in the last half of its
// life): a hook on the store client fails the benchmark on any command during the requests.
func BenchmarkGate(b *testing.B) {
	s := storetest.Embedded(b)
	room := benchRoom(s)
	ctx := context.Background()
	q := testQueue("drop", 10)
	renewing := testQueue("renewing", 10)
	renewing.SessionRenewal, renewing.TokenTTL = true, time.Hour
	if err := room.Apply(ctx, []config.Queue{q, renewing}, nil); err != nil {
		b.Fatal(err)
	}
	// A token of the renewing queue issued 40 minutes ago, valid for 20 more: in the last half of its life.
	rsnap := room.snapshotOf(ctx, "renewing")
	rres, err := room.assignNow(ctx, "renewing", []assignReq{{claim: true}})
	if err != nil || rres[0].exp == 0 {
		b.Fatalf("assign: %v", err)
	}
	now := time.Now().Unix()
	old, e := room.sign("renewing", rsnap.Epoch, room.ids.make("renewing", rsnap.Epoch, rres[0].pos), rres[0].pos, now-2400, now+1200, 0)
	if e != nil {
		b.Fatal(e)
	}
	snap := room.snapshotOf(ctx, "drop")
	res, err := room.assignNow(ctx, "drop", []assignReq{{claim: true}})
	if err != nil || res[0].exp == 0 {
		b.Fatalf("assign: %v", err)
	}
	pos, iat, exp := res[0].pos, res[0].iat, res[0].exp
	t, e := room.sign("drop", snap.Epoch, room.ids.make("drop", snap.Epoch, pos), pos, iat, exp, 0)
	if e != nil {
		b.Fatal(e)
	}
	origin := memoryOrigin{body: []byte(strings.Repeat("x", 1024))}
	originURL, _ := url.Parse("http://origin.internal")
	edge := proxy.New(proxy.Options{
		Origin: originURL, Prefix: "/_edgeq", Endpoints: http.NotFoundHandler(), Steps: []proxy.Step{room.Gate()},
		Responder: &web.Responder{Brand: "edgeq", Lang: "en"}, Metrics: metrics.New(prometheus.NewRegistry()),
		Logger: slog.New(accesslog.NewHandler(io.Discard, "json", slog.LevelInfo)), Transport: origin,
	})
	table, err := edge.Compile([]config.Route{
		{Name: "gated", Match: "GET /gated/", Queue: "drop"}, {Name: "renewing", Match: "GET /renewing/", Queue: "renewing"},
	})
	if err != nil {
		b.Fatal(err)
	}
	edge.Use(table)
	bare := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport: origin, BufferPool: proxy.NewBufferPool(),
	}
	commands := storetest.CountCommands(room.client, nil)
	for _, c := range []struct {
		name, path, cookie string
		handler            http.Handler
		renews             bool
	}{
		{"bare_buffer_pool", "/gated/page", "edgeq_tk_drop=" + t.Raw + "; session=abc", bare, false},
		{"edgeq_gated_valid_token", "/gated/page", "edgeq_tk_drop=" + t.Raw + "; session=abc", edge, false},
		{"edgeq_gated_renewing_token", "/renewing/page", "edgeq_tk_renewing=" + old.Raw + "; session=abc", edge, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			commands.Store(0)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest("GET", c.path, nil)
					req.Header.Set("Cookie", c.cookie)
					w := httptest.NewRecorder()
					c.handler.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
					if c.renews && !strings.Contains(w.Header().Get("Set-Cookie"), "edgeq_tk_renewing=") {
						b.Fatal("the token was not renewed")
					}
				}
			})
			if n := commands.Load(); n != 0 {
				b.Fatalf("%d store commands on the request path", n)
			}
			if c.renews {
				// The renewals reach the store on the tick, in one batch (and the hook does count).
				room.flushRenewals(ctx)
				if n := commands.Load(); n == 0 {
					b.Fatal("the renewal never reached the store")
				}
			}
		})
	}
}

// BenchmarkInvites creates 10,000 invitations in one admin API call (under a second:
// docs/benchmarks.md "Per request, without sockets") on a real redis-server: codes drawn, hashed,
// stored by one invites.lua call, and answered as JSON.
func BenchmarkInvites(b *testing.B) {
	s := storetest.Redis(b)
	room := benchRoom(s)
	if err := room.Apply(context.Background(), []config.Queue{testQueue("presale", 10)}, nil); err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	room.RegisterAdmin(mux)
	// The admin API logs through the request's logger, the default one outside a server.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Run("create_10000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest("POST", "/api/queue/presale/invites", strings.NewReader(`{"count": 10000, "ttl_second": 3600}`))
			req.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkJoinScript is the store's side of joins as a replica sends them in a drop: one assign.lua
// call for a group of joins of a full queue (everyone waits), on the package's private redis-server.
// It reports what Redis spent per join: redis-µs/join is the redis-server process's CPU (INFO cpu),
// script-µs/join the script's own time (INFO commandstats, evalsha).
func BenchmarkJoinScript(b *testing.B) {
	for _, group := range []int{1, 16} {
		b.Run("group="+strconv.Itoa(group), func(b *testing.B) {
			s := storetest.Redis(b)
			room := benchRoom(s)
			ctx := context.Background()
			if err := room.Apply(ctx, []config.Queue{testQueue("drop", 0)}, nil); err != nil {
				b.Fatal(err)
			}
			reqs := make([]assignReq, group)
			p0, s0 := storetest.RedisCPU(b, s.Client)
			var n int
			for b.Loop() {
				res, err := room.assignNow(ctx, "drop", reqs)
				if err != nil || len(res) != group || res[0].code != 0 {
					b.Fatalf("assign: %v %v", res, err)
				}
				n += group
			}
			b.StopTimer()
			p1, s1 := storetest.RedisCPU(b, s.Client)
			b.ReportMetric((p1-p0)/float64(n), "redis-µs/join")
			b.ReportMetric((s1-s0)/float64(n), "script-µs/join")
		})
	}
}

// BenchmarkAhead is a status poll's "ahead" with none and with 100,000 places served out of turn
// (a random phase, then fifo): a binary search over the tick's sorted ranks, so a poll's cost grows
// with their logarithm, not their number.
func BenchmarkAhead(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run("out_of_turn="+strconv.Itoa(n), func(b *testing.B) {
			s := &snapshot{Method: config.MethodFIFO, Serving: 10}
			for i := range n {
				s.outOfTurnRanks = append(s.outOfTurnRanks, int64(20+2*i))
			}
			var sink int64
			pos := int64(20 + n) // half of them before it
			for b.Loop() {
				sink += s.ahead(pos)
			}
			if want := pos - 11 - int64(n/2); n > 0 && s.ahead(pos) != want {
				b.Fatalf("ahead %d, want %d", s.ahead(pos), want)
			}
			_ = sink
		})
	}
}

// BenchmarkHeartbeats is the store's side of heartbeats: one replica's flush of 5,000 waiters' polls
// (one script call), on the package's private redis-server, with gone_after off and on (which reads
// each place's state). It reports what Redis spent per heartbeat written; a waiter's polls are written
// about one in four (beat: sampled to a 5-second window of every 20), so a poll costs a quarter of it.
func BenchmarkHeartbeats(b *testing.B) {
	for _, gone := range []time.Duration{0, 10 * time.Second} {
		b.Run("gone_after="+gone.String(), func(b *testing.B) {
			s := storetest.Redis(b)
			room := benchRoom(s)
			ctx := context.Background()
			q := testQueue("drop", 0)
			q.GoneAfter = gone
			if err := room.Apply(ctx, []config.Queue{q}, nil); err != nil {
				b.Fatal(err)
			}
			const waiters, batch = 100_000, 5000
			if err := s.Client.Set(ctx, queueKeys(s.Keys, "drop")[1], waiters, 0).Err(); err != nil {
				b.Fatal(err)
			}
			p0, s0 := storetest.RedisCPU(b, s.Client)
			var n, next int64
			for b.Loop() {
				set := make(map[int64]beat, batch)
				for range batch {
					set[next%waiters+1] = beatPoll
					next++
				}
				room.heartbeats.mu.Lock()
				room.heartbeats.pending["drop"] = set
				room.heartbeats.mu.Unlock()
				room.flushHeartbeats(ctx)
				n += batch
			}
			b.StopTimer()
			p1, s1 := storetest.RedisCPU(b, s.Client)
			b.ReportMetric((p1-p0)/float64(n), "redis-µs/beat")
			b.ReportMetric((s1-s0)/float64(n), "script-µs/beat")
		})
	}
}
