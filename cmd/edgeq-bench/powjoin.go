package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/pow"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

// powJoinBench compares a join that passes the proof-of-work check with a join that needs none, on
// one edgeq and one redis-server, in alternating rounds of the same number of joins: the joins a
// second (edgeq's cost, at a fixed concurrency, the load generator on the same machine) and the
// redis-server's CPU per join (a shared core). The check's own cost is what is compared: challenges
// are fetched and solved (difficulty 1) before each round, outside its timing; fetching one is an
// HMAC and no store call.
func powJoinBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("powjoin", flag.ContinueOnError)
	rounds := fs.Int("rounds", 4, "rounds of each kind of join, alternating")
	joins := fs.Int("joins", 20000, "joins per round")
	concurrency := fs.Int("concurrency", 32, "concurrent clients")
	routeCheck := fs.Bool("route-check", false, "add a checked route (routes[].turnstile), so joins keep their check's time for the token's tsv claim")
	if err := fs.Parse(args); err != nil {
		return err
	}
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the powjoin benchmark needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer func() { _ = rdb.Close() }()
	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(originBody) }))
	if err != nil {
		return err
	}
	rest := `
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
challenge: {provider: pow, pow: {difficulty: 1, ttl: 30m}}
queues:
  - {id: plain, capacity: 0}
  - {id: checked, capacity: 0, turnstile: true}
`
	if *routeCheck {
		rest += "routes: [{name: account, match: \"GET /account/\", turnstile: true}]\n"
	}
	edge, stop, err := startEdgeqWith(origin, redisSrv.Addr(), rest)
	if err != nil {
		return err
	}
	defer stop()
	client := load.NewClient(*concurrency)
	join := func(values url.Values) load.Request {
		return load.Request{Method: "POST", URL: edge + "/_edgeq/assign_queue_pos",
			Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(values.Encode())}
	}

	kinds := []struct {
		name   string
		source func() (load.Source, error)
	}{
		{"join, no check", func() (load.Source, error) {
			return counted(*joins, func(int) load.Request { return join(url.Values{"queue_id": {"plain"}}) }), nil
		}},
		{"join with proof of work", func() (load.Source, error) {
			solved, err := solveMany(client, edge, "checked", *joins, *concurrency)
			if err != nil {
				return nil, err
			}
			return counted(*joins, func(i int) load.Request {
				return join(url.Values{"queue_id": {"checked"}, "pow_challenge": {solved[i].challenge}, "pow_nonce": {solved[i].nonce}})
			}), nil
		}},
	}
	samples := make([]load.Sample, len(kinds))
	cpu := make([]redisCPU, len(kinds))
	for round := 0; round < *rounds; round++ {
		for k, kind := range kinds {
			src, err := kind.source()
			if err != nil {
				return err
			}
			before, err := readRedisCPU(rdb)
			if err != nil {
				return err
			}
			s := load.Run(client, kind.name, src, 200, *concurrency, time.Hour)
			after, _ := readRedisCPU(rdb)
			if s.Errors > 0 {
				return fmt.Errorf("%s: %d joins failed", kind.name, s.Errors)
			}
			samples[k].Name = kind.name
			samples[k].Add(s)
			cpu[k].add(after.minus(before), int64(len(s.Latencies)))
		}
	}
	_, _ = fmt.Fprintf(w, "powjoin: %d rounds of %d joins each, alternating, %d clients; a checked route: %v\n\n", *rounds, *joins, *concurrency, *routeCheck)
	_, _ = fmt.Fprintln(w, "| join | joins/s | p50 | p99 | redis-server CPU per join | joins/s vs no check | Redis CPU vs no check |")
	_, _ = fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for k, s := range samples {
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %s | %s | %.1f µs | %.2fx | %.2fx |\n", s.Name, s.RPS(),
			s.Percentile(0.5).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond),
			cpu[k].perOp(), s.RPS()/samples[0].RPS(), cpu[k].perOp()/cpu[0].perOp())
	}
	for k, kind := range kinds {
		_, _ = fmt.Fprintf(w, "\nRedis commands per %s:\n%s", kind.name, cpu[k].breakdown())
	}
	return nil
}

// counted is a source of n requests, the i-th made by make(i).
func counted(n int, make func(i int) load.Request) load.Source {
	var next atomic.Int64
	return func() (load.Request, bool) {
		i := int(next.Add(1)) - 1
		if i >= n {
			return load.Request{}, false
		}
		return make(i), true
	}
}

type solvedChallenge struct{ challenge, nonce string }

// solveMany fetches n join challenges of queue and solves them.
func solveMany(client *http.Client, edge, queue string, n, concurrency int) ([]solvedChallenge, error) {
	out := make([]solvedChallenge, n)
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				c, err := fetchChallenge(client, edge, queue)
				if err == nil {
					nonce, ok := pow.Solve(context.Background(), c.Challenge, c.Difficulty)
					if !ok {
						err = errors.New("no nonce found")
					}
					out[i] = solvedChallenge{c.Challenge, strconv.FormatUint(nonce, 10)}
				}
				if err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return out, first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

type issuedChallenge struct {
	Challenge  string `json:"challenge"`
	Difficulty int    `json:"difficulty"`
}

func fetchChallenge(client *http.Client, edge, queue string) (issuedChallenge, error) {
	resp, err := client.Get(edge + "/_edgeq/pow_challenge?queue_id=" + url.QueryEscape(queue))
	if err != nil {
		return issuedChallenge{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var c issuedChallenge
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("pow_challenge answered %d", resp.StatusCode)
	}
	return c, json.NewDecoder(resp.Body).Decode(&c)
}
