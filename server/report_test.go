package server

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/turnstiletest"
	"github.com/edgeq/edgeq/report"
)

// reportConfig is a drop: a Turnstile queue that serves 20 at a time (tokens last 3 s, a reached place
// unclaimed for 10 s is given up: time enough for a visitor polling from a starved machine, where 5 s
// was not), and 20 sneakers behind a stock-admitted checkout.
func reportConfig(originURL, redisAddr, turnstileURL, method string) string {
	store := ""
	if redisAddr != "" {
		store = fmt.Sprintf("redis: {addr: %q}", redisAddr)
	}
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
%s
log: {level: warn}
identity: {secret: "the-drop's-shared-identity-secret-0123456789"}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
turnstile: {site_key: %q, secret_key: %q, verify_url: "%s/turnstile/v0/siteverify", script_url: "%s/turnstile/v0/api.js", hostnames: [shop.example]}
queues:
  - {id: drop, capacity: 20, token_ttl: 3s, position_expiry: 10s, turnstile: true, method: %s}
products:
  - {id: sneaker, stock: 20, per_user_limit: 1, name: "Sneaker"}
routes:
  - {name: drop, match: "GET /drop/", queue: drop}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, originURL, store, turnstiletest.SiteKey, turnstiletest.Secret, turnstileURL, turnstileURL, method)
}

// dropRecord is what the test itself saw of its drop.
type dropRecord struct {
	mu          sync.Mutex
	joined      int
	joinRefused map[string]int
	// waitsLo and waitsHi bracket each served visitor's wait as the test can see it: from the join's
	// answer to the token request, and from the join request to the token's answer (the place was
	// handed out, and the token issued, somewhere inside each call).
	waitsLo, waitsHi []time.Duration
	served           int
	purchases        map[string]int // by code, "" admitted
	firstSale        time.Time
	lastSale         time.Time // the 20th unit
	firstRefusal     time.Time // the first INSUFFICIENT_STOCK
	restocked        int64
	turnstileFail    int
}

func (d *dropRecord) purchase(code string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.purchases[code]++
	switch {
	case code == "" && d.firstSale.IsZero():
		d.firstSale = at
	case code == "INSUFFICIENT_STOCK" && d.firstRefusal.IsZero():
		d.firstRefusal = at
	}
	if code == "" && d.purchases[""] == 20 {
		d.lastSale = at
	}
}

// post sends a form or JSON body and returns the status and the error code of a refusal.
func post(t *testing.T, target, contentType, body string, header map[string]string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", target, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Code string `json:"error"`
	}
	json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Code, raw
}

