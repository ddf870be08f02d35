package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/admission/stock"
	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

// admissionBench measures stock admissions through edgeq (the real server wiring: a POST checkout
// route with admission, one reserve.lua and one commit.lua per request, the proxy, the access log)
// beside reserve.lua called directly on the same redis-server, in one run.
func admissionBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("admission", flag.ContinueOnError)
	duration, concurrency, rounds := roundFlags(fs)
	pinCPU := fs.Int("redis-cpu", -1, "pin redis-server to this CPU and this process to the others (as Redis on a core of its own); -1: no pinning")
	cpuProfile := fs.String("cpuprofile", "", "write CPU profiles of this process (edgeq, the origin and the load) during the first admission round to this file and the first round of the same POST passed through to this file + \".passthrough\"")
	graphqlBody := fs.Bool("graphql", false, "measure stock admission with a GraphQL body (a graphql: route) beside the same admission with a plain JSON body, instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *graphqlBody {
		return graphqlAdmissionBench(*duration, *concurrency, *rounds, w)
	}
	var profile, passProfile *os.File // the first round's of each, then nil
	if *cpuProfile != "" {
		for _, p := range []struct {
			f    **os.File
			name string
		}{{&profile, *cpuProfile}, {&passProfile, *cpuProfile + ".passthrough"}} {
			f, err := os.Create(p.name)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			*p.f = f
		}
	}
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the admission benchmark needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	where, err := pinnedWhere(redisSrv.Pid(), *pinCPU, "redis-server on loopback",
		"redis-server on loopback pinned to CPU %d, edgeq, the origin and the load to CPU %s")
	if err != nil {
		return err
	}
	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("order confirmed"))
	}))
	if err != nil {
		return err
	}
	edge, admin, stop, err := startAdmissionEdgeq(origin, redisSrv.Addr())
	if err != nil {
		return err
	}
	defer stop()

	var users atomic.Int64
	post := func(path string) func() (load.Request, bool) {
		return func() (load.Request, bool) {
			u := strconv.FormatInt(users.Add(1), 10)
			return load.Request{Method: "POST", URL: edge + path,
				Header: http.Header{"X-User": {"buyer-" + u}, "Content-Type": {"application/x-www-form-urlencoded"}},
				Body:   []byte("quantity=1")}, true
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer func() { _ = rc.Close() }()
	client := load.NewClient(*concurrency)
	load.Run(client, "warm-up", post("/checkout/bench"), 200, *concurrency, time.Second)
	// Rounds alternate so that both targets see the same machine; the worker drains between them.
	var plain, through load.Sample
	var cpu redisCPU
	var worst time.Duration // how long the worker needed after a round to catch up
	streams := productStreams("edgeq", "bench")
	for round := 0; round < *rounds; round++ {
		if passProfile != nil {
			if err := pprof.StartCPUProfile(passProfile); err != nil {
				return err
			}
		}
		plain.Add(load.Run(client, "same POST passed through", post("/plain/bench"), 200, *concurrency, *duration))
		if passProfile != nil {
			pprof.StopCPUProfile()
			passProfile = nil
		}
		if _, err := drained(rc, 5*time.Minute, streams...); err != nil {
			return err
		}
		before, err := readRedisCPU(rc)
		if err != nil {
			return err
		}
		if profile != nil {
			if err := pprof.StartCPUProfile(profile); err != nil {
				return err
			}
		}
		s := load.Run(client, "stock admission through edgeq", post("/checkout/bench"), 200, *concurrency, *duration)
		if profile != nil {
			pprof.StopCPUProfile()
			profile = nil // the first round's profile
		}
		through.Add(s)
		// The event worker's share counts: wait until it has applied everything the run admitted.
		lag, err := drained(rc, 5*time.Minute, streams...)
		if err != nil {
			return err
		}
		worst = max(worst, lag)
		after, err := readRedisCPU(rc)
		if err != nil {
			return err
		}
		cpu.add(after.minus(before), int64(len(s.Latencies)))
	}
	plain.Name, through.Name = "same POST passed through", "stock admission through edgeq"

	raw, err := rawReserve(redisSrv.Addr(), *concurrency, *duration)
	if err != nil {
		return err
	}

	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "load: %d concurrent clients, %d alternating rounds of %s, %s, one product with ample stock, a new buyer per request\n\n",
		*concurrency, *rounds, *duration, where)
	_, _ = fmt.Fprintln(w, plain)
	_, _ = fmt.Fprintln(w, through)
	_, _ = fmt.Fprintln(w, raw)
	_, _ = fmt.Fprintln(w)
	_, _ = fmt.Fprintln(w, "| measurement | admissions/s | vs pass-through | p50 | p99 |")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, s := range []load.Sample{plain, through, raw} {
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %.2fx | %s | %s |\n", s.Name, s.RPS(), s.RPS()/plain.RPS(),
			s.Percentile(0.5).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond))
	}
	_, _ = fmt.Fprintf(w, "\nRedis CPU per stock admission (request path and event worker, INFO commandstats): %.1f µs\n", cpu.perOp())
	_, _ = fmt.Fprintf(w, "event worker: caught up at most %s after a round's last admission\n", worst.Round(10*time.Millisecond))
	_, _ = fmt.Fprintln(w, cpu.breakdown())

	// The admin list's target (< 20 ms, docs/benchmarks.md "Admin list") with the admissions the
	// rounds left (about 100,000): the newest page and a deep one, from 8 operators at once.
	var total struct {
		TotalCount int64 `json:"total_count"`
	}
	if err := adminGetJSON(admin+"/api/admissions?page_size=1", &total); err != nil {
		return err
	}
	deep := max(1, total.TotalCount/20/2)
	for _, page := range []int64{1, deep} {
		url := fmt.Sprintf("%s/api/admissions?page=%d&page_size=20", admin, page)
		s := load.Loop(fmt.Sprintf("admin list, page %d of 20", page), 8, 3*time.Second, func(int) error {
			var body struct {
				Items []json.RawMessage `json:"items"`
			}
			if err := adminGetJSON(url, &body); err != nil {
				return err
			}
			if len(body.Items) != 20 {
				return fmt.Errorf("%d items", len(body.Items))
			}
			return nil
		})
		_, _ = fmt.Fprintf(w, "admin list at %d admissions, page %d (20 a page), 8 at once: p50 %s, p99 %s, %d errors (target: < 20 ms)\n",
			total.TotalCount, page, s.Percentile(0.5).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond), s.Errors)
	}
	return nil
}

