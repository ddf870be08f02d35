package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

// replicasBench measures what redis.wait_replicas costs (docs/reference.md
// "Acknowledged by the replicas"): stock admissions through two edgeq instances on one master with one
// replica, one with wait_replicas 0 and one with wait_replicas 1, in alternating rounds of the same
// load: admissions per second, latency, Redis CPU per admission on the master, and the WAITs each
// admission shares (one per grouped reserve call).
func replicasBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("replicas", flag.ContinueOnError)
	duration, concurrency, rounds := roundFlags(fs)
	delay := fs.Duration("delay", 0, "one-way delay of the replication link (0: the replica on loopback; 1ms: about a replica in another zone)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	top, err := redisserver.StartTopology(redisserver.TopologyOptions{Replicas: []redisserver.ReplicaOptions{{Delay: *delay}}})
	if err != nil {
		return fmt.Errorf("the replicas benchmark needs redis-server: %w", err)
	}
	defer top.Stop()
	master := top.Master().Addr()
	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("order confirmed"))
	}))
	if err != nil {
		return err
	}
	type target struct {
		wait   int
		prefix string
		edge   string
		stop   func()
		sample load.Sample
		cpu    redisCPU
		waits  int64
	}
	targets := []*target{{wait: 0, prefix: "w0"}, {wait: 1, prefix: "w1"}}
	for _, t := range targets {
		t.edge, _, t.stop, err = startEdgeqRedis(origin, fmt.Sprintf("{addr: %q, key_prefix: %q, wait_replicas: %d, wait_timeout: 1s}",
			master, t.prefix, t.wait), `
products:
  - {id: bench, stock: 1000000000, per_user_limit: 1, name: "Bench item"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User", quantity: "form:quantity"}
`)
		if err != nil {
			return err
		}
		defer t.stop()
	}
	rc := redis.NewClient(&redis.Options{Addr: master})
	defer func() { _ = rc.Close() }()
	var users atomic.Int64
	post := func(edge string) func() (load.Request, bool) {
		return func() (load.Request, bool) {
			u := strconv.FormatInt(users.Add(1), 10)
			return load.Request{Method: "POST", URL: edge + "/checkout/bench",
				Header: http.Header{"X-User": {"buyer-" + u}, "Content-Type": {"application/x-www-form-urlencoded"}},
				Body:   []byte("quantity=1")}, true
		}
	}
	client := load.NewClient(*concurrency)
	for _, t := range targets {
		load.Run(client, "warm-up", post(t.edge), 200, *concurrency, time.Second)
		if _, err := drained(rc, 5*time.Minute, productStreams(t.prefix, "bench")...); err != nil {
			return err
		}
	}
	for round := 0; round < *rounds; round++ {
		for _, t := range targets {
			before, err := readRedisCPU(rc)
			if err != nil {
				return err
			}
			name := fmt.Sprintf("wait_replicas %d", t.wait)
			s := load.Run(client, name, post(t.edge), 200, *concurrency, *duration)
			t.sample.Add(s)
			if _, err := drained(rc, 5*time.Minute, productStreams(t.prefix, "bench")...); err != nil {
				return err
			}
			after, err := readRedisCPU(rc)
			if err != nil {
				return err
			}
			d := after.minus(before)
			t.cpu.add(d, int64(len(s.Latencies)))
			t.waits += d.calls["wait"]
			t.sample.Name = name
		}
	}
	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	link := "on loopback"
	if *delay > 0 {
		link = fmt.Sprintf("behind a proxy adding %s each way", *delay)
	}
	_, _ = fmt.Fprintf(w, "load: %d concurrent clients, %d alternating rounds of %s, one product, a new buyer per request; one master and one replica %s, one edgeq per setting\n\n",
		*concurrency, *rounds, *duration, link)
	_, _ = fmt.Fprintln(w, "| redis.wait_replicas | admissions/s | vs 0 | p50 | p99 | Redis CPU per admission (master) | WAITs per admission |")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, t := range targets {
		s := t.sample
		perWait := 0.0
		if n := len(s.Latencies); n > 0 {
			perWait = float64(t.waits) / float64(n)
		}
		_, _ = fmt.Fprintf(w, "| %d | %.0f | %.2fx | %s | %s | %.1f µs | %.3f |\n", t.wait, s.RPS(), s.RPS()/targets[0].sample.RPS(),
			s.Percentile(0.5).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond), t.cpu.perOp(), perWait)
	}
	return nil
}

// startEdgeqRedis starts edgeq in this process with the given redis mapping (YAML flow style) and the
// rest of a configuration, and returns its public URL, its admin URL and how to stop it.
func startEdgeqRedis(origin, redisYAML, rest string) (string, string, func(), error) {
	dir, err := os.MkdirTemp("", "edgeq-bench-")
	if err != nil {
		return "", "", nil, err
	}
	cfg := fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q}
redis: %s
log: {level: warn}
`, benchAdminKey, origin, redisYAML) + rest
	path := filepath.Join(dir, "edgeq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", "", nil, err
	}
	public, admin, stop, err := runEdgeqFile(context.Background(), path)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", "", nil, err
	}
	return public, admin, func() { stop(); _ = os.RemoveAll(dir) }, nil
}
