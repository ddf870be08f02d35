package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/edgeq/edgeq/internal/testutil/pgserver"
	"github.com/edgeq/edgeq/internal/testutil/wait"
)

// privatePostgres starts a PostgreSQL server of the test's own (it may be stopped and started).
func privatePostgres(t *testing.T) *pgserver.Server { return ledgertest.PrivateServer(t) }

// sale is one edgeq replica (a process) with the ledger on, in front of a shop that accepts every
// order and bid, with a product "drop" and an auction "lot".
type sale struct {
	t          *testing.T
	config     string
	public     string
	admin      string
	db         string
	mu         sync.Mutex
	admissions []string // ids the shop received, in order
	bids       []string
}

func newSale(t *testing.T, redisAddr string, pg *pgserver.Server, stock int) *sale {
	t.Helper()
	s := &sale{t: t}
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if id := r.Header.Get("Edgeq-Admission-Id"); id != "" {
			s.admissions = append(s.admissions, id)
		}
		if id := r.Header.Get("Edgeq-Bid-Id"); id != "" {
			s.bids = append(s.bids, id)
		}
		s.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(shop.Close)
	ctx := context.Background()
	db, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.db = db
	s.config = filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(s.config, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 2s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 30s}
redis: {addr: %q}
ledger: {postgres_url: %q}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
products:
  - {id: drop, stock: %d, per_user_limit: 1, name: "Drop"}
auctions:
  - {id: lot, starting_price: "1.00", min_increment: "1.00", ends_at: %q}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-User"}
`, shop.URL, redisAddr, db, stock, time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339))), 0o644)
	cmd := edgeq("serve", "-config", s.config)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s.public, s.admin = waitForListeners(t, stderr)
	go io.Copy(io.Discard, stderr)
	return s
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

// buy sends one purchase and returns its status.
func (s *sale) buy(user string) int {
	req, _ := http.NewRequest("POST", "http://"+s.public+"/checkout/drop", nil)
	req.Header.Set("X-User", user)
	return s.send(req)
}

// bid sends one bid and returns its status.
func (s *sale) bid(user string, cents int) int {
	req, _ := http.NewRequest("POST", "http://"+s.public+"/auctions/lot/bid",
		strings.NewReader(url.Values{"amount": {fmt.Sprintf("%d.%02d", cents/100, cents%100)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-User", user)
	return s.send(req)
}

func (s *sale) send(req *http.Request) int {
	resp, err := client.Do(req)
	if err != nil {
		s.t.Error(err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// number runs a query on the ledger's database that returns one number.
func (s *sale) number(query string) int64 {
	s.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.db)
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// metric reads one sample of the replica's metrics ("" when absent).
func (s *sale) metric(name string) string {
	resp, err := client.Get("http://" + s.admin + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

func (s *sale) deadLetters() string {
	req, _ := http.NewRequest("GET", "http://"+s.admin+"/api/dead-letters", nil)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// waitFor polls cond until it holds, for at most within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, within, what, cond)
}

// parallel runs fn(i) for i in [0, n) on 64 goroutines.
func parallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// A flash sale of 2,000 buyers for 50 units and 1,000 bids, with the ledger
// on. PostgreSQL holds exactly the admitted units and the accepted bids, written by the replica's own
// worker, and `edgeq reconcile` finds nothing to report.
func TestLedger_AFlashSaleIsInTheLedgerExactly(t *testing.T) {
	redisSrv := privateRedis(t)
	s := newSale(t, redisSrv.Addr(), privatePostgres(t), 50)
	var sold, accepted atomic.Int64
	parallel(2000, func(i int) {
		switch code := s.buy(fmt.Sprintf("buyer-%d", i)); code {
		case 200:
			sold.Add(1)
		case 409:
		default:
			t.Errorf("purchase %d: %d", i, code)
		}
	})
	parallel(1000, func(i int) {
		switch code := s.bid(fmt.Sprintf("bidder-%d", i%300), 100+i*100); code {
		case 200:
			accepted.Add(1)
		case 409:
		default:
			t.Errorf("bid %d: %d", i, code)
		}
	})
	if sold.Load() != 50 || accepted.Load() == 0 {
		t.Fatalf("%d sold (want 50), %d bids accepted", sold.Load(), accepted.Load())
	}
	waitFor(t, 60*time.Second, "the replica's worker writes the sale to the ledger", func() bool {
		return s.number("SELECT count(*) FROM edgeq_admissions WHERE state = 'committed' AND quantity = 1") == 50 &&
			s.number("SELECT count(*) FROM edgeq_bids WHERE state = 'committed' AND amount_cents > 0") == accepted.Load()
	})
	if n := s.number("SELECT count(*) FROM edgeq_admissions"); n != 50 {
		t.Fatalf("%d admission rows, want 50 (refused purchases are not admissions)", n)
	}
	if n := s.number("SELECT count(DISTINCT buyer) FROM edgeq_admissions"); n != 50 {
		t.Fatalf("%d buyers, want 50 (one per person)", n)
	}
	if n := s.number("SELECT count(*) FROM edgeq_bids"); n != accepted.Load() {
		t.Fatalf("%d bid rows, want the %d accepted", n, accepted.Load())
	}
	s.mu.Lock()
	ids := slices.Clone(s.admissions)
	s.mu.Unlock()
	for _, id := range ids {
		if n := s.number("SELECT count(*) FROM edgeq_admissions WHERE id = '" + id + "'"); n != 1 {
			t.Fatalf("admission %s the shop received: %d rows", id, n)
		}
	}
	if got := s.metric(`edgeq_ledger_lag_seconds`); got != "0" {
		t.Errorf("ledger lag %q once caught up, want 0", got)
	}
	code, stdout, stderr := runEdgeq(t, "reconcile", "-config", s.config)
	if code != 0 || !strings.Contains(stdout, "1 products, 1 auctions, 50 admissions and "+strconv.FormatInt(accepted.Load(), 10)+" bids") ||
		!strings.Contains(stdout, ": 0 difference(s)") {
		t.Fatalf("reconcile: exit %d\n%s%s", code, stdout, stderr)
	}
	// -wait 0s compares at once, writing nothing first (the same counts; "records since" moves on).
	counts, _, _ := strings.Cut(stdout, " (records since")
	if code, again, stderr := runEdgeq(t, "reconcile", "-config", s.config, "-wait", "0s"); code != 0 ||
		!strings.HasPrefix(again, counts+" (records since") || !strings.HasSuffix(again, ": 0 difference(s)\n") {
		t.Fatalf("reconcile -wait 0s: exit %d\n%s%s", code, again, stderr)
	}
	// An unreachable Redis: exit 3 and one line on stderr (not go-redis's own dial-retry lines).
	down, _ := os.ReadFile(s.config)
	noRedis := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(noRedis, []byte(strings.Replace(string(down), "redis: {addr: ", `redis: {addr: "127.0.0.1:1"}`+"\n#", 1)), 0o644)
	if code, stdout, stderr := runEdgeq(t, "reconcile", "-config", noRedis, "-wait", "0s"); code != 3 ||
		strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "edgeq reconcile: ") {
		t.Fatalf("reconcile with Redis down: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// PostgreSQL stopped for 30 seconds in the middle of a sale. Purchases go on
// at the same pace (the fast path never waits for the ledger), the lag shows in the metric, and once
// PostgreSQL is back the ledger catches up by itself: reconcile exits 0, no dead letter.
func TestLedger_PostgreSQLDownForThirtySecondsMidSale(t *testing.T) {
	redisSrv := privateRedis(t)
	pg := privatePostgres(t)
	s := newSale(t, redisSrv.Addr(), pg, 1000)
	for i := range 50 {
		if code := s.buy(fmt.Sprintf("early-%d", i)); code != 200 {
			t.Fatalf("purchase before the outage: %d", code)
		}
	}
	waitFor(t, 30*time.Second, "the first purchases in the ledger", func() bool {
		return s.number("SELECT count(*) FROM edgeq_admissions WHERE state = 'committed'") == 50
	})

	pg.Stop()
	start := time.Now()
	var during int
	for time.Since(start) < 30*time.Second {
		begin := time.Now()
		if code := s.buy(fmt.Sprintf("during-%d", during)); code != 200 {
			t.Fatalf("purchase %d during the outage: %d", during, code)
		}
		if code := s.bid(fmt.Sprintf("bidder-%d", during), 100+during*100); code != 200 {
			t.Fatalf("bid %d during the outage: %d", during, code)
		}
		if took := time.Since(begin); took > 5*time.Second {
			t.Fatalf("a purchase and a bid took %v during the outage: the fast path waited for PostgreSQL", took)
		}
		during++
		time.Sleep(100 * time.Millisecond)
	}
	lag, err := strconv.ParseFloat(s.metric("edgeq_ledger_lag_seconds"), 64)
	if err != nil || lag < 15 {
		t.Fatalf("ledger lag %v (%v) after 30 s without PostgreSQL, want it to show the outage", lag, err)
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the ledger catches up", func() bool {
		return s.number("SELECT count(*) FROM edgeq_admissions WHERE state = 'committed'") == int64(50+during) &&
			s.number("SELECT count(*) FROM edgeq_bids WHERE state = 'committed'") == int64(during)
	})
	waitFor(t, 10*time.Second, "the lag back to 0", func() bool { return s.metric("edgeq_ledger_lag_seconds") == "0" })
	if body := s.deadLetters(); !strings.Contains(body, `"total_count":0`) {
		t.Fatalf("dead letters after the outage: %s", body)
	}
	if code, stdout, stderr := runEdgeq(t, "reconcile", "-config", s.config); code != 0 {
		t.Fatalf("reconcile: exit %d\n%s%s", code, stdout, stderr)
	}
}

// Redis (AOF everysec) SIGKILLed and brought back with less than the ledger
// has. The test makes the loss certain: it keeps a copy of the append-only files after a first part
// of the sale, runs a second part, kills Redis and starts it on the copy — what a crash that lost its
// last writes leaves. reconcile exits 1 and reports exactly the second part: the units, the highest
// bid, and each admission and bid by id, and nothing else.
func TestLedger_ReconcileReportsExactlyWhatTheStoreLost(t *testing.T) {
	redisSrv := privateRedis(t, "--appendonly", "yes", "--appendfsync", "everysec")
	s := newSale(t, redisSrv.Addr(), privatePostgres(t), 100)
	part := func(name string, buyers, bids, from int) (admissions, bidIDs []string) {
		s.mu.Lock()
		a0, b0 := len(s.admissions), len(s.bids)
		s.mu.Unlock()
		for i := range buyers {
			if code := s.buy(fmt.Sprintf("%s-%d", name, i)); code != 200 {
				t.Fatalf("%s purchase %d: %d", name, i, code)
			}
		}
		for i := range bids {
			if code := s.bid(fmt.Sprintf("%s-bidder-%d", name, i), (from+i)*100); code != 200 {
				t.Fatalf("%s bid %d: %d", name, i, code)
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Clone(s.admissions[a0:]), slices.Clone(s.bids[b0:])
	}
	caughtUp := func(admissions, bids int) {
		waitFor(t, 30*time.Second, "the ledger caught up", func() bool {
			return s.number("SELECT count(*) FROM edgeq_admissions WHERE state = 'committed'") == int64(admissions) &&
				s.number("SELECT count(*) FROM edgeq_bids WHERE state = 'committed'") == int64(bids)
		})
	}
	part("first", 20, 5, 2)
	caughtUp(20, 5)
	time.Sleep(1500 * time.Millisecond) // appendfsync everysec: the first part is on disk
	snapshot := filepath.Join(t.TempDir(), "aof")
	if out, err := exec.Command("cp", "-a", redisSrv.Dir(), snapshot).CombinedOutput(); err != nil {
		t.Fatalf("copy the append-only files: %v %s", err, out)
	}
	lostAdmissions, lostBids := part("second", 15, 3, 10)
	caughtUp(35, 8)

	redisSrv.Kill()
	if err := os.RemoveAll(redisSrv.Dir()); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", snapshot, redisSrv.Dir()).CombinedOutput(); err != nil {
		t.Fatalf("restore the copy: %v %s", err, out)
	}
	if err := redisSrv.Restart(); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runEdgeq(t, "reconcile", "-config", s.config)
	if code != 1 {
		t.Fatalf("reconcile: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	want := []string{
		"product drop: units held: store 20, ledger 35",
		"auction lot: highest bid: store 6.00, ledger 12.00",
	}
	for _, id := range lostAdmissions {
		want = append(want, "admission "+id+" (product drop): in the ledger (committed), missing from the store")
	}
	for _, id := range lostBids {
		want = append(want, "bid "+id+" (auction lot): in the ledger (committed), missing from the store")
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	summary := lines[len(lines)-1]
	got := lines[:len(lines)-1]
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("reconcile reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !regexp.MustCompile(`compared 1 products, 1 auctions, 35 admissions and 8 bids .*: 20 difference\(s\)$`).MatchString(summary) {
		t.Fatalf("summary %q", summary)
	}
}
