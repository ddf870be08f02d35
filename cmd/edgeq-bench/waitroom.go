package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/server"
)

// waitroomBench measures the waiting room on a real redis-server, through edgeq's real server (the
// same wiring as `edgeq serve`, in this process): joins and token issuance per second, status polling
// with many waiters and the Redis commands it costs, Redis memory per waiting visitor, and a gated GET
// with a valid token against a bare ReverseProxy.
func waitroomBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("waitroom", flag.ContinueOnError)
	waiters := fs.Int("waiters", 100_000, "waiting visitors for the polling and memory measurements")
	duration := fs.Duration("duration", 5*time.Second, "load time of each measurement")
	concurrency := fs.Int("concurrency", 32, "concurrent clients")
	tokens := fs.Int("tokens", 20_000, "visitors served for the generate_token measurement")
	if err := fs.Parse(args); err != nil {
		return err
	}
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the waitroom benchmark needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer func() { _ = rdb.Close() }()

	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(originBody)
	}))
	if err != nil {
		return err
	}
	edge, stop, err := startEdgeq(origin, redisSrv.Addr())
	if err != nil {
		return err
	}
	defer stop()

	client := load.NewClient(*concurrency)
	form := func(values url.Values) load.Request {
		return load.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
			Body: []byte(values.Encode())}
	}
	var samples []load.Sample
	var notes []string

	// Joins.
	join := form(url.Values{"queue_id": {"bench_join"}})
	join.URL = edge + "/_edgeq/assign_queue_pos"
	samples = append(samples, named(load.Run(client, "assign_queue_pos", load.Fixed(join), 200, *concurrency, *duration), "assign_queue_pos"))

	// Memory per waiting visitor, and the waiters the polls will ask about.
	before, err := usedMemory(rdb)
	if err != nil {
		return err
	}
	pollIDs, err := joinMany(client, edge, "bench_poll", *waiters, *concurrency)
	if err != nil {
		return err
	}
	after, _ := usedMemory(rdb)
	perVisitor := float64(after-before) / float64(*waiters)
	notes = append(notes, fmt.Sprintf("Redis memory per waiting visitor: %.1f bytes (%d waiters, used_memory %d -> %d)",
		perVisitor, *waiters, before, after))
	smallIDs, err := joinMany(client, edge, "bench_poll_small", 1000, *concurrency)
	if err != nil {
		return err
	}

	// Polling: the same load with 1,000 and with many waiters; Redis commands must not follow.
	for _, c := range []struct {
		queue string
		ids   []string
	}{{"bench_poll_small", smallIDs}, {"bench_poll", pollIDs}} {
		ids := c.ids
		src := func() (load.Request, bool) {
			id := ids[rand.IntN(len(ids))]
			return load.Request{Method: "GET", URL: edge + "/_edgeq/status/" + c.queue + "/" + id}, true
		}
		cmdsBefore, _ := commandsProcessed(rdb)
		s := load.Run(client, fmt.Sprintf("status, %d waiters", len(ids)), src, 200, *concurrency, *duration)
		cmdsAfter, _ := commandsProcessed(rdb)
		samples = append(samples, s)
		notes = append(notes, fmt.Sprintf("%s: %.0f polls/s cost %.1f Redis commands/s", s.Name, s.RPS(),
			float64(cmdsAfter-cmdsBefore)/s.Elapsed.Seconds()))
	}

	// Token issuance: every call issues a fresh token to a served visitor.
	tokenIDs, err := joinMany(client, edge, "bench_token", *tokens, *concurrency)
	if err != nil {
		return err
	}
	if err := waitServed(edge, "bench_token", int64(*tokens)); err != nil {
		return err
	}
	var next atomic.Int64
	src := func() (load.Request, bool) {
		i := next.Add(1) - 1
		if i >= int64(len(tokenIDs)) {
			return load.Request{}, false
		}
		r := form(url.Values{"queue_id": {"bench_token"}, "request_id": {tokenIDs[i]}})
		r.URL = edge + "/_edgeq/generate_token"
		return r, true
	}
	samples = append(samples, load.Run(client, "generate_token (fresh)", src, 200, *concurrency, time.Hour))

	// A gated GET with a valid token against the bare proxy, interleaved.
	cookie, err := gateToken(client, edge)
	if err != nil {
		return err
	}
	originURL, _ := url.Parse(origin)
	bare, err := serve(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport: proxy.NewHTTPTransport(30 * time.Second),
	})
	if err != nil {
		return err
	}
	pooled, err := serve(&httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport:  proxy.NewHTTPTransport(30 * time.Second),
		BufferPool: proxy.NewBufferPool(),
	})
	if err != nil {
		return err
	}
	f := loadFlags{duration: 2 * *duration, rounds: 4, concurrency: *concurrency}
	gate := measure(f, []target{
		{"bare ReverseProxy", load.Request{Method: "GET", URL: bare + "/gated/page"}},
		{"bare + buffer pool", load.Request{Method: "GET", URL: pooled + "/gated/page"}},
		{"edgeq gated, valid token", load.Request{Method: "GET", URL: edge + "/gated/page", Header: http.Header{"Cookie": {cookie}}}},
	}, http.StatusOK)
	samples = append(samples, gate...)
	notes = append(notes,
		fmt.Sprintf("gated GET with a valid token / bare ReverseProxy: %.2fx requests/s", gate[2].RPS()/gate[0].RPS()),
		fmt.Sprintf("gated GET with a valid token / bare + buffer pool: %.2fx requests/s", gate[2].RPS()/gate[1].RPS()))

	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "load: %d concurrent clients, %s per measurement, edgeq (real server wiring) and redis-server %s on loopback\n\n",
		*concurrency, *duration, redisVersion(rdb))
	for _, s := range samples {
		_, _ = fmt.Fprintln(w, s)
	}
	_, _ = fmt.Fprintln(w)
	for _, n := range notes {
		_, _ = fmt.Fprintln(w, n)
	}
	_, _ = fmt.Fprintln(w)
	sampleTable(w, "measurement", samples)
	return nil
}