// runDrop plays the drop against the replicas: 300 joins over 30 s (and 15 with a Turnstile response
// that fails), 40 of the visitors never claiming their turn, the rest claiming their token as soon as
// their status says served; 60 buyers for the 20 sneakers, a restock of 5 bought by 5 more, and 3
// buyers trying again.
func runDrop(t *testing.T, replicas []*instance, fake *turnstiletest.Server) *dropRecord {
	d := &dropRecord{joinRefused: map[string]int{}, purchases: map[string]int{}}
	var visitors sync.WaitGroup
	const joins, failures = 300, 15
	host := map[string]string{"Host": "shop.example"}
	buy := func(in *instance, user string) {
		code, errCode, raw := post(t, in.public+"/checkout/sneaker", "application/json", "{}",
			map[string]string{"X-User": user})
		if code != 200 && errCode == "" {
			t.Errorf("purchase by %s: %d %s", user, code, raw)
		}
		d.purchase(errCode, time.Now())
	}
	var buyers sync.WaitGroup
	for i := range joins + failures {
		in := replicas[i%len(replicas)]
		if i%21 == 20 { // 15 of 315: a response Turnstile does not accept
			code, errCode, _ := post(t, in.public+"/_edgeq/assign_queue_pos", "application/x-www-form-urlencoded",
				url.Values{"queue_id": {"drop"}, "cf-turnstile-response": {"junk-" + strconv.Itoa(i)}}.Encode(), host)
			d.mu.Lock()
			d.joinRefused[errCode]++
			d.turnstileFail++
			d.mu.Unlock()
			if code != http.StatusForbidden {
				t.Errorf("a join with a bad Turnstile response: %d %s", code, errCode)
			}
		} else {
			joinStart := time.Now()
			code, errCode, raw := post(t, in.public+"/_edgeq/assign_queue_pos", "application/x-www-form-urlencoded",
				url.Values{"queue_id": {"drop"}, "cf-turnstile-response": {fake.Mint("shop.example", "")}}.Encode(), host)
			joined := [2]time.Time{joinStart, time.Now()}
			var body struct {
				RequestID string `json:"request_id"`
			}
			if code != 200 || json.Unmarshal(raw, &body) != nil {
				t.Fatalf("join %d: %d %s %s", i, code, errCode, raw)
			}
			d.mu.Lock()
			d.joined++
			n := d.joined
			d.mu.Unlock()
			if n%15 != 3 && n%15 != 11 { // 40 of 300 never claim their turn
				visitors.Go(func() { claim(t, replicas[n%len(replicas)], body.RequestID, joined, d) })
			}
		}
		if i == 100 { // the sale opens a third of the way in: 60 buyers for 20 units
			for b := range 60 {
				buyers.Go(func() { buy(replicas[b%len(replicas)], fmt.Sprintf("buyer-%d", b)) })
			}
		}
		time.Sleep(30 * time.Second / (joins + failures))
	}
	buyers.Wait()
	// A restock of 5, bought by 5 more buyers; 3 who bought before try again.
	code, _, raw := post(t, replicas[0].admin+"/api/products/sneaker/restock", "application/json", `{"amount": 5}`,
		map[string]string{"Authorization": "Bearer test-key"})
	if code != 200 {
		t.Fatalf("restock: %d %s", code, raw)
	}
	d.restocked = 5
	for b := 60; b < 65; b++ {
		buy(replicas[b%len(replicas)], fmt.Sprintf("buyer-%d", b))
	}
	time.Sleep(time.Second) // their first purchases are committed
	for _, b := range []string{"buyer-60", "buyer-61", "buyer-62"} {
		buy(replicas[0], b)
	}
	visitors.Wait()
	return d
}

// claim polls a visitor's status until it is served, then takes its token; joined is when the join
// was asked for and answered.
func claim(t *testing.T, in *instance, requestID string, joined [2]time.Time, d *dropRecord) {
	deadline := time.Now().Add(3 * time.Minute)
	var last map[string]any
	for time.Now().Before(deadline) {
		if last = statusOf(t, in, requestID); last["queue_status"] == "served" {
			asked := time.Now()
			code, errCode, raw := post(t, in.public+"/_edgeq/generate_token", "application/x-www-form-urlencoded",
				url.Values{"queue_id": {"drop"}, "request_id": {requestID}}.Encode(), map[string]string{"Host": "shop.example"})
			if code != 200 {
				t.Errorf("token of %s: %d %s %s", requestID, code, errCode, raw)
				return
			}
			d.mu.Lock()
			d.waitsLo = append(d.waitsLo, asked.Sub(joined[1]))
			d.waitsHi = append(d.waitsHi, time.Since(joined[0]))
			d.served++
			d.mu.Unlock()
			return
		}
		time.Sleep(150 * time.Millisecond)
	}
	t.Errorf("visitor %s never served: %v", requestID, last)
}

// nearestRank is the p-quantile of waits as the report computes it.
func nearestRank(waits []time.Duration, p float64) time.Duration {
	s := slices.Clone(waits)
	slices.Sort(s)
	i := max(int(math.Ceil(p*float64(len(s))))-1, 0)
	return s[i]
}

func readReport(t *testing.T, in *instance, query string) (*report.Report, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", in.admin+"/api/report?"+query, nil)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("report: %d %s", resp.StatusCode, raw)
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("%v: %.300s", err, raw)
	}
	return &rep, raw
}

