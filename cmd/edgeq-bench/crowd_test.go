package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/demoshop"
	"github.com/edgeq/edgeq/server"
)

// `make demo`'s promise, run in-process with what the Makefile runs (its queue override and the
// crowd's flags, read from `make -n demo`; the crowd's timings are the demo's own, none shortened):
// with the crowd in line, a newcomer opening a product page in a browser is sent to the waiting page
// and shown a place within the first minute; the crowd is served and places orders of the jersey
// only (the limited sneaker keeps its stock); the line moves past the crowd's no-shows, and the
// newcomer is let in; the crowd stops when told to.
func TestCrowd_NewcomerWaitsBehindTheDemoCrowdAndIsLetIn(t *testing.T) {
	start := time.Now()
	demo := makeDemoDryRun(t, nil)
	queues := regexp.MustCompile(`EDGEQ_QUEUES='([^']*)'`).FindStringSubmatch(demo)
	crowdArgs := regexp.MustCompile(`edgeq-bench crowd ([^&]*)&`).FindStringSubmatch(demo)
	if queues == nil || crowdArgs == nil {
		t.Fatalf("make -n demo runs no crowd with a queue override:\n%s", demo)
	}

	shop, err := demoshop.New(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	edge := startDemoEdgeq(t, origin.URL, queues[1])

	c, err := parseCrowdFlags(append(strings.Fields(crowdArgs[1]), "-url", edge))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tally, stopped := &crowdTally{}, make(chan error, 1)
	go func() { stopped <- runCrowd(ctx, c, testLog{t}, tally) }()

	// The newcomer comes once people are waiting (the crowd's arrivals take a few seconds).
	for waitingNum(t, edge) < 3 {
		if time.Since(start) > 45*time.Second {
			t.Fatalf("no line formed behind the crowd: %s", tally)
		}
		time.Sleep(500 * time.Millisecond)
	}
	newcomer := newBrowser(t)
	resp := newcomer.navigate(t, edge+"/products/1")
	where := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(where, "/_edgeq/wait/drop") {
		t.Fatalf("newcomer at /products/1: %d to %q, want 302 to the waiting page", resp.StatusCode, where)
	}
	page := newcomer.navigate(t, edge+where)
	position := regexp.MustCompile(`id="position">([0-9]+)<`).FindStringSubmatch(page.body)
	request := regexp.MustCompile(`data-request="([^"]+)"`).FindStringSubmatch(page.body)
	if page.StatusCode != http.StatusOK || position == nil || request == nil {
		t.Fatalf("waiting page: %d without a position:\n%s", page.StatusCode, page.body)
	}
	if since := time.Since(start); since > time.Minute {
		t.Errorf("the newcomer had a place after %s, want within the first minute", since)
	}
	t.Logf("newcomer: number %s in line after %s", position[1], time.Since(start).Round(time.Second))

	joined := time.Now()
	newcomer.waitForTurn(t, edge, request[1], 60*time.Second)
	inside := newcomer.navigate(t, edge+"/products/1")
	if inside.StatusCode != http.StatusOK || !strings.Contains(inside.body, "Limited sneaker A") {
		t.Fatalf("newcomer let in, then /products/1: %d", inside.StatusCode)
	}
	t.Logf("newcomer let in after %s in line; crowd: %s", time.Since(joined).Round(time.Second), tally)

	orders := shopOrders(t, origin.URL)
	switch {
	case tally.served.Load() == 0 || tally.bought.Load() == 0 || len(orders.Orders) == 0:
		t.Errorf("the crowd was not served or bought nothing: %s; %d orders", tally, len(orders.Orders))
	case tally.left.Load() == 0:
		t.Errorf("no shopper left the line (the no-shows the line moves past): %s", tally)
	case orders.Stock["sneaker-a"] != 5:
		t.Errorf("the crowd took the limited sneaker's stock: %d left of 5", orders.Stock["sneaker-a"])
	}
	for _, o := range orders.Orders {
		if len(o.Items) != 1 || o.Items[0].SKU != "jersey" || o.Items[0].Quantity != 1 {
			t.Errorf("order %d is not one jersey: %+v", o.Number, o.Items)
		}
	}

	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("crowd: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the crowd did not stop within 5 s of being told to")
	}
}