// adminGetJSON reads an admin API answer into v.
func adminGetJSON(url string, v any) error {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+benchAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func startAdmissionEdgeq(origin, redisAddr string) (string, string, func(), error) {
	return startEdgeqAdmin(origin, redisAddr, `
products:
  - {id: bench, stock: 1000000000, per_user_limit: 1, name: "Bench item"}
routes:
  - {name: plain, match: "POST /plain/{product}"}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User", quantity: "form:quantity"}
`)
}

// rawReserve calls reserve.lua directly from concurrency goroutines for duration.
func rawReserve(addr string, concurrency int, duration time.Duration) (load.Sample, error) {
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: concurrency * 2})
	defer func() { _ = client.Close() }()
	st := store.Wrap(client, store.Keys{Prefix: "edgeq"})
	ctx := context.Background()
	var ids atomic.Int64
	ids.Store(1 << 40)
	svc := admission.New(admission.Options{Store: st}) // reserve.lua alone, with edgeq's defaults
	return load.Loop("reserve.lua alone", concurrency, duration, func(int) error {
		id := strconv.FormatInt(ids.Add(1), 10)
		res, err := stock.Reserve(ctx, svc, "bench", []admission.Claim{{Owner: "bench", User: "raw-" + id, ID: id, Value: 1}})
		if err == nil && res[0].Code != 0 {
			err = fmt.Errorf("reserve.lua answered %d", res[0].Code)
		}
		return err
	}), nil
}