// A scripted drop, and the report tells what the test did: joins, served, gave
// up, sold, refused by code, when it sold out, and the wait percentiles within a tick (plus the
// histogram's resolution) of the waits the test measured.
func TestReport_ADropTellsWhatHappened(t *testing.T) {
	cases := []struct {
		name, method string
		replicas     int
		redis        bool
	}{
		{"redis, two replicas, fifo", "fifo", 2, true},
		{"redis, two replicas, random", "random", 2, true},
		{"embedded, one replica", "fifo", 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := turnstiletest.New()
			ts := httptest.NewServer(fake)
			t.Cleanup(ts.Close)
			addr := ""
			if tc.redis {
				addr = privateRedisWith(t).Addr()
			}
			text := reportConfig(newOrigin(t).URL, addr, ts.URL, tc.method)
			var replicas []*instance
			for range tc.replicas {
				replicas = append(replicas, start(t, text))
			}
			began := time.Now()
			d := runDrop(t, replicas, fake)
			if t.Failed() {
				return
			}
			const gaveUp = 40
			query := "queue=drop&from=" + url.QueryEscape(began.Add(-time.Minute).UTC().Format(time.RFC3339))
			// Every count lands within a tick of its fact; the given-up places a position expiry later.
			var rep *report.Report
			var raw []byte
			eventually(t, "the report to count every fact", func() bool {
				rep, raw = readReport(t, replicas[0], query+"&to="+url.QueryEscape(time.Now().Add(time.Minute).UTC().Format(time.RFC3339)))
				s := rep.Summary
				return s.Joined == int64(d.joined) && s.Served == int64(d.served) && s.GaveUp == gaveUp &&
					s.Expired == int64(d.served) && len(rep.Products) == 1 && rep.Products[0].Admitted == int64(d.purchases[""])
			})
			s := rep.Summary
			t.Logf("report: %s", report.Headline(rep))
			if s.Joined != 300 || s.Served != 260 || s.GaveUp != gaveUp || s.Expired != 260 {
				t.Errorf("joined %d, served %d, gave up %d, expired %d; want 300, 260, %d, 260", s.Joined, s.Served,
					s.GaveUp, s.Expired, gaveUp)
			}
			if s.Refused["INVALID_TURNSTILE_TOKEN"] != int64(d.joinRefused["INVALID_TURNSTILE_TOKEN"]) || len(s.Refused) != 1 {
				t.Errorf("refused joins %v, the test saw %v", s.Refused, d.joinRefused)
			}
			if s.Turnstile.Passed != 300 || s.Turnstile.Failed != int64(d.turnstileFail) {
				t.Errorf("turnstile %+v, want 300 passed, %d failed", s.Turnstile, d.turnstileFail)
			}
			p := rep.Products[0]
			if p.ID != "sneaker" || p.Admitted != int64(d.purchases[""]) || p.Admitted != 25 || p.Restocked != d.restocked {
				t.Errorf("product %+v; the test bought %d (want 25), restocked %d", p, d.purchases[""], d.restocked)
			}
			// The shop kept every purchase, and each answer came before the report was read.
			if p.Sold != p.Admitted || p.Held != 0 || p.Released != 0 {
				t.Errorf("product %+v: want every admitted unit sold, none held", p)
			}
			for code, n := range d.purchases {
				if code != "" && p.Refused[code] != int64(n) {
					t.Errorf("refused %s: report %d, test %d (%v)", code, p.Refused[code], n, p.Refused)
				}
			}
			if p.SoldOutAt == nil || p.SoldOutAt.Sub(d.lastSale).Abs() > time.Minute || p.SoldOutAt.Truncate(time.Minute).After(d.firstRefusal) {
				t.Errorf("sold out at %v: the 20th unit went at %v, the first refusal at %v", p.SoldOutAt, d.lastSale, d.firstRefusal)
			} else {
				t.Logf("sold out at %v, %v after the 20th unit", p.SoldOutAt.Format(time.StampMilli), p.SoldOutAt.Sub(d.lastSale))
			}
			// The waits: the test knows each one within its two calls (waitsLo..waitsHi), so each
			// percentile lies between the percentiles of the two bounds; the report's may be off by a
			// tick (how far a join time can be from the counter's samples) plus half the histogram
			// bucket of the wait (its resolution).
			const tick = 250 * time.Millisecond
			for _, q := range []struct {
				name string
				p    float64
				got  report.Seconds
			}{{"p50", .5, s.WaitSeconds.Served.P50}, {"p90", .9, s.WaitSeconds.Served.P90}, {"max", 1, s.WaitSeconds.Served.Max}} {
				lo, hi := nearestRank(d.waitsLo, q.p), nearestRank(d.waitsHi, q.p)
				got := time.Duration(float64(q.got) * float64(time.Second))
				slack := tick + time.Duration(float64(hi)*0.008)
				t.Logf("wait %s: report %v, test %v..%v", q.name, got.Round(time.Millisecond), lo.Round(time.Millisecond), hi.Round(time.Millisecond))
				if got < lo-slack || got > hi+slack {
					t.Errorf("wait %s: the report says %v, the test measured %v..%v (slack %v)", q.name, got, lo, hi, slack)
				}
			}
			checkCSVAgrees(t, replicas[0], query, rep)
			if !strings.Contains(string(raw), `"seed_sha256"`) {
				t.Errorf("the JSON lacks the lottery: %.300s", raw)
			}
		})
	}
}

