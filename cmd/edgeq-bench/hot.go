package main

// A hot product at the limit of one Redis core (edgeq-bench hot): in a drop every buyer of
// the one hot product lands on the Redis shard that holds it, so that shard's CPU per admission is
// the ceiling of the whole deployment, however many replicas run. The figures are ratios measured
// together on one machine: Redis CPU per admission against the least a reservation can cost the same
// redis-server, and admissions against the same POST passed through.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/vocab"
)

// floorScript is the least a reservation can cost Redis: one script call that takes a unit and
// counts the buyer.
const floorScript = `redis.call('DECRBY', KEYS[1], '1') return redis.call('HINCRBY', KEYS[2], ARGV[1], '1')`

// hotAuctionsPerThread is the number of auctions each wrk thread bids on (hot-<thread>-<n>): a bid is
// accepted only above the last, so each wrk connection's bids follow each other on an auction of its
// own thread, and every bid can be accepted.
const hotAuctionsPerThread = 32

func hotBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("hot", flag.ContinueOnError)
	wl := wrkLoadFlags(fs, "alternating rounds; the figures are each measurement's median")
	floorClients := fs.Int("floor-clients", 32, "redis-benchmark clients of the floor")
	floorRequests := fs.Int("floor-requests", 200000, "redis-benchmark requests of each floor round")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of edgeq (this process, with the origin) during the first pinned stock round (the first shared one with -redis-cpu -1) to this file, and of the POST passed through in the round before it to this file + \".passthrough\"")
	pinCPU := fs.Int("redis-cpu", 1, "after the shared rounds, pin redis-server to this CPU and everything else to the others for the pinned rounds; -1: no pinned rounds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if wl.rounds < 1 || wl.threads < 1 || wl.connections < wl.threads || *floorClients < 1 || *floorRequests < 1 {
		return errors.New("rounds, threads, floor-clients and floor-requests must be positive, connections at least threads")
	}
	for _, tool := range []string{"wrk", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the hot benchmark needs %s (Debian: apt-get install wrk redis-tools)", tool)
		}
	}
	dir, err := os.MkdirTemp("", "edgeq-hot-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the hot benchmark needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer func() { _ = rdb.Close() }()
	origin, err := serve(http.HandlerFunc(tableOrigin))
	if err != nil {
		return err
	}
	// The bids go through an edgeq of their own (another key prefix, the same redis-server): the
	// stock rounds' event worker then reads the hot product's streams alone, as in a sale of one
	// product, not the auctions' too.
	edge, _, stop, err := startEdgeqAdmin(origin, redisSrv.Addr(), hotStockConfig)
	if err != nil {
		return err
	}
	defer stop()
	bidEdge, _, stopBids, err := startEdgeqPrefixed(origin, redisSrv.Addr(), "edgeqbid", hotBidConfig(wl.threads))
	if err != nil {
		return err
	}
	defer stopBids()

	postScript := filepath.Join(dir, "post.lua")
	bidScript := filepath.Join(dir, "bid.lua")
	for path, text := range map[string]string{postScript: wrkPostScript, bidScript: wrkHotBidScript} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	var bidStreams []string
	for t := 1; t <= wl.threads; t++ {
		for n := range hotAuctionsPerThread {
			bidStreams = append(bidStreams, fmt.Sprintf("edgeqbid:{a:hot-%d-%d}:events", t, n))
		}
	}
	post := wrkTarget{name: "POST passed through", url: edge + "/plain/hot", script: postScript, body: "quantity=1"}
	stock := wrkTarget{name: "stock admission", url: edge + "/checkout/hot", script: postScript, body: "quantity=1", store: true,
		drain: productStreams("edgeq", "hot")}
	bid := wrkTarget{name: "bid admission", url: bidEdge + "/", script: bidScript, store: true, drain: bidStreams}

	// Warm-up: connections, scripts loaded, the streams' groups made.
	for _, t := range []wrkTarget{post, stock, bid} {
		if _, err := runWrk(t, wl.threads, wl.connections, time.Second, rdb, 0); err != nil {
			return fmt.Errorf("warm-up, %s: %w", t.name, err)
		}
	}
	var floors []float64
	shared := map[string][]wrkResult{}
	for round := 1; round <= wl.rounds; round++ {
		f, err := redisFloor(rdb, redisSrv.Addr(), *floorClients, *floorRequests)
		if err != nil {
			return err
		}
		floors = append(floors, f)
		for _, t := range []wrkTarget{post, stock, bid} {
			fmt.Fprintf(os.Stderr, "shared round %d: %s\n", round, t.name)
			stopProfile, err := profileRound(hotProfile(*cpuProfile, t, stock, post, *pinCPU < 0 && round == 1))
			if err != nil {
				return err
			}
			r, err := runWrk(t, wl.threads, wl.connections, wl.duration, rdb, round)
			stopProfile()
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			shared[t.name] = append(shared[t.name], r)
		}
	}
	pinned := map[string][]wrkResult{}
	where, err := pinnedWhere(redisSrv.Pid(), *pinCPU, "", "redis-server on CPU %d, edgeq, the origin and wrk on CPU %s")
	if err != nil {
		return err
	}
	if *pinCPU >= 0 {
		for round := 1; round <= wl.rounds; round++ {
			for _, t := range []wrkTarget{post, stock} {
				fmt.Fprintf(os.Stderr, "pinned round %d: %s\n", round, t.name)
				stopProfile, err := profileRound(hotProfile(*cpuProfile, t, stock, post, round == 1))
				if err != nil {
					return err
				}
				r, err := runWrk(t, wl.threads, wl.connections, wl.duration, rdb, wl.rounds+round)
				stopProfile()
				if err != nil {
					return fmt.Errorf("%s (pinned): %w", t.name, err)
				}
				pinned[t.name] = append(pinned[t.name], r)
			}
		}
	}
	writeHot(w, hotFigures{wl: *wl, floors: floors, floorClients: *floorClients, shared: shared, pinned: pinned, where: where})
	return nil
}

