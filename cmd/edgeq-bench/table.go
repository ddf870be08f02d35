package main

// The side-by-side table (edgeq-bench table; docs/benchmarks.md "Side by side"): the fixtures it
// loads (an origin, the join floor, a bare ReverseProxy, edgeq), wrk runs in alternating rounds, and
// the table of the medians. The rows over TLS are in tlsbench.go.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/proxy"
)

// tableBench is the side-by-side table: every path a request can take through edgeq,
// beside the origin alone, a bare httputil.ReverseProxy, and nginx and Caddy when they are installed,
// all loaded by wrk (a separate process) in alternating rounds on the same machine; then a gated GET
// over TLS through edgeq's own TLS listener beside nginx and Caddy terminating TLS. Ratios are the
// point: absolute numbers depend on the machine and on what else it is doing.
func tableBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	wl := wrkLoadFlags(fs, "alternating rounds; the table shows each target's median")
	only := fs.String("only", "", "a regular expression: only the paths whose name matches (bare ReverseProxy and nginx always run, as references, and nginx and Caddy over TLS with any edgeq row over TLS)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (origin, edgeq, bare proxy) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := profileRound(*cpuProfile, true)
	if err != nil {
		return err
	}
	defer stopProfile()
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("the table needs wrk (Debian: apt-get install wrk; nginx and caddy are added to the table when installed)")
	}
	dir, err := os.MkdirTemp("", "edgeq-table-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o755); err != nil { // nginx's workers read their temporary paths here
		return err
	}
	cert, err := writeBenchCert(dir)
	if err != nil {
		return err
	}

	origin, err := serve(http.HandlerFunc(tableOrigin))
	if err != nil {
		return err
	}
	originURL, _ := url.Parse(origin)
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the table needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer func() { _ = rdb.Close() }()
	floorClient := redis.NewClient(&redis.Options{Addr: redisSrv.Addr(), PoolSize: 128})
	defer func() { _ = floorClient.Close() }()
	floor, err := serve(joinFloor(floorClient))
	if err != nil {
		return err
	}
	bare, err := serve(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport: proxy.NewHTTPTransport(config.Default().Origin.Timeout),
		ErrorLog:  log.New(io.Discard, "", 0), // wrk ending a round cancels requests in flight
	})
	if err != nil {
		return err
	}
	edgeURLs, stop, err := startEdgeqServer(origin, redisSrv.Addr(), "edgeq", tableServerYAML(cert),
		fmt.Sprintf(tableConfig, vocab.FormatTime(time.Now().Add(24*time.Hour))))
	if err != nil {
		return err
	}
	defer stop()
	edge := edgeURLs.public
	client := &http.Client{Timeout: 10 * time.Second}
	cookie, err := gateToken(client, edge)
	if err != nil {
		return err
	}
	waiting, err := joinMany(client, edge, "bench_wait", 1, 1)
	if err != nil {
		return err
	}

	postScript := filepath.Join(dir, "post.lua")
	if err := os.WriteFile(postScript, []byte(wrkPostScript), 0o644); err != nil {
		return err
	}
	targets := []wrkTarget{
		{name: "origin alone", url: origin + "/page"},
	}
	notes := []string{}
	var tlsTargets []wrkTarget // after the plain rows, in the same rounds
	if base, stopNginx, err := startNginx(dir, originURL.Host, cert); err == nil {
		defer stopNginx()
		targets = append(targets, wrkTarget{name: nginxPlainRow, url: base.plain + "/page", ref: "nginx"})
		tlsTargets = append(tlsTargets, wrkTarget{name: nginxTLSRow, url: base.tls + "/page", ref: nginxTLSRow, tls: true, plain: nginxPlainRow})
	} else {
		notes = append(notes, "nginx: "+err.Error())
	}
	if base, stopCaddy, err := startCaddy(dir, originURL.Host, cert); err == nil {
		defer stopCaddy()
		targets = append(targets, wrkTarget{name: caddyPlainRow, url: base.plain + "/page"})
		tlsTargets = append(tlsTargets, wrkTarget{name: caddyTLSRow, url: base.tls + "/page", ref: caddyTLSRow, tls: true, plain: caddyPlainRow})
	} else {
		notes = append(notes, "caddy: "+err.Error())
	}
	targets = append(targets,
		wrkTarget{name: "bare httputil.ReverseProxy", url: bare + "/page", ref: "bare"},
		wrkTarget{name: "edgeq pass-through GET", url: edge + "/page"},
		wrkTarget{name: gatedPlainRow, url: edge + "/gated/page", header: "Cookie: " + cookie},
		wrkTarget{name: "edgeq status poll (waiting)", url: edge + "/_edgeq/status/bench_wait/" + waiting[0], store: true},
		wrkTarget{name: "join floor: form, one INCR, JSON and a cookie", url: floor + "/join", script: postScript, body: "queue_id=bench_join", store: true},
		wrkTarget{name: "edgeq join", url: edge + "/_edgeq/assign_queue_pos", script: postScript, body: "queue_id=bench_join", store: true},
		wrkTarget{name: "edgeq POST passed through", url: edge + "/plain/bench", script: postScript, body: "quantity=1"},
		wrkTarget{name: "edgeq stock admission", url: edge + "/checkout/bench", script: postScript, body: "quantity=1", store: true,
			drain: productStreams("edgeq", "bench")},
		wrkTarget{name: "edgeq bid admission (refused: too low)", url: edge + "/auctions/bench/bid", script: postScript, body: "amount=5.00", store: true,
			drain: []string{"edgeq:{a:bench}:events"}},
	)
	targets = append(targets, tlsTargets...)
	targets = append(targets, wrkTarget{name: gatedTLSRow, url: edgeURLs.tls + "/gated/page", header: "Cookie: " + cookie, tls: true, plain: gatedPlainRow})
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return err
		}
		targets = keepTLSReferences(slices.DeleteFunc(targets, func(t wrkTarget) bool { return t.ref == "" && !re.MatchString(t.name) }))
	}
	medians, ref, err := runRounds(targets, *wl, rdb)
	if err != nil {
		return err
	}
	writeWrkTable(w, *wl, targets, medians, ref, notes)
	return nil
}