// The crowd is a polite client: a 429 is waited out for its Retry-After before the same join is sent
// again, and once the shop refuses to add the crowd's product (sold out) the crowd goes home instead
// of holding places it cannot use. Against a stand-in for edgeq and the shop, timings shortened.
func TestCrowd_WaitsOutRetryAfterAndGoesHomeWhenTheShopSellsOut(t *testing.T) {
	var mu sync.Mutex
	var joins []time.Time
	requests := 0
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		switch r.Method + " " + r.URL.Path {
		case "POST /_edgeq/assign_queue_pos":
			if joins = append(joins, time.Now()); len(joins) == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			io.WriteString(w, `{"request_id": "r1"}`)
		case "GET /_edgeq/status/drop/r1":
			io.WriteString(w, `{"queue_status": "served"}`)
		case "POST /_edgeq/generate_token", "GET /products/3":
			io.WriteString(w, `{}`)
		case "POST /api/carts":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"cart": {"id": "c1"}}`)
		case "POST /api/carts/c1/items":
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error": {"code": "OUT_OF_STOCK", "message": "Team jersey is sold out."}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer fake.Close()
	c, err := parseCrowdFlags([]string{"-url", fake.URL, "-size", "1", "-leave", "0", "-poll", "50ms", "-browse", "10ms", "-pause", "10ms"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tally, stopped := &crowdTally{}, make(chan error, 1)
	go func() { stopped <- runCrowd(ctx, c, testLog{t}, tally) }()
	for deadline := time.Now().Add(10 * time.Second); !tally.home.Load(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the crowd did not go home: %s", tally)
		}
	}
	mu.Lock()
	seen := requests
	mu.Unlock()
	time.Sleep(300 * time.Millisecond) // several pauses of the shopper's: it would have come back
	cancel()
	<-stopped

	mu.Lock()
	defer mu.Unlock()
	switch {
	case len(joins) != 2 || joins[1].Sub(joins[0]) < 800*time.Millisecond:
		t.Errorf("joins at %v: want the second at least Retry-After (1 s, less 20 %% jitter) after the 429", joins)
	case requests != seen:
		t.Errorf("%d requests after the crowd went home", requests-seen)
	case tally.refused.Load() != 1 || tally.faults.Load() != 0 || tally.served.Load() != 1 || tally.bought.Load() != 0:
		t.Errorf("tally: %s", tally)
	}
}

// The banner of `make demo` gives the addresses edgeq is given, the admin one included when moved
// with EDGEQ_ADMIN_LISTEN in the environment or ADMIN_LISTEN on the command line, and says who is in
// line.
func TestDemoMakefile_BannerFollowsTheVariablesEdgeqIsGiven(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env, vars []string
		want      []string // in the banner or the commands
		edgeqEnv  []string // on both the edgeq check and edgeq serve lines
		absent    []string
	}{{
		name:     "defaults",
		want:     []string{"http://127.0.0.1:8080/", "http://127.0.0.1:9090/metrics", "http://127.0.0.1:9090/dashboard (off until EDGEQ_ADMIN_API_KEY is set", "12 simulated shoppers", "room for 3 inside", "CROWD=0 make demo", "edgeq-bench crowd -url http://127.0.0.1:8080 -queue drop -size 12"},
		edgeqEnv: []string{"EDGEQ_ADMIN_LISTEN=127.0.0.1:9090", "EDGEQ_SERVER_LISTEN=127.0.0.1:8080", `EDGEQ_QUEUES='[{id: drop, title: "Sneaker drop", capacity: 3,`},
	}, {
		name:     "EDGEQ_ADMIN_LISTEN in the environment",
		env:      []string{"EDGEQ_ADMIN_LISTEN=127.0.0.1:9191"},
		want:     []string{"http://127.0.0.1:9191/metrics", "http://127.0.0.1:9191/dashboard"},
		edgeqEnv: []string{"EDGEQ_ADMIN_LISTEN=127.0.0.1:9191"},
		absent:   []string{"9090"},
	}, {
		// With an admin key the dashboard is on: the banner says where, and never prints the key.
		name:   "an admin key in the environment",
		env:    []string{"EDGEQ_ADMIN_API_KEY=not-printed-key"},
		want:   []string{"http://127.0.0.1:9090/dashboard (the password is the value of EDGEQ_ADMIN_API_KEY)"},
		absent: []string{"not-printed-key", "off until"},
	}, {
		name:     "ADMIN_LISTEN on the command line wins",
		env:      []string{"EDGEQ_ADMIN_LISTEN=127.0.0.1:9191"},
		vars:     []string{"ADMIN_LISTEN=127.0.0.1:9292"},
		want:     []string{"http://127.0.0.1:9292/metrics"},
		edgeqEnv: []string{"EDGEQ_ADMIN_LISTEN=127.0.0.1:9292"},
		absent:   []string{"9090", "9191"},
	}, {
		name:     "EDGEQ_LISTEN",
		vars:     []string{"EDGEQ_LISTEN=127.0.0.1:8181"},
		want:     []string{"http://127.0.0.1:8181/", "open http://127.0.0.1:8181/products/1", "crowd -url http://127.0.0.1:8181 "},
		edgeqEnv: []string{"EDGEQ_SERVER_LISTEN=127.0.0.1:8181"},
		absent:   []string{"8080"},
	}, {
		name:     "another crowd and capacity",
		vars:     []string{"CROWD=5", "DEMO_CAPACITY=2"},
		want:     []string{"5 simulated shoppers", "room for 2 inside", "-size 5 "},
		edgeqEnv: []string{"capacity: 2,"},
	}, {
		name:   "no crowd",
		vars:   []string{"CROWD=0"},
		want:   []string{"nobody (CROWD=0)"},
		absent: []string{"edgeq-bench crowd", "EDGEQ_QUEUES", "simulated shoppers"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			out := makeDemoDryRun(t, tc.env, tc.vars...)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("make -n demo does not say %q:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("make -n demo still says %q:\n%s", a, out)
				}
			}
			for _, command := range []string{"bin/edgeq check", "bin/edgeq serve"} {
				line := lineWith(out, command)
				for _, e := range tc.edgeqEnv {
					if !strings.Contains(line, e) {
						t.Errorf("%s is not given %s: %q", command, e, line)
					}
				}
			}
		})
	}
}

