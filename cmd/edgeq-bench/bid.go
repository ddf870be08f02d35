package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/admission/bid"
	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/vocab"
)

// bidBench measures bid admission and the auction reads through edgeq at a busy auction's concurrency.
// That load, all at once: 1,000 bidders each bidding every second (its normal 1,000 bids/s), 5,000
// users polling the highest bid and 1,000 reading the history every 2 s; the latency targets (p95)
// apply to this. Then the worst case, bursts of the same numbers acting in the same instant; a
// closed-loop bid load for the rate; and bid.lua called directly on the same redis-server, in one run.
func bidBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("bid", flag.ContinueOnError)
	bidders := fs.Int("bidders", 1000, "bidders in each bid burst")
	readers := fs.Int("readers", 5000, "readers in each highest-bid burst")
	historyReaders := fs.Int("history", 1000, "readers in each history burst")
	rounds := fs.Int("rounds", 5, "bursts of each kind")
	bidEvery := fs.Duration("bid-every", time.Second, "how often each bidder bids in the steady load")
	pollEvery := fs.Duration("poll-every", 2*time.Second, "how often each reader polls in the steady load")
	steady := fs.Duration("steady", 20*time.Second, "time of the steady load")
	duration := fs.Duration("duration", 5*time.Second, "time of the closed-loop bid load and of the raw script load")
	concurrency := fs.Int("concurrency", 64, "clients of the sustained and raw loads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bidders < 1 || *readers < 1 || *historyReaders < 1 || *rounds < 1 || *concurrency < 1 || *duration <= 0 ||
		*bidEvery <= 0 || *pollEvery <= 0 || *steady <= 0 {
		return fmt.Errorf("every count and the duration must be positive")
	}
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the bid benchmark needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("bid received"))
	}))
	if err != nil {
		return err
	}
	edge, stop, err := startBidEdgeq(origin, redisSrv.Addr())
	if err != nil {
		return err
	}
	defer stop()

	// Every bid offers one cent more than the one before it was made, so most are accepted and the
	// ones that lose a race are refused as too low; both are admission decisions and are measured.
	var cents atomic.Int64
	cents.Store(100)
	bid := func() load.Request {
		c := cents.Add(1)
		return load.Request{Method: "POST", URL: edge + "/auctions/bench/bid",
			Header: http.Header{"X-User": {"bidder-" + strconv.FormatInt(c%5000, 10)}, "Content-Type": {"application/x-www-form-urlencoded"}},
			Body:   []byte("amount=" + money.Format(c))}
	}
	answered := func(status int) bool { return status == 200 || status == 409 }
	ok := func(status int) bool { return status == 200 }

	largest := max(*bidders, *readers, *historyReaders)
	client := load.NewClient(largest)
	burst := func(name string, n int, next func(i int) load.Request, accept func(int) bool) load.Sample {
		total := load.Sample{Name: name}
		for range *rounds {
			reqs := make([]load.Request, n)
			for i := range reqs {
				reqs[i] = next(i)
			}
			total.Add(load.Burst(client, name, reqs, accept))
		}
		return total
	}
	// Warm-up: connections for the largest burst, scripts loaded, snapshots made.
	load.Burst(client, "warm-up", slices.Repeat([]load.Request{{Method: "GET", URL: edge + "/_edgeq/auctions/bench/highest-bid"}}, largest), ok)
	burst("warm-up", 100, func(int) load.Request { return bid() }, answered)

	highestReq := func(int) load.Request {
		return load.Request{Method: "GET", URL: edge + "/_edgeq/auctions/bench/highest-bid"}
	}
	historyReq := func(i int) load.Request {
		return load.Request{Method: "GET", URL: fmt.Sprintf("%s/_edgeq/auctions/bench/bids?page=%d&page_size=20", edge, 1+i%5)}
	}

	// The target load: bidders and readers together.
	var steadyBids, steadyHighest, steadyHistory load.Sample
	var wg sync.WaitGroup
	wg.Go(func() {
		steadyBids = load.Poll(client, fmt.Sprintf("bid, %d bidders every %s", *bidders, *bidEvery), *bidders, *bidEvery, *steady,
			func(int) load.Request { return bid() }, answered)
	})
	wg.Go(func() {
		steadyHighest = load.Poll(client, fmt.Sprintf("highest bid, %d readers every %s", *readers, *pollEvery), *readers, *pollEvery, *steady,
			highestReq, ok)
	})
	wg.Go(func() {
		steadyHistory = load.Poll(client, fmt.Sprintf("history, %d readers every %s", *historyReaders, *pollEvery), *historyReaders, *pollEvery, *steady,
			historyReq, ok)
	})
	wg.Wait()

	// The worst case: everyone in the same instant.
	bids := burst(fmt.Sprintf("bid, %d at once", *bidders), *bidders, func(int) load.Request { return bid() }, answered)
	highest := burst(fmt.Sprintf("highest bid, %d at once", *readers), *readers, highestReq, ok)
	history := burst(fmt.Sprintf("history, %d at once", *historyReaders), *historyReaders, historyReq, ok)
	sustained := load.RunOK(load.NewClient(*concurrency), "bid, closed loop", func() (load.Request, bool) { return bid(), true },
		answered, *concurrency, *duration)

	raw, err := rawBids(redisSrv.Addr(), *concurrency, *duration)
	if err != nil {
		return err
	}

	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "redis-server on loopback, one auction; the load generator, edgeq, the origin and Redis share the machine\n\n")
	samples := []load.Sample{steadyBids, steadyHighest, steadyHistory, bids, highest, history, sustained, raw}
	for _, s := range samples {
		_, _ = fmt.Fprintln(w, s)
	}
	_, _ = fmt.Fprintln(w)
	_, _ = fmt.Fprintf(w, "| measurement | answers | per second | p50 | p95 | p99 | target (p95) |\n")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	targets := []string{"< 100 ms", "< 50 ms", "< 200 ms", "", "", "", "", ""}
	for i, s := range samples {
		_, _ = fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %s |\n", s.Name, len(s.Latencies), s.RPS(),
			s.Percentile(0.5).Round(time.Microsecond), s.Percentile(0.95).Round(time.Microsecond),
			s.Percentile(0.99).Round(time.Microsecond), targets[i])
	}
	_, _ = fmt.Fprintf(w, "\nsteady: %s together; bursts: %d rounds of simultaneous requests; closed loop and bid.lua alone: %d clients for %s\n",
		*steady, *rounds, *concurrency, *duration)
	failed := 0
	for _, s := range samples {
		failed += s.Errors
	}
	if failed > 0 {
		return fmt.Errorf("%d requests failed", failed)
	}
	return nil
}