// tableOrigin is the origin of the table: a 1 KiB page, and a short answer to a POST once its body
// is read.
func tableOrigin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("order confirmed"))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(originBody)
}

// joinFloor is the least a join can cost: parse the form, one INCR, a JSON answer with a
// cookie.
func joinFloor(client *redis.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.PostForm.Get("queue_id") == "" {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		n, err := client.Incr(r.Context(), "floor:"+r.PostForm.Get("queue_id")).Result()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		id := strconv.FormatInt(n, 10)
		http.SetCookie(w, &http.Cookie{Name: "rq", Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"request_id":%q}`, id)
	})
}

// tableConfig is edgeq's configuration for the table (a fmt format: the auction's end, RFC 3339):
// the queues of the gated path, of the status poll (nobody served) and of the join, a product with
// stock for every round, the auction, and the routes the targets load.
const tableConfig = `
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: bench_gate, capacity: 1000000, token_ttl: 1h}
  - {id: bench_wait, capacity: 0}
  - {id: bench_join, capacity: 0}
products:
  - {id: bench, stock: 1000000000, per_user_limit: 1, name: "Bench item"}
auctions:
  - {id: bench, starting_price: "1.00", min_increment: "0.01", ends_at: %q}
routes:
  - {name: gated, match: "GET /gated/", queue: bench_gate}
  - {name: plain, match: "POST /plain/{product}"}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-User"}
`

// wrkLoad is the load of every round of the table.
type wrkLoad struct {
	threads, connections, rounds int
	duration                     time.Duration
}

// wrkLoadFlags defines the flags of a wrk load on fs, roundsUsage saying what the rounds' medians
// are of; the load holds their values once fs is parsed.
func wrkLoadFlags(fs *flag.FlagSet, roundsUsage string) *wrkLoad {
	wl := &wrkLoad{}
	fs.DurationVar(&wl.duration, "duration", 4*time.Second, "wrk duration of each round")
	fs.IntVar(&wl.connections, "connections", 64, "wrk connections")
	fs.IntVar(&wl.threads, "threads", 2, "wrk threads")
	fs.IntVar(&wl.rounds, "rounds", 3, roundsUsage)
	return wl
}

// runRounds loads every target once per round, in the same order each round, and returns each
// target's median round (by requests/s) and the requests/s of the reference rows by ref.
func runRounds(targets []wrkTarget, wl wrkLoad, rdb *redis.Client) ([]wrkResult, map[string]float64, error) {
	results := make([][]wrkResult, len(targets))
	for round := range wl.rounds {
		for i, t := range targets {
			fmt.Fprintf(os.Stderr, "round %d: %s", round+1, t.name)
			r, err := runWrk(t, wl.threads, wl.connections, wl.duration, rdb, round)
			if err != nil {
				fmt.Fprintln(os.Stderr)
				return nil, nil, fmt.Errorf("%s: %w", t.name, err)
			}
			fmt.Fprintf(os.Stderr, ": %.0f/s\n", r.rps)
			results[i] = append(results[i], r)
		}
	}
	medians := make([]wrkResult, len(targets))
	ref := map[string]float64{}
	for i, rs := range results {
		medians[i] = median(rs)
		if targets[i].ref != "" {
			ref[targets[i].ref] = medians[i].rps
		}
	}
	return medians, ref, nil
}

// writeWrkTable writes the table: the machine, the load, a row per target with its ratios to the
// reference rows, then what could not be in it.
func writeWrkTable(w io.Writer, wl wrkLoad, targets []wrkTarget, medians []wrkResult, ref map[string]float64, notes []string) {
	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "load: wrk -t%d -c%d -d%s, %d alternating rounds (medians), 1 KiB origin body; origin, proxies, redis-server and wrk on this machine\n\n",
		wl.threads, wl.connections, wl.duration, wl.rounds)
	_, _ = fmt.Fprintln(w, "| path | requests/s | vs bare ReverseProxy | vs nginx | p50 | p99 | non-2xx | Redis CPU per request |")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for i, m := range medians {
		if targets[i].tls {
			continue // their own table, below
		}
		vsNginx := "—"
		if n := ref["nginx"]; n > 0 {
			vsNginx = fmt.Sprintf("%.2fx", m.rps/n)
		}
		cpu := "—"
		if targets[i].store {
			cpu = fmt.Sprintf("%.1f µs", m.redisCPU)
		}
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %.2fx | %s | %s | %s | %.0f%% | %s |\n", targets[i].name, m.rps, m.rps/ref["bare"], vsNginx,
			m.p50, m.p99, m.non2xx*100, cpu)
	}
	writeTLSTable(w, targets, medians, ref)
	for _, n := range notes {
		_, _ = fmt.Fprintf(w, "\nnot in the table: %s", n)
	}
	_, _ = fmt.Fprintln(w)
}

type wrkTarget struct {
	name, url, header string
	script, body      string   // a POST: wrk script sending body with a new X-User per request
	ref               string   // "bare", "nginx", or nginxTLSRow or caddyTLSRow: a reference row
	tls               bool     // over TLS: in the table of the TLS rows
	plain             string   // a row over TLS: the name of the same path's row without TLS
	store             bool     // report Redis CPU per request
	drain             []string // streams the event worker must have caught up with before Redis CPU is read
}

type wrkResult struct {
	rps, non2xx float64
	requests    int64
	p50, p99    string
	redisCPU    float64  // µs per request
	cpu         redisCPU // what Redis spent over the round, by command
}

// wrkThreadIDs begins a wrk script whose threads know their number: tid, from 1.
const wrkThreadIDs = `
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
`

// wrkPostScript sends form POSTs with a new X-User each time (thread, round and a counter), so every
// admission is a new buyer.
const wrkPostScript = wrkThreadIDs + `local n = 0
local prefix
function init(args)
  prefix = (args[1] or "r") .. "-" .. tostring(tid) .. "-"
end
function request()
  n = n + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/x-www-form-urlencoded", ["X-User"] = prefix .. n}, wrk.body)
end
`

var (
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkRequests = regexp.MustCompile(`(\d+) requests in`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkPercent  = regexp.MustCompile(`(?m)^\s+(50|99)%\s+(\S+)`)
)

func runWrk(t wrkTarget, threads, connections int, d time.Duration, rdb *redis.Client, round int) (wrkResult, error) {
	args := []string{"-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(connections), "-d" + d.String(), "--latency"}
	if t.header != "" {
		args = append(args, "-H", t.header)
	}
	if t.script != "" {
		args = append(args, "-s", bodyScript(t))
	}
	args = append(args, t.url)
	if t.script != "" {
		args = append(args, "--", fmt.Sprintf("round%d", round))
	}
	var before redisCPU
	if t.store {
		var err error
		if before, err = readRedisCPU(rdb); err != nil {
			return wrkResult{}, err
		}
	}
	out, err := exec.Command("wrk", args...).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	text := string(out)
	var r wrkResult
	m := wrkRPS.FindStringSubmatch(text)
	n := wrkRequests.FindStringSubmatch(text)
	if m == nil || n == nil {
		return wrkResult{}, fmt.Errorf("unreadable wrk output:\n%s", text)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	total, _ := strconv.ParseFloat(n[1], 64)
	r.requests = int64(total)
	if bad := wrkNon2xx.FindStringSubmatch(text); bad != nil && total > 0 {
		v, _ := strconv.ParseFloat(bad[1], 64)
		r.non2xx = v / total
	}
	for _, p := range wrkPercent.FindAllStringSubmatch(text, -1) {
		if p[1] == "50" {
			r.p50 = p[2]
		} else {
			r.p99 = p[2]
		}
	}
	if t.store {
		if len(t.drain) > 0 {
			if _, err := drained(rdb, 5*time.Minute, t.drain...); err != nil {
				return wrkResult{}, err
			}
		}
		after, err := readRedisCPU(rdb)
		if err != nil {
			return wrkResult{}, err
		}
		d := after.minus(before)
		d.ops = int64(total)
		r.redisCPU, r.cpu = d.perOp(), d
	}
	return r, nil
}

// bodyScript writes the target's script with wrk.body set to its body, and returns its path.
func bodyScript(t wrkTarget) string {
	path := strings.TrimSuffix(t.script, ".lua") + "-" + fmt.Sprintf("%x", []byte(t.body)) + ".lua"
	src, _ := os.ReadFile(t.script)
	// A script that could not be written is named all the same: wrk says it cannot read it.
	_ = os.WriteFile(path, append([]byte("wrk.body = "+strconv.Quote(t.body)+"\n"), src...), 0o644)
	return path
}