// hotProfile says where a round's CPU profile goes (the stock round's to path, the POST's beside it)
// and whether this round of target t is profiled at all.
func hotProfile(path string, t, stock, post wrkTarget, first bool) (string, bool) {
	switch {
	case !first:
		return "", false
	case t.name == stock.name:
		return path, true
	case t.name == post.name && path != "":
		return path + ".passthrough", true
	}
	return "", false
}

// profileRound starts a CPU profile into path when path is set and this round is the one; the
// returned func stops it.
func profileRound(path string, this bool) (func(), error) {
	if path == "" || !this {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// hotStockConfig is the stock rounds' edgeq: the hot product (stock for every round) and the routes
// wrk loads.
const hotStockConfig = `
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
products:
  - {id: hot, stock: 1000000000, per_user_limit: 1, name: "Hot item"}
routes:
  - {name: plain, match: "POST /plain/{product}"}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`

// hotBidConfig is the bid rounds' edgeq: the auctions wrk bids on.
func hotBidConfig(threads int) string {
	var b strings.Builder
	b.WriteString("limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}\nauctions:\n")
	ends := vocab.FormatTime(time.Now().Add(24 * time.Hour))
	for t := 1; t <= threads; t++ {
		for n := range hotAuctionsPerThread {
			fmt.Fprintf(&b, "  - {id: hot-%d-%d, starting_price: \"1.00\", min_increment: \"0.01\", ends_at: %q}\n", t, n, ends)
		}
	}
	b.WriteString(`routes:
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-User"}
`)
	return b.String()
}

// wrkHotBidScript bids on the auctions hot-<thread>-<n % 32> in turn, each bid one cent above the
// thread's last on that auction (rounds start higher: the round is the script's argument), by a new
// bidder each time.
const wrkHotBidScript = wrkThreadIDs + `local n, round = 0, 0
function init(args)
  round = tonumber(string.match(args[1] or "", "%d+") or "0")
end
function request()
  n = n + 1
  local cents = 100 + round * 100000000 + n
  local body = string.format("amount=%d.%02d", math.floor(cents / 100), cents % 100)
  local path = "/auctions/hot-" .. tid .. "-" .. (n % 32) .. "/bid"
  return wrk.format("POST", path, {["Content-Type"] = "application/x-www-form-urlencoded", ["X-User"] = "b" .. round .. "-" .. tid .. "-" .. n}, body)
end
`

var benchmarkRPS = regexp.MustCompile(`([0-9.]+) requests per second`)

// redisFloor loads the minimal reservation script with redis-benchmark (unpipelined, clients
// connections, a new buyer field per call) and returns the redis-server's CPU per call, in µs.
func redisFloor(rdb *redis.Client, addr string, clients, requests int) (float64, error) {
	ctx := context.Background()
	sha, err := rdb.ScriptLoad(ctx, floorScript).Result()
	if err != nil {
		return 0, err
	}
	if err := rdb.Set(ctx, "floor:{f}:stock", 1<<40, 0).Err(); err != nil {
		return 0, err
	}
	before, err := readRedisCPU(rdb)
	if err != nil {
		return 0, err
	}
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-benchmark", "-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(requests),
		"-r", "100000000", "-q", "EVALSHA", sha, "2", "floor:{f}:stock", "floor:{f}:buyers", "u:__rand_int__").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %v\n%s", err, out)
	}
	if benchmarkRPS.Find(out) == nil {
		return 0, fmt.Errorf("unreadable redis-benchmark output:\n%s", out)
	}
	after, err := readRedisCPU(rdb)
	if err != nil {
		return 0, err
	}
	d := after.minus(before)
	if calls := d.calls["evalsha"]; calls < int64(requests) {
		return 0, fmt.Errorf("redis-benchmark made %d calls of %d", calls, requests)
	}
	rdb.Del(ctx, "floor:{f}:buyers")
	d.ops = int64(requests)
	return d.perOp(), nil
}