// checkCSVAgrees reads the CSV of the same range and compares each of its columns with the JSON.
func checkCSVAgrees(t *testing.T, in *instance, query string, rep *report.Report) {
	t.Helper()
	q := query + "&to=" + url.QueryEscape(rep.To.Format(time.RFC3339)) + "&format=csv"
	req, _ := http.NewRequest("GET", in.admin+"/report?"+q, nil)
	req.SetBasicAuth("operator", "test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows)-1 != len(rep.Series.Minute) {
		t.Fatalf("csv has %d rows, the JSON %d minutes", len(rows)-1, len(rep.Series.Minute))
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	sumOf := func(name string) (n int64) {
		for _, r := range rows[1:] {
			v, _ := strconv.ParseInt(r[col[name]], 10, 64)
			n += v
		}
		return n
	}
	for name, want := range map[string]int64{
		"joined": rep.Summary.Joined, "served": rep.Summary.Served, "gave_up": rep.Summary.GaveUp,
		"refused:INVALID_TURNSTILE_TOKEN": rep.Summary.Refused["INVALID_TURNSTILE_TOKEN"],
		"product:sneaker:admitted":        rep.Products[0].Admitted,
		"product:sneaker:sold":            rep.Products[0].Sold,
		"turned_away:sold_out":            rep.Summary.TurnedAway.SoldOut,
		"turned_away:closed":              rep.Summary.TurnedAway.Closed,
	} {
		if _, ok := col[name]; !ok {
			t.Errorf("csv lacks %s: %v", name, rows[0])
		} else if got := sumOf(name); got != want {
			t.Errorf("csv %s sums to %d, the JSON says %d", name, got, want)
		}
	}
	for i, r := range rows[1:] {
		if w := rep.Series.Waiting[i]; (w < 0 && r[col["waiting"]] != "") || (w >= 0 && r[col["waiting"]] != strconv.FormatInt(w, 10)) {
			t.Fatalf("row %d: waiting %q in the csv, %d in the JSON", i, r[col["waiting"]], w)
		}
	}
}

// The report's endpoints take the admin key (the page the dashboard's sign-in), and a bad query gets a
// clear 400 naming the field; a queue that never existed is 404.
func TestReport_BadQueriesAreRefusedClearly(t *testing.T) {
	in := start(t, reportConfig(newOrigin(t).URL, "", "http://127.0.0.1:1", "fifo"))
	get := func(path, auth string) (int, string, string) {
		req, _ := http.NewRequest("GET", in.admin+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(raw)
	}
	if code, challenge, _ := get("/api/report?queue=drop", ""); code != 401 || !strings.HasPrefix(challenge, "Bearer") {
		t.Errorf("the API without the key: %d %q", code, challenge)
	}
	if code, challenge, _ := get("/report?queue=drop", ""); code != 401 || !strings.HasPrefix(challenge, "Basic") {
		t.Errorf("the page without the key: %d %q", code, challenge)
	}
	bearer := "Bearer test-key"
	now := time.Now().UTC()
	at := func(t time.Time) string { return url.QueryEscape(t.Format(time.RFC3339)) }
	for _, c := range []struct{ query, field string }{
		{"queue=", "queue"},
		{"queue=no%20such", "queue"},
		{"queue=drop&from=yesterday", "from"},
		{"queue=drop&to=2026-13-01T00:00:00Z", "to"},
		{"queue=drop&from=" + at(now) + "&to=" + at(now.Add(-time.Hour)), "from"},
		{"queue=drop&from=" + at(now.Add(-400*time.Hour)) + "&to=" + at(now), "from"},
		{"queue=drop&step=90s", "step"},
		{"queue=drop&step=48h", "step"},
		// More than 2,880 points: 13 days in minutes is 18,720.
		{"queue=drop&from=" + at(now.Add(-13*24*time.Hour)) + "&to=" + at(now) + "&step=1m", "step"},
	} {
		code, _, body := get("/api/report?"+c.query, bearer)
		if code != 400 || !strings.Contains(body, `"INVALID_REQUEST"`) || !strings.Contains(body, `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s", c.query, code, body)
		}
	}
	if code, _, body := get("/api/report?queue=never", bearer); code != 404 || !strings.Contains(body, "QUEUE_NOT_FOUND") {
		t.Errorf("a queue that never existed: %d %s", code, body)
	}
	code, _, body := get("/api/report?queue=drop&step=1h", bearer)
	if code != 200 || !strings.Contains(body, `"step_seconds":3600`) {
		t.Errorf("a queue of the file, one-hour points: %d %.200s", code, body)
	}
}

// The report's product and auction series: bids accepted and refused by code, a purchase cancelled
// by an operator, on the embedded store.
func TestReport_CountsBidsAndCancellations(t *testing.T) {
	var admissions sync.Map
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Edgeq-Admission-Id"); id != "" {
			admissions.Store(r.Header.Get("X-User"), id)
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(origin.Close)
	in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
log: {level: warn}
queues:
  - {id: drop, capacity: 5}
products:
  - {id: sneaker, stock: 5, per_user_limit: 1}
auctions:
  - {id: "7", starting_price: "20.00", ends_at: %q}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-User"}
`, origin.URL, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	form := "application/x-www-form-urlencoded"
	for i, amount := range []string{"25.00", "30.00", "26.00", "40.00"} {
		code, errCode, raw := post(t, in.public+"/auctions/7/bid", form, "amount="+amount, map[string]string{"X-User": fmt.Sprint("bidder-", i)})
		if (amount == "26.00") != (errCode == "BID_TOO_LOW") || (errCode == "" && code != 200) {
			t.Fatalf("bid %s: %d %s %s", amount, code, errCode, raw)
		}
	}
	for _, user := range []string{"a", "b"} {
		if code, errCode, raw := post(t, in.public+"/checkout/sneaker", "application/json", "{}", map[string]string{"X-User": user}); code != 200 {
			t.Fatalf("purchase by %s: %d %s %s", user, code, errCode, raw)
		}
	}
	id, _ := admissions.Load("a")
	eventually(t, "the purchase cancelled by the operator", func() bool {
		code, _, _ := post(t, in.admin+"/api/admissions/"+id.(string)+"/cancel", "application/json", "{}",
			map[string]string{"Authorization": "Bearer test-key"})
		return code == 200
	})
	eventually(t, "the report to count the bids and the cancellation", func() bool {
		rep, _ := readReport(t, in, "queue=drop")
		return len(rep.Auctions) == 1 && rep.Auctions[0].Accepted == 3 && len(rep.Products) == 1 && rep.Products[0].Cancelled == 1
	})
	rep, _ := readReport(t, in, "queue=drop")
	a, p := rep.Auctions[0], rep.Products[0]
	if a.ID != "7" || a.Refused["BID_TOO_LOW"] != 1 || len(a.Refused) != 1 {
		t.Errorf("auction %+v", a)
	}
	// Both purchases were sold (the shop kept them), then the operator cancelled one: nothing is held.
	if p.Admitted != 2 || p.Sold != 2 || p.Cancelled != 1 || p.Held != 0 || p.StockLeft == nil || *p.StockLeft != 4 {
		t.Errorf("product %+v (stock left %v)", p, p.StockLeft)
	}
	if h := report.Headline(rep); !strings.Contains(h, "sneaker sold 2 units (4 left), 1 cancelled") || !strings.Contains(h, "7 took 3 bids, 1 refused: 1 bid too low") {
		t.Errorf("headline %q", h)
	}
}
