package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// soldOutConfig is a drop of 20 sneakers: a queue with room for one at a time that sells out with
// the sneaker, a checkout with stock admission, and the drop's product page behind the queue.
func soldOutConfig(originURL, redisAddr string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: drop, capacity: 1, token_ttl: 10m, sold_out_with: [sneaker]}
products:
  - {id: sneaker, stock: 20, per_user_limit: 1, name: "Sneaker"}
routes:
  - {name: products, match: "GET /products/{id}", queue: drop}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, originURL, redisAddr)
}

// joinQueue asks for a place in a queue; it returns the status and the request id (when 200).
func joinQueue(t *testing.T, in *instance, queue string) (int, string) {
	t.Helper()
	resp, err := http.PostForm(in.public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {queue}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		RequestID string `json:"request_id"`
	}
	json.Unmarshal(raw, &body)
	if resp.StatusCode == 200 && body.RequestID == "" {
		t.Errorf("join answered 200 without a request id: %s", raw)
	}
	if resp.StatusCode != 200 {
		t.Logf("join of %s: %d %s", queue, resp.StatusCode, raw)
	}
	return resp.StatusCode, body.RequestID
}

func statusOf(t *testing.T, in *instance, id string) map[string]any {
	t.Helper()
	resp, err := http.Get(in.public + "/_edgeq/status/drop/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return body
}

// Stock 20 and 500 visitors waiting; the 20th purchase turns every waiting visitor's
// status to sold_out within a second, newcomers get 410 SOLD_OUT (API) or the sold-out page (browser),
// the metric says so, and a restock reopens the queue with every place kept.
func TestSoldOut_TheLastUnitEndsEveryWaitAndARestockReopens(t *testing.T) {
	redisSrv := privateRedis(t)
	in := start(t, soldOutConfig(newOrigin(t).URL, redisSrv.Addr()))
	ids := make([]string, 500)
	positions := make([]any, len(ids))
	for i := range ids {
		_, ids[i] = joinQueue(t, in, "drop")
	}
	for i, id := range ids {
		positions[i] = statusOf(t, in, id)["queue_position"]
	}
	var last time.Time
	for i := range 20 {
		req, _ := http.NewRequest("POST", in.public+"/checkout/sneaker", nil)
		req.Header.Set("X-User", fmt.Sprintf("buyer-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("purchase %d: %d", i, resp.StatusCode)
		}
		last = time.Now()
	}
	// Every waiting visitor (all but the one served) is told sold_out within a second. A waiting
	// visitor's status comes from the replica's snapshot, which the tick turns sold_out for the whole
	// queue at once: the second is timed on one visitor, and then every other one must say sold_out
	// too. (Timing a pass over all 499 timed the pass: on a loaded machine 499 requests in a row take
	// longer than a second by themselves, and "444 of 499" failed a sale that had sold out in time.)
	for statusOf(t, in, ids[len(ids)-1])["queue_status"] != "sold_out" {
		if time.Since(last) > time.Second {
			t.Fatalf("the last waiting visitor not told sold_out a second after the last unit")
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := 0
	for _, id := range ids[1:] {
		if statusOf(t, in, id)["queue_status"] == "sold_out" {
			out++
		}
	}
	if out != len(ids)-1 {
		t.Fatalf("%d of %d waiting visitors told sold_out once the queue was", out, len(ids)-1)
	}
	resp, err := http.PostForm(in.public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 410 || !strings.Contains(string(body), `"SOLD_OUT"`) {
		t.Fatalf("newcomer after the sell-out: %d %s", resp.StatusCode, body)
	}
	api, _ := send("GET", in.public+"/products/sneaker", http.Header{"Accept": {"application/json"}})
	if api.status != 410 || !strings.Contains(api.body, `"SOLD_OUT"`) {
		t.Fatalf("API client on the gated page after the sell-out: %d %s", api.status, api.body)
	}
	page, _ := send("GET", in.public+"/_edgeq/wait/drop?return=%2Fproducts%2Fsneaker", http.Header{"Accept": {"text/html"}})
	if page.status != 410 || !strings.Contains(page.body, "Sold out") {
		t.Fatalf("newcomer's page after the sell-out: %d %s", page.status, page.body)
	}
	if v := in.metric(t, `edgeq_queue_state{queue="drop",state="sold_out"}`); v != 1 {
		t.Fatalf("edgeq_queue_state sold_out = %v", v)
	}
	// A restock reopens the queue: the same places, waiting again.
	req, _ := http.NewRequest("POST", in.admin+"/api/products/sneaker/restock", strings.NewReader(`{"amount": 5}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer test-key")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("restock: %v %v", resp, err)
	}
	eventually(t, "the queue reopened", func() bool {
		return statusOf(t, in, ids[1])["queue_status"] == "waiting"
	})
	for i, id := range ids[1:] {
		st := statusOf(t, in, id)
		if st["queue_status"] != "waiting" || st["queue_position"] != positions[i+1] {
			t.Fatalf("visitor %d after the restock: %v (position before %v)", i+1, st, positions[i+1])
		}
	}
	if v := in.metric(t, `edgeq_queue_state{queue="drop",state="open"}`); v != 1 {
		t.Fatalf("edgeq_queue_state open = %v after the restock", v)
	}
}

// A drop's schedule and method are hot (docs/operations.md "Running a drop"): a reload that moves
// opens_at into the past opens the queue, one that sets method reject closes it to newcomers; the file
// is the only input.
func TestReload_TheDropsScheduleAndMethodAreHot(t *testing.T) {
	origin := newOrigin(t)
	queue := func(extra string) string {
		return configText(origin.URL, `  - {name: drop, match: "GET /drop", queue: drop}`) +
			"queues:\n  - {id: drop, capacity: 10, " + extra + "}\n"
	}
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	in := start(t, queue(`opens_at: "`+later+`", prequeue: 2h, shuffle: true`))
	join := func() (int, string) { return joinQueue(t, in, "drop") }
	ids := make([]string, 5)
	for i := range ids {
		code, id := join()
		if code != 200 {
			t.Fatalf("join to the pre-queue: %d", code)
		}
		ids[i] = id
	}
	if st := statusOf(t, in, ids[0]); st["queue_status"] != "prequeue" {
		t.Fatalf("before the opening: %v", st)
	}
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	in.rewrite(t, queue(`opens_at: "`+past+`", prequeue: 2h, shuffle: true`))
	eventually(t, "opened by the reload", func() bool {
		return statusOf(t, in, ids[0])["queue_status"] == "served" || statusOf(t, in, ids[0])["queue_status"] == "waiting"
	})
	for _, id := range ids {
		if st := statusOf(t, in, id); st["queue_status"] != "served" {
			t.Fatalf("after the opening (capacity 10, 5 in the pre-queue): %v", st)
		}
	}
	if !strings.Contains(in.logs.String(), "the pre-queue's order was drawn by lot") || !strings.Contains(in.logs.String(), "seed_sha256") {
		t.Fatalf("the lottery was not logged:\n%s", in.logs)
	}
	in.rewrite(t, queue(`opens_at: "`+past+`", prequeue: 2h, shuffle: true, method: reject`))
	eventually(t, "closed by the reload", func() bool { code, _ := join(); return code == 410 })
}