type hotFigures struct {
	wl             wrkLoad
	floors         []float64
	floorClients   int
	shared, pinned map[string][]wrkResult
	where          string
}

// median is the round with the median requests/s.
func median(rs []wrkResult) wrkResult {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b wrkResult) int { return int(a.rps - b.rps) })
	return rs[len(rs)/2]
}

// medianOf is the median of xs.
func medianOf(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// p99 reads wrk's p99 ("12.34ms").
func (r wrkResult) p99d() time.Duration { d, _ := time.ParseDuration(r.p99); return d }

// accepted is the share of a round's requests answered 2xx.
func (r wrkResult) accepted() float64 { return 1 - r.non2xx }

// perAccepted is the round's Redis CPU per request answered 2xx, in µs.
func (r wrkResult) perAccepted() float64 {
	if r.accepted() <= 0 {
		return 0
	}
	return r.redisCPU / r.accepted()
}

func writeHot(w io.Writer, f hotFigures) {
	floor := medianOf(f.floors)
	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "load: wrk -t%d -c%d -d%s, %d alternating rounds (medians), one product, a new buyer per request; bids on %d auctions (%d per wrk thread), each bid one cent above the last\n",
		f.wl.threads, f.wl.connections, f.wl.duration, f.wl.rounds, f.wl.threads*hotAuctionsPerThread, hotAuctionsPerThread)
	rounds := make([]string, len(f.floors))
	for i, x := range f.floors {
		rounds[i] = fmt.Sprintf("%.1f", x)
	}
	_, _ = fmt.Fprintf(w, "floor: one EVALSHA of DECRBY + HINCRBY, unpipelined, redis-benchmark -c %d: %.1f µs of Redis CPU per call (rounds: %s µs)\n\n",
		f.floorClients, floor, strings.Join(rounds, ", "))

	post, stock, bid := median(f.shared["POST passed through"]), median(f.shared["stock admission"]), median(f.shared["bid admission"])
	stockCPU := medianOf(mapped(f.shared["stock admission"], func(r wrkResult) float64 { return r.redisCPU }))
	bidCPU := medianOf(mapped(f.shared["bid admission"], wrkResult.perAccepted))
	_, _ = fmt.Fprintln(w, "| measurement | requests/s | vs the POST | p50 | p99 | p99 vs the POST | Redis CPU per admission | vs floor | admissions/s per Redis core |")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(name string, r, ref wrkResult, cpu float64) {
		cpuText, vsFloor, perCore := "—", "—", "—"
		if cpu > 0 {
			cpuText, vsFloor, perCore = fmt.Sprintf("%.1f µs", cpu), fmt.Sprintf("%.2fx", cpu/floor), fmt.Sprintf("%.0f", 1e6/cpu)
		}
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %.2fx | %s | %s | %.2fx | %s | %s | %s |\n", name, r.rps, r.rps/ref.rps, r.p50, r.p99,
			float64(r.p99d())/float64(ref.p99d()), cpuText, vsFloor, perCore)
	}
	row("POST passed through, sharing the CPUs", post, post, 0)
	row("stock admission, sharing the CPUs", stock, post, stockCPU)
	row(fmt.Sprintf("bid admission, sharing the CPUs (%.0f%% accepted; CPU per accepted bid)", 100*bid.accepted()), bid, post, bidCPU)
	var pinnedRatio float64
	if len(f.pinned) > 0 {
		ppost, pstock := median(f.pinned["POST passed through"]), median(f.pinned["stock admission"])
		pinnedRatio = pstock.rps / ppost.rps
		row("POST passed through, Redis on a CPU of its own", ppost, ppost, 0)
		row("stock admission, Redis on a CPU of its own", pstock, ppost,
			medianOf(mapped(f.pinned["stock admission"], func(r wrkResult) float64 { return r.redisCPU })))
		_, _ = fmt.Fprintf(w, "\npinned: %s\n", f.where)
	}
	_, _ = fmt.Fprintf(w, "\nper stock admission, by command: its calls and their µs, per admission (median round; a script's time includes the commands it calls):\n%s", perOpBreakdown(stock))
	_, _ = fmt.Fprintf(w, "\nper accepted bid, by command: its calls and their µs, per accepted bid (median round):\n%s", perOpBreakdown(bid))
	_, _ = fmt.Fprintln(w, "\nthe hot-product targets:")
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	_, _ = fmt.Fprintf(w, "  Redis CPU per stock admission ≤ 2.0x the floor: %.2fx, %s\n", stockCPU/floor, check(stockCPU <= 2*floor))
	if pinnedRatio > 0 {
		_, _ = fmt.Fprintf(w, "  stock admission ≥ 0.8x the POST with Redis on a CPU of its own: %.2fx, %s\n", pinnedRatio, check(pinnedRatio >= 0.8))
	}
	p99 := float64(stock.p99d()) / float64(post.p99d())
	_, _ = fmt.Fprintf(w, "  p99 of stock admission ≤ 1.3x the POST's, sharing the CPUs: %.2fx, %s\n", p99, check(p99 <= 1.3))
	_, _ = fmt.Fprintf(w, "  Redis CPU per accepted bid ≤ 2.0x the floor: %.2fx, %s\n", bidCPU/floor, check(bidCPU <= 2*floor))
}

func mapped[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// perOpBreakdown is a round's commandstats per admitted request.
func perOpBreakdown(r wrkResult) string {
	c := r.cpu
	c.ops = int64(float64(r.requests) * r.accepted())
	return c.breakdown()
}
