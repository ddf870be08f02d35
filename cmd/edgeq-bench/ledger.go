package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/testutil/pgserver"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

// ledgerBench measures the ledger: stock admissions through an edgeq with the ledger on
// beside one with it off (same redis-server, alternating rounds), how far the ledger lags during the
// load and how soon it has caught up after it, and how fast it catches up after PostgreSQL was
// stopped for -outage while admissions went on.
func ledgerBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	duration, concurrency, rounds := roundFlags(fs)
	// The outage's backlog must stay under a stream's length bound (100,000 entries, two per
	// admission with the ledger on): what goes beyond it is trimmed before the ledger reads it.
	outage := fs.Duration("outage", 4*time.Second, "how long PostgreSQL is stopped while admissions go on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the ledger benchmark needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	pg, err := pgserver.Start()
	if err != nil {
		return fmt.Errorf("the ledger benchmark needs PostgreSQL: %w", err)
	}
	defer pg.Close()
	db, err := pg.NewDatabase(context.Background())
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
	// A product per round and one for the outage: each stream stays under its length bound (100,000
	// entries), as a real product's does (a product has at most its stock's worth of admissions). The
	// two edgeqs have key prefixes of their own: the ledger worker of one never sees the other's events.
	routes := func() string {
		var b strings.Builder
		b.WriteString("products:\n")
		for i := 0; i <= *rounds; i++ {
			fmt.Fprintf(&b, "  - {id: p%d, stock: 1000000000, per_user_limit: 1, name: \"Bench item\"}\n", i)
		}
		b.WriteString(`routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`)
		return b.String()
	}
	on, onAdmin, stopOn, err := startEdgeqPrefixed(origin, redisSrv.Addr(), "led", fmt.Sprintf("ledger: {postgres_url: %q}\n", db)+routes())
	if err != nil {
		return err
	}
	defer stopOn()
	off, _, stopOff, err := startEdgeqPrefixed(origin, redisSrv.Addr(), "plain", routes())
	if err != nil {
		return err
	}
	defer stopOff()

	var users atomic.Int64
	post := func(edge, product string) func() (load.Request, bool) {
		return func() (load.Request, bool) {
			u := strconv.FormatInt(users.Add(1), 10)
			return load.Request{Method: "POST", URL: edge + "/checkout/" + product, Header: http.Header{"X-User": {"buyer-" + u}}}, true
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer func() { _ = rc.Close() }()
	streams := func(prefix string, i int) []string { return productStreams(prefix, fmt.Sprintf("p%d", i)) }
	client := load.NewClient(*concurrency)
	load.Run(client, "warm-up", post(on, "p0"), 200, *concurrency, time.Second)
	load.Run(client, "warm-up", post(off, "p0"), 200, *concurrency, time.Second)

	var without, with load.Sample
	var cpuOff, cpuOn redisCPU
	var lags []float64
	var worstCatchUp time.Duration
	for round := 0; round < *rounds; round++ {
		product := fmt.Sprintf("p%d", round)
		ledStreams, plainStreams := streams("led", round), streams("plain", round)
		if _, err := drained(rc, 5*time.Minute, append(streams("led", 0), streams("plain", 0)...)...); err != nil {
			return err
		}
		before, err := readRedisCPU(rc)
		if err != nil {
			return err
		}
		s := load.Run(client, "stock admission, ledger off", post(off, product), 200, *concurrency, *duration)
		without.Add(s)
		if _, err := drained(rc, 5*time.Minute, plainStreams...); err != nil {
			return err
		}
		after, err := readRedisCPU(rc)
		if err != nil {
			return err
		}
		cpuOff.add(after.minus(before), int64(len(s.Latencies)))
		stop := sampleLag(onAdmin, &lags)
		s = load.Run(client, "stock admission, ledger on", post(on, product), 200, *concurrency, *duration)
		with.Add(s)
		caught, err := drained(rc, 5*time.Minute, ledStreams...)
		stop()
		if err != nil {
			return err
		}
		worstCatchUp = max(worstCatchUp, caught)
		final, err := readRedisCPU(rc)
		if err != nil {
			return err
		}
		cpuOn.add(final.minus(after), int64(len(s.Latencies)))
	}
	without.Name, with.Name = "stock admission, ledger off", "stock admission, ledger on"

	// An outage: PostgreSQL stopped while admissions go on, then started; the backlog is timed.
	pg.Stop()
	ledStreams := streams("led", *rounds)
	during := load.Run(client, "admissions while PostgreSQL is down", post(on, fmt.Sprintf("p%d", *rounds)), 200, *concurrency, *outage)
	backlog, err := ledgerBacklog(rc, ledStreams...)
	if err != nil {
		return err
	}
	if backlog >= 95_000 {
		return fmt.Errorf("%d stream entries waited for the ledger: the stream's bound (100,000) trims what it has not read; use a shorter -outage", backlog)
	}
	if err := pg.Restart(); err != nil {
		return err
	}
	restarted := time.Now()
	caughtUp, err := drained(rc, 10*time.Minute, ledStreams...)
	if err != nil {
		return err
	}
	rows, err := countRows(db)
	if err != nil {
		return err
	}

	slices.Sort(lags)
	pct := func(q float64) float64 {
		if len(lags) == 0 {
			return 0
		}
		return lags[min(len(lags)-1, int(q*float64(len(lags))))]
	}
	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "load: %d concurrent clients, %d alternating rounds of %s, redis-server and PostgreSQL (fsync off) on loopback, a new buyer per request\n\n",
		*concurrency, *rounds, *duration)
	_, _ = fmt.Fprintln(w, "| measurement | admissions/s | vs ledger off | p50 | p99 |")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, s := range []load.Sample{without, with, during} {
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %.2fx | %s | %s |\n", s.Name, s.RPS(), s.RPS()/without.RPS(),
			s.Percentile(0.5).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond))
	}
	_, _ = fmt.Fprintf(w, "\nRedis CPU per stock admission (request path and workers, until every group caught up): ledger off %.1f µs, ledger on %.1f µs\n",
		cpuOff.perOp(), cpuOn.perOp())
	_, _ = fmt.Fprintf(w, "ledger lag during the load (edgeq_ledger_lag_seconds every 100 ms): p50 %.2f s, p99 %.2f s, max %.2f s\n", pct(0.5), pct(0.99), pct(1))
	_, _ = fmt.Fprintf(w, "ledger caught up at most %s after a round's last admission\n", worstCatchUp.Round(10*time.Millisecond))
	_, _ = fmt.Fprintf(w, "after %s without PostgreSQL: %d stream entries waiting, written in %s once it was back (%.0f entries/s; %s after the restart)\n",
		*outage, backlog, caughtUp.Round(10*time.Millisecond), float64(backlog)/caughtUp.Seconds(), time.Since(restarted).Round(10*time.Millisecond))
	_, _ = fmt.Fprintf(w, "ledger rows: %d admissions (each written twice: admitted, then committed)\n", rows)
	return nil
}

