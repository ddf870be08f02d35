package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store/redisserver"
	"github.com/edgeq/edgeq/proxy"
)

// tableBench is the side-by-side table of issue 19: every path a request can take through edgeq,
// beside the origin alone, a bare httputil.ReverseProxy, and nginx and Caddy when they are installed,
// all loaded by wrk (a separate process) in alternating rounds on the same machine. Ratios are the
// point: absolute numbers depend on the machine and on what else it is doing.
func tableBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	duration := fs.Duration("duration", 4*time.Second, "wrk duration of each round")
	connections := fs.Int("connections", 64, "wrk connections")
	threads := fs.Int("threads", 2, "wrk threads")
	rounds := fs.Int("rounds", 3, "alternating rounds; the table shows each target's median")
	only := fs.String("only", "", "a regular expression: only the paths whose name matches (bare ReverseProxy and nginx always run, as references)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (origin, edgeq, bare proxy) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("the table needs wrk (Debian: apt-get install wrk; nginx and caddy are added to the table when installed)")
	}
	dir, err := os.MkdirTemp("", "edgeq-table-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // nginx's workers read their temporary paths here

	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			io.Copy(io.Discard, r.Body)
			w.Write([]byte("order confirmed"))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(originBody)
	}))
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
	defer rdb.Close()
	// The least a join can cost (issue 19): parse the form, one INCR, a JSON answer with a cookie.
	floorClient := redis.NewClient(&redis.Options{Addr: redisSrv.Addr(), PoolSize: 128})
	defer floorClient.Close()
	floor, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.PostForm.Get("queue_id") == "" {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		n, err := floorClient.Incr(r.Context(), "floor:"+r.PostForm.Get("queue_id")).Result()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		id := strconv.FormatInt(n, 10)
		http.SetCookie(w, &http.Cookie{Name: "rq", Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"request_id":%q}`, id)
	}))
	if err != nil {
		return err
	}
	bare, err := serve(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(originURL); pr.SetXForwarded() },
		Transport: proxy.NewHTTPTransport(config.Default().Origin.Timeout),
	})
	if err != nil {
		return err
	}
	edge, stop, err := startEdgeqWith(origin, redisSrv.Addr(), fmt.Sprintf(`
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
`, time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339)))
	if err != nil {
		return err
	}
	defer stop()
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
	if base, stopNginx, err := startNginx(dir, originURL.Host); err == nil {
		defer stopNginx()
		targets = append(targets, wrkTarget{name: "nginx proxy_pass (keepalive)", url: base + "/page", ref: "nginx"})
	} else {
		notes = append(notes, "nginx: "+err.Error())
	}
	if base, stopCaddy, err := startCaddy(dir, originURL.Host); err == nil {
		defer stopCaddy()
		targets = append(targets, wrkTarget{name: "Caddy reverse_proxy", url: base + "/page"})
	} else {
		notes = append(notes, "caddy: "+err.Error())
	}
	targets = append(targets,
		wrkTarget{name: "bare httputil.ReverseProxy", url: bare + "/page", ref: "bare"},
		wrkTarget{name: "edgeq pass-through GET", url: edge + "/page"},
		wrkTarget{name: "edgeq gated GET, valid token", url: edge + "/gated/page", header: "Cookie: " + cookie},
		wrkTarget{name: "edgeq status poll (waiting)", url: edge + "/_edgeq/status/bench_wait/" + waiting[0], store: true},
		wrkTarget{name: "join floor: form, one INCR, JSON and a cookie", url: floor + "/join", script: postScript, body: "queue_id=bench_join", store: true},
		wrkTarget{name: "edgeq join", url: edge + "/_edgeq/assign_queue_pos", script: postScript, body: "queue_id=bench_join", store: true},
		wrkTarget{name: "edgeq POST passed through", url: edge + "/plain/bench", script: postScript, body: "quantity=1"},
		wrkTarget{name: "edgeq stock admission", url: edge + "/checkout/bench", script: postScript, body: "quantity=1", store: true,
			drain: productStreams("edgeq", "bench")},
		wrkTarget{name: "edgeq bid admission (refused: too low)", url: edge + "/auctions/bench/bid", script: postScript, body: "amount=5.00", store: true,
			drain: []string{"edgeq:{a:bench}:events"}},
	)
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return err
		}
		targets = slices.DeleteFunc(targets, func(t wrkTarget) bool { return t.ref == "" && !re.MatchString(t.name) })
	}
	results := make([][]wrkResult, len(targets))
	for round := range *rounds {
		for i, t := range targets {
			fmt.Fprintf(os.Stderr, "round %d: %s\n", round+1, t.name)
			r, err := runWrk(t, *threads, *connections, *duration, rdb, round)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			results[i] = append(results[i], r)
		}
	}
	medians := make([]wrkResult, len(targets))
	ref := map[string]float64{}
	for i, rs := range results {
		slices.SortFunc(rs, func(a, b wrkResult) int { return int(a.rps - b.rps) })
		medians[i] = rs[len(rs)/2]
		if targets[i].ref != "" {
			ref[targets[i].ref] = medians[i].rps
		}
	}
	fmt.Fprintf(w, "machine: %s\n", machine())
	fmt.Fprintf(w, "load: wrk -t%d -c%d -d%s, %d alternating rounds (medians), 1 KiB origin body; origin, proxies, redis-server and wrk on this machine\n\n",
		*threads, *connections, *duration, *rounds)
	fmt.Fprintln(w, "| path | requests/s | vs bare ReverseProxy | vs nginx | p50 | p99 | non-2xx | Redis CPU per request |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for i, m := range medians {
		vsNginx := "—"
		if n := ref["nginx"]; n > 0 {
			vsNginx = fmt.Sprintf("%.2fx", m.rps/n)
		}
		cpu := "—"
		if targets[i].store {
			cpu = fmt.Sprintf("%.1f µs", m.redisCPU)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2fx | %s | %s | %s | %.0f%% | %s |\n", targets[i].name, m.rps, m.rps/ref["bare"], vsNginx,
			m.p50, m.p99, m.non2xx*100, cpu)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "\nnot in the table: %s", n)
	}
	fmt.Fprintln(w)
	return nil
}

type wrkTarget struct {
	name, url, header string
	script, body      string   // a POST: wrk script sending body with a new X-User per request
	ref               string   // "bare" or "nginx": a reference row
	store             bool     // report Redis CPU per request
	drain             []string // streams the event worker must have caught up with before Redis CPU is read
}

type wrkResult struct {
	rps, non2xx float64
	p50, p99    string
	redisCPU    float64 // µs per request
}

// wrkPostScript sends form POSTs with a new X-User each time (thread, round and a counter), so every
// admission is a new buyer.
const wrkPostScript = `
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local n = 0
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
		r.redisCPU = d.perOp()
	}
	return r, nil
}