// makeDemoDryRun prints what `make demo` would run (make -n) in the repository's root, with env added
// to an environment cleared of edgeq's and the Makefile's variables.
func makeDemoDryRun(t *testing.T, env []string, vars ...string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed (apt-get install make): the demo's Makefile cannot be checked")
	}
	cmd := exec.Command("make", append([]string{"-n", "--no-print-directory", "-C", "../..", "demo"}, vars...)...)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "EDGEQ_"), strings.HasPrefix(name, "MAKE"), name == "MFLAGS",
			name == "SHOP_LISTEN", name == "ADMIN_LISTEN", name == "CROWD", name == "DEMO_CAPACITY":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	// One line per shell command, without the builds (whose version string is a commit hash).
	var commands []string
	for line := range strings.SplitSeq(strings.ReplaceAll(string(out), "\\\n", " "), "\n") {
		if !strings.Contains(line, " go build ") {
			commands = append(commands, line)
		}
	}
	return strings.Join(commands, "\n")
}

func lineWith(text, part string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, part) {
			return line
		}
	}
	return ""
}

// startDemoEdgeq runs edgeq in-process as make demo does: config.example.yaml, the embedded store, the
// queue override, on free loopback ports.
func startDemoEdgeq(t *testing.T, origin, queues string) string {
	t.Setenv("EDGEQ_SERVER_LISTEN", "127.0.0.1:0")
	t.Setenv("EDGEQ_ADMIN_LISTEN", "127.0.0.1:0")
	t.Setenv("EDGEQ_ORIGIN_URL", origin)
	t.Setenv("EDGEQ_QUEUES", queues)
	t.Setenv("EDGEQ_LOG_LEVEL", "warn")
	ctx, cancel := context.WithCancel(context.Background())
	started, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{ConfigPath: "../../config.example.yaml", LogOutput: io.Discard,
			Started: func(public, _ net.Addr) { started <- "http://" + public.String() }})
	}()
	select {
	case edge := <-started:
		t.Cleanup(func() { cancel(); <-done })
		return edge
	case err := <-done:
		cancel()
		t.Fatalf("edgeq did not start: %v", err)
		return ""
	}
}