func named(s load.Sample, name string) load.Sample {
	s.Name = name
	return s
}

// startEdgeq runs edgeq's server in this process with a benchmark configuration.
func startEdgeq(origin, redisAddr string) (string, func(), error) {
	return startEdgeqWith(origin, redisAddr, `
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: bench_join, capacity: 0}
  - {id: bench_poll, capacity: 0}
  - {id: bench_poll_small, capacity: 0}
  - {id: bench_token, capacity: 1000000000}
  - {id: bench_gate, capacity: 1000000}
routes:
  - {name: gated, match: "GET /gated/", queue: bench_gate}
`)
}

// startEdgeqWith runs edgeq's server in this process in front of origin, on redis-server at
// redisAddr, with a signing key of its own, logging at info (as deployed), and the rest of the
// configuration (queues, products, routes) from rest.
func startEdgeqWith(origin, redisAddr, rest string) (string, func(), error) {
	public, _, stop, err := startEdgeqAdmin(origin, redisAddr, rest)
	return public, stop, err
}

// benchAdminKey is the admin API key of the edgeq the benchmarks start.
const benchAdminKey = "bench-admin-key"

// startEdgeqAdmin is startEdgeqWith that also returns the admin listener's base URL (key benchAdminKey).
func startEdgeqAdmin(origin, redisAddr, rest string) (string, string, func(), error) {
	return startEdgeqPrefixed(origin, redisAddr, "edgeq", rest)
}

// startEdgeqPrefixed is startEdgeqAdmin with the store's key prefix (redis.key_prefix).
func startEdgeqPrefixed(origin, redisAddr, prefix, rest string) (string, string, func(), error) {
	urls, stop, err := startEdgeqServer(origin, redisAddr, prefix, `{listen: "127.0.0.1:0"}`, rest)
	return urls.public, urls.admin, stop, err
}

// edgeqURLs are the base URLs of an edgeq the benchmarks run: tls is "" without server.tls.listen.
type edgeqURLs struct{ public, admin, tls string }