// sampleLag reads edgeq_ledger_lag_seconds from admin every 100 ms into lags until stop is called.
func sampleLag(admin string, lags *[]float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := http.Get(admin + "/metrics")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			for line := range strings.SplitSeq(string(body), "\n") {
				if v, ok := strings.CutPrefix(line, "edgeq_ledger_lag_seconds "); ok {
					if f, err := strconv.ParseFloat(v, 64); err == nil {
						*lags = append(*lags, f)
					}
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// ledgerBacklog is the entries of the streams that the ledger's group has not acknowledged (an
// admitted entry names every purchase of one reserve.lua call).
func ledgerBacklog(c *redis.Client, streams ...string) (int64, error) {
	var total int64
	for _, stream := range streams {
		groups, err := c.XInfoGroups(context.Background(), stream).Result()
		if err != nil {
			return 0, err
		}
		found := false
		for _, g := range groups {
			if g.Name == "edgeq-ledger" {
				total, found = total+g.Pending+g.Lag, true
			}
		}
		if !found {
			return 0, fmt.Errorf("%s has no ledger group", stream)
		}
	}
	return total, nil
}

func countRows(url string) (int64, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(ctx) }()
	var n int64
	err = conn.QueryRow(ctx, "SELECT count(*) FROM edgeq_admissions").Scan(&n)
	return n, err
}