func waitingNum(t *testing.T, edge string) int64 {
	var body struct {
		WaitingNum int64 `json:"waiting_num"`
	}
	getJSON(t, edge+"/_edgeq/waiting_num/drop", &body)
	return body.WaitingNum
}

type shopOrderList struct {
	Orders []struct {
		Number int `json:"number"`
		Items  []struct {
			SKU      string `json:"sku"`
			Quantity int    `json:"quantity"`
		} `json:"items"`
	} `json:"orders"`
	Stock map[string]int `json:"stock"`
}

func shopOrders(t *testing.T, shop string) shopOrderList {
	var list shopOrderList
	getJSON(t, shop+"/orders.json", &list)
	return list
}

func getJSON(t *testing.T, address string, v any) {
	t.Helper()
	resp, err := http.Get(address)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", address, resp.StatusCode, err)
	}
}

// browser is a newcomer as a browser is one: its own cookies, navigations asking for HTML, redirects
// looked at one by one.
type browser struct{ client *http.Client }

type page struct {
	*http.Response
	body string
}

func newBrowser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{client: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// navigate opens address as a typed-in address is opened.
func (b *browser) navigate(t *testing.T, address string) page {
	t.Helper()
	req, _ := http.NewRequest("GET", address, nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	req.Header.Set("Sec-Fetch-Dest", "document")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Site", "none")
	return b.do(t, req)
}

func (b *browser) do(t *testing.T, req *http.Request) page {
	t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{Response: resp, body: string(body)}
}

// waitForTurn polls the place's status as the waiting page's script does (every 2 s here, within the
// page's own period) until it is served, then claims the token.
func (b *browser) waitForTurn(t *testing.T, edge, request string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequest("GET", edge+"/_edgeq/status/drop/"+url.PathEscape(request), nil)
		req.Header.Set("Accept", "application/json")
		status := b.do(t, req)
		var body struct {
			QueueStatus string `json:"queue_status"`
			Ahead       int64  `json:"ahead"`
		}
		json.Unmarshal([]byte(status.body), &body)
		if status.StatusCode != http.StatusOK {
			t.Fatalf("status of the newcomer's place: %d %s", status.StatusCode, status.body)
		}
		if body.QueueStatus == "served" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the newcomer was not let in within %s (%d ahead): the line does not move", limit, body.Ahead)
		}
		time.Sleep(2 * time.Second)
	}
	form := url.Values{"queue_id": {"drop"}, "request_id": {request}}
	req, _ := http.NewRequest("POST", edge+"/_edgeq/generate_token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if claimed := b.do(t, req); claimed.StatusCode != http.StatusOK {
		t.Fatalf("generate_token for the newcomer: %d %s", claimed.StatusCode, claimed.body)
	}
}

// testLog writes the crowd's lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