// startEdgeqServer is startEdgeqPrefixed with the server section given (YAML flow style), for a
// TLS listener beside the plain one.
func startEdgeqServer(origin, redisAddr, prefix, serverYAML, rest string) (edgeqURLs, func(), error) {
	dir, err := os.MkdirTemp("", "edgeq-bench-")
	if err != nil {
		return edgeqURLs{}, nil, err
	}
	key, _ := token.GenerateKey()
	pemBytes, _ := token.MarshalPrivateKey(key)
	keyPath := filepath.Join(dir, "signing.pem")
	if err := os.WriteFile(keyPath, pemBytes, 0o600); err != nil {
		return edgeqURLs{}, nil, err
	}
	cfg := fmt.Sprintf(`
server: %s
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q}
redis: {addr: %q, key_prefix: %q}
tokens: {signing_key_file: %q}
log: {level: info}
`, serverYAML, benchAdminKey, origin, redisAddr, prefix, keyPath) + rest
	path := filepath.Join(dir, "edgeq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return edgeqURLs{}, nil, err
	}
	urls, stop, err := runEdgeq(context.Background(), path)
	if err != nil {
		_ = os.RemoveAll(dir)
		return edgeqURLs{}, nil, err
	}
	return urls, func() { stop(); _ = os.RemoveAll(dir) }, nil
}

// runEdgeqFile runs edgeq in this process with the configuration file at path, and returns its public
// URL, its admin URL and how to stop it.
func runEdgeqFile(parent context.Context, path string) (string, string, func(), error) {
	urls, stop, err := runEdgeq(parent, path)
	return urls.public, urls.admin, stop, err
}

// runEdgeq is runEdgeqFile that also returns the TLS listener's URL, if there is one.
func runEdgeq(parent context.Context, path string) (edgeqURLs, func(), error) {
	if _, err := config.Load(path); err != nil {
		return edgeqURLs{}, nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	started := make(chan edgeqURLs, 1)
	done := make(chan error, 1)
	go func() {
		var tlsURL string // StartedTLS is called before Started, on the same goroutine
		done <- server.Run(ctx, server.Options{ConfigPath: path, LogOutput: io.Discard,
			StartedTLS: func(tls net.Addr) { tlsURL = "https://" + tls.String() },
			Started: func(public, admin net.Addr) {
				started <- edgeqURLs{public: "http://" + public.String(), admin: "http://" + admin.String(), tls: tlsURL}
			}})
	}()
	select {
	case urls := <-started:
		return urls, func() { cancel(); <-done }, nil //nolint:errcheck // the error of a run told to stop
	case err := <-done:
		cancel()
		return edgeqURLs{}, nil, fmt.Errorf("edgeq did not start: %v", err)
	}
}

// joinMany assigns n visitors to a queue, concurrently, and returns their request ids.
func joinMany(client *http.Client, edge, queue string, n, concurrency int) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				resp, err := client.PostForm(edge+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {queue}})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				var body struct {
					RequestID string `json:"request_id"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				_ = resp.Body.Close()
				if resp.StatusCode != 200 || body.RequestID == "" {
					firstErr.CompareAndSwap(nil, fmt.Errorf("assign to %s: status %d", queue, resp.StatusCode))
					return
				}
				ids[i] = body.RequestID
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return nil, err
	}
	return ids, nil
}

// waitServed waits until the queue's serving position reaches n (the inlet serves in steps).
func waitServed(edge, queue string, n int64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(edge + "/_edgeq/serving_pos/" + queue)
		if err != nil {
			return err
		}
		var body struct {
			Position int64 `json:"position"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if body.Position >= n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("queue %s not served up to %d within 2 minutes", queue, n)
}

// gateToken joins bench_gate and returns the token cookie for Cookie headers.
func gateToken(client *http.Client, edge string) (string, error) {
	ids, err := joinMany(client, edge, "bench_gate", 1, 1)
	if err != nil {
		return "", err
	}
	if err := waitServed(edge, "bench_gate", 1); err != nil {
		return "", err
	}
	resp, err := client.PostForm(edge+"/_edgeq/generate_token", url.Values{"queue_id": {"bench_gate"}, "request_id": {ids[0]}})
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if body.AccessToken == "" {
		return "", fmt.Errorf("generate_token for the gate: status %d", resp.StatusCode)
	}
	return "edgeq_tk_bench_gate=" + body.AccessToken, nil
}

func infoField(rdb *redis.Client, section, field string) (string, error) {
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO %s has no %s", section, field)
}

func usedMemory(rdb *redis.Client) (int64, error) {
	v, err := infoField(rdb, "memory", "used_memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

func commandsProcessed(rdb *redis.Client) (int64, error) {
	v, err := infoField(rdb, "stats", "total_commands_processed")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

func redisVersion(rdb *redis.Client) string {
	v, _ := infoField(rdb, "server", "redis_version")
	return v
}