// bodyScript writes the target's script with wrk.body set to its body, and returns its path.
func bodyScript(t wrkTarget) string {
	path := strings.TrimSuffix(t.script, ".lua") + "-" + fmt.Sprintf("%x", []byte(t.body)) + ".lua"
	src, _ := os.ReadFile(t.script)
	os.WriteFile(path, append([]byte("wrk.body = "+strconv.Quote(t.body)+"\n"), src...), 0o644)
	return path
}

// startNginx runs nginx in front of the origin with upstream keepalive, as a proxy in production is.
func startNginx(dir, originHost string) (string, func(), error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return "", nil, errors.New("not installed (Debian: apt-get install nginx)")
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	root := filepath.Join(dir, "nginx")
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	user := ""
	if os.Getuid() == 0 {
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s
worker_processes 2;
pid %s/nginx.pid;
error_log %s/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %s/body;
  proxy_temp_path %s/proxy;
  upstream origin { server %s; keepalive 64; }
  server {
    listen 127.0.0.1:%d;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`, user, root, root, root, root, originHost, port)
	path := filepath.Join(root, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", nil, err
	}
	return startProcess(exec.Command(bin, "-p", root, "-c", path, "-g", "daemon off;"), port)
}

// startCaddy runs Caddy's reverse_proxy in front of the origin (no TLS, no admin endpoint).
func startCaddy(dir, originHost string) (string, func(), error) {
	bin, err := exec.LookPath("caddy")
	if err != nil {
		return "", nil, errors.New("not installed (Debian: apt-get install caddy)")
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	root := filepath.Join(dir, "caddy")
	os.MkdirAll(root, 0o755)
	conf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:%d {\n\treverse_proxy %s\n}\n", port, originHost)
	path := filepath.Join(root, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+root, "XDG_CONFIG_HOME="+root, "HOME="+root)
	return startProcess(cmd, port)
}

// startProcess starts a proxy and waits until its port answers.
func startProcess(cmd *exec.Cmd, port int) (string, func(), error) {
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// Its own process group: nginx's workers outlive a killed master otherwise, holding the output pipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get(base + "/page"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base, stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("did not answer on port %d: %s", port, logs.String())
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
