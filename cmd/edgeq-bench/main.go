// Command edgeq-bench measures edgeq against baselines in one run, so the figures compare like with
// like on whatever machine runs it.
//
//	edgeq-bench overhead [-duration 10s] [-rounds 5] [-concurrency 32]
//	edgeq-bench waitroom [-waiters 100000] [-tokens 20000] [-duration 5s] [-concurrency 32]
//	edgeq-bench admission [-duration 4s] [-rounds 3] [-concurrency 64] [-redis-cpu N] [-cpuprofile FILE] [-graphql]
//	edgeq-bench replicas [-duration 4s] [-rounds 3] [-concurrency 64] [-delay 0]
//	edgeq-bench bid [-bidders 1000] [-readers 5000] [-history 1000] [-bid-every 1s] [-poll-every 2s] [-steady 20s] [-rounds 5] [-duration 5s] [-concurrency 64]
//	edgeq-bench chaos [-duration 60s] [-replicas 3] [-seed N] [-stock 3000] [-buyers 24] [-nemesis all|pause]
//	edgeq-bench crowd [-url http://127.0.0.1:8080] [-queue drop] [-size 12] [-sku jersey] [-page /products/3] [-poll 4s] [-browse 5s] [-pause 3s] [-leave 0.25] [-seed 1] [-prefix /_edgeq]
//
// overhead: the same origin measured directly, through a bare httputil.ReverseProxy, and through edgeq
// (pass-through, a plain route, a route through the gate seam), plus a bare proxy with pooled copy
// buffers as edgeq has, printing requests/s and latency
// percentiles for each and the ratio edgeq / bare proxy.
//
// waitroom: joins and token issuance per second, status polling with many waiters and the Redis
// commands it costs, Redis memory per waiting visitor, and a gated GET with a valid token against a
// bare proxy, on a private redis-server.
//
// admission: stock admissions per second and their latency through edgeq, beside the same POST
// passed through and reserve.lua called directly, on a private redis-server (-redis-cpu N: pinned to
// CPU N, this process to the others, as Redis on a core of its own). With -graphql: stock admission
// with a GraphQL body (a graphql: route) beside the same admission with a plain JSON body.
//
// replicas: stock admissions with redis.wait_replicas 1 beside 0, on one master with one replica (on
// loopback, or behind a proxy adding -delay each way): admissions/s, latency, Redis CPU per admission.
//
// chaos: not a benchmark but the standing chaos run (docs/reliability.md): edgeq replicas, Redis with
// Sentinel, a recording shop and buyers under a nemesis that stops, kills and restarts replicas, kills
// the Redis master, cuts links and slows the shop; then the invariants, exit 1 when one does not hold.
//
// crowd: not a benchmark but the demo's shoppers (make demo): -size simulated shoppers against a
// running edgeq's public API, each as a browser on the waiting page and the shop's script would be
// (its own cookies; joins, polls status every 4 s, takes its token, looks at a product page, buys one
// unit through the cart API and comes back as a new shopper; one in four leaves the line), politely
// (Retry-After, back-off), with a summary line every 10 s, until SIGINT or SIGTERM.
//
// bid: latency of bids, highest-bid reads and history reads through edgeq under a busy auction's load
// (1,000 bidders, 5,000 and 1,000 pollers, together) and in bursts of as many simultaneous visitors,
// a closed-loop bid rate, and bid.lua called directly.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "overhead":
		err = overhead(os.Args[2:], os.Stdout)
	case "waitroom":
		err = waitroomBench(os.Args[2:], os.Stdout)
	case "admission":
		err = admissionBench(os.Args[2:], os.Stdout)
	case "bid":
		err = bidBench(os.Args[2:], os.Stdout)
	case "table":
		err = tableBench(os.Args[2:], os.Stdout)
	case "hot":
		err = hotBench(os.Args[2:], os.Stdout)
	case "ledger":
		err = ledgerBench(os.Args[2:], os.Stdout)
	case "replicas":
		err = replicasBench(os.Args[2:], os.Stdout)
	case "bytes":
		err = bytesBench(os.Args[2:], os.Stdout)
	case "soak":
		err = soakBench(os.Args[2:], os.Stdout)
	case "chaos":
		err = chaosBench(os.Args[2:], os.Stdout)
	case "chaos-replica":
		err = chaosReplicaMain(os.Args[2:])
	case "crowd":
		err = crowdMain(os.Args[2:], os.Stdout)
	case "powjoin":
		err = powJoinBench(os.Args[2:], os.Stdout)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgeq-bench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  edgeq-bench overhead [-duration 10s] [-rounds 5] [-concurrency 32]
  edgeq-bench waitroom [-waiters 100000] [-tokens 20000] [-duration 5s] [-concurrency 32]
  edgeq-bench admission [-duration 4s] [-rounds 3] [-concurrency 64] [-redis-cpu N] [-cpuprofile FILE] [-graphql]
  edgeq-bench ledger [-duration 4s] [-rounds 3] [-concurrency 64] [-outage 4s]   (needs redis-server and PostgreSQL)
  edgeq-bench replicas [-duration 4s] [-rounds 3] [-concurrency 64] [-delay 0]   (redis.wait_replicas 1 beside 0, a local replica)
  edgeq-bench table [-duration 4s] [-rounds 3] [-connections 64] [-threads 2] [-only REGEXP] [-cpuprofile FILE]   (needs wrk; adds nginx and caddy, plain and over TLS, when installed)
  edgeq-bench hot [-duration 4s] [-rounds 3] [-connections 64] [-threads 2] [-floor-clients 32] [-redis-cpu 1]   (needs wrk and redis-benchmark)
  edgeq-bench bytes [-admissions 200000] [-warmup 20000] [-connections 32]   (bytes of Redis per admission; needs redis-server)
  edgeq-bench soak [-duration 20m] [-retention 3m] [-rate 600] [-joins 100]   (Redis memory, RSS and p99s per minute; needs redis-server)
  edgeq-bench powjoin [-rounds 4] [-joins 20000] [-concurrency 32] [-route-check]   (a proof-of-work join beside a join with no check; needs redis-server)
  edgeq-bench chaos [-duration 60s] [-replicas 3] [-seed N] [-stock 3000] [-buyers 24] [-nemesis all|pause]   (needs redis-server and redis-sentinel; exit 1 on a violated invariant)
  edgeq-bench crowd [-url http://127.0.0.1:8080] [-queue drop] [-size 12] [-sku jersey] [-page /products/3] [-poll 4s] [-browse 5s] [-pause 3s] [-leave 0.25] [-seed 1] [-prefix /_edgeq]   (the demo's shoppers, until Ctrl-C)
  edgeq-bench bid [-bidders 1000] [-readers 5000] [-history 1000] [-bid-every 1s] [-poll-every 2s] [-steady 20s] [-rounds 5] [-duration 5s] [-concurrency 64]`)
}

// loadFlags are the knobs every scenario shares.
type loadFlags struct {
	duration    time.Duration
	rounds      int
	concurrency int
}

func parseLoadFlags(name string, args []string) (loadFlags, error) {
	var f loadFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "load time per target, split over the rounds")
	fs.IntVar(&f.rounds, "rounds", 5, "rounds; targets take turns in each round so drift hits all alike")
	fs.IntVar(&f.concurrency, "concurrency", 32, "concurrent clients")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.rounds < 1 || f.concurrency < 1 || f.duration <= 0 {
		return f, fmt.Errorf("duration, rounds and concurrency must be positive")
	}
	return f, nil
}

// target is one thing to measure.
type target struct {
	name string
	req  load.Request
}

// measure runs every target for f.duration in total, round-robin over f.rounds rounds.
func measure(f loadFlags, targets []target, want int) []load.Sample {
	client := load.NewClient(f.concurrency)
	samples := make([]load.Sample, len(targets))
	for i, t := range targets {
		samples[i].Name = t.name
		// Warm connections and caches so the first round is not penalised.
		load.Run(client, t.name, load.Fixed(t.req), want, f.concurrency, 200*time.Millisecond)
	}
	per := f.duration / time.Duration(f.rounds)
	for range f.rounds {
		for i, t := range targets {
			samples[i].Add(load.Run(client, t.name, load.Fixed(t.req), want, f.concurrency, per))
		}
	}
	return samples
}

func machine() string {
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func printTable(w io.Writer, f loadFlags, samples []load.Sample) {
	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "load: %d concurrent clients, %s per target in %d rounds, client and servers in one process on loopback\n\n",
		f.concurrency, f.duration, f.rounds)
	for _, s := range samples {
		_, _ = fmt.Fprintln(w, s)
	}
	_, _ = fmt.Fprintln(w)
	sampleTable(w, "target", samples)
}

// sampleTable writes samples as a Markdown table, a row each: the heading of the first column (what a
// row measures), the requests a second, and the p50 and p99 latencies.
func sampleTable(w io.Writer, heading string, samples []load.Sample) {
	_, _ = fmt.Fprintf(w, "| %s | requests/s | p50 | p99 |\n", heading)
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, s := range samples {
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %s | %s |\n", s.Name, s.RPS(),
			s.Percentile(0.50).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond))
	}
}

// roundFlags adds the flags of a benchmark of alternating measurement rounds: how long each round
// loads, with how many clients, and how many rounds of each measurement.
func roundFlags(fs *flag.FlagSet) (duration *time.Duration, concurrency, rounds *int) {
	return fs.Duration("duration", 4*time.Second, "load time of each measurement round"),
		fs.Int("concurrency", 64, "concurrent clients"),
		fs.Int("rounds", 3, "alternating rounds of each measurement")
}