func startBidEdgeq(origin, redisAddr string) (string, func(), error) {
	return startEdgeqWith(origin, redisAddr, fmt.Sprintf(`
auctions:
  - {id: bench, starting_price: "1.00", min_increment: "0.01", ends_at: %q}
routes:
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-User"}
`, vocab.FormatTime(time.Now().Add(24*time.Hour))))
}

// rawBids calls bid.lua directly from concurrency goroutines for duration, each bid a cent above the
// one before it.
func rawBids(addr string, concurrency int, duration time.Duration) (load.Sample, error) {
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: concurrency * 2})
	defer func() { _ = client.Close() }()
	st := store.Wrap(client, store.Keys{Prefix: "edgeq"})
	ctx := context.Background()
	svc := admission.New(admission.Options{Store: st}) // bid.lua alone, with edgeq's defaults
	if err := svc.Apply(ctx, auctions.With(&config.Config{}, auctions.Auction{ID: "raw", StartingPrice: "1.00", MinIncrement: "0.01",
		EndsAt: time.Now().Add(time.Hour)}), nil); err != nil {
		return load.Sample{}, err
	}
	var next atomic.Int64
	next.Store(1 << 40)
	return load.Loop("bid.lua alone", concurrency, duration, func(client int) error {
		n := next.Add(1)
		code, err := bid.Place(ctx, svc, "raw", "raw-"+strconv.Itoa(client), strconv.FormatInt(n, 10), n)
		if err == nil && code > 1 { // 1 (too low) is a race lost to another client: an answer like any other
			err = fmt.Errorf("bid.lua answered %d", code)
		}
		return err
	}), nil
}
