package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// An app calling a gated API with plain HTTP (no Accept: text/html, no cookie
// jar) is served at once while the queue has room, its token in Edgeq-Token; when the queue is full
// the 403 says where to join and, once it names its place (Edgeq-Request-Id), where it stands.
// Over each protocol (tls_test.go).
func TestAPIClients_ServedAtOnceOrToldWhereTheyStand(t *testing.T) {
	e := newTLSEdge(t)
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) { apiClientsServedOrTold(t, e, proto) })
	}
}

func apiClientsServedOrTold(t *testing.T, e *tlsEdge, proto string) {
	redisSrv := privateRedis(t)
	in := e.start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: app, capacity: 1, token_ttl: 10m}
routes:
  - {name: orders, match: "GET /api/orders", queue: app}
`, newOrigin(t).URL, redisSrv.Addr()), nil)
	client, base := e.over(t, in, proto)
	call := func(h http.Header) (int, http.Header, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/orders", nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Transport.RoundTrip(req) // no cookie jar, no redirects
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, resp.Header, body
	}

	// Room: served at once, the token in Edgeq-Token, which then opens the API.
	code, header, _ := call(nil)
	tok := header.Get("Edgeq-Token")
	if code != 200 || tok == "" {
		t.Fatalf("first app call: %d, Edgeq-Token %q", code, tok)
	}
	if code, _, _ := call(http.Header{"Authorization": {"Bearer " + tok}}); code != 200 {
		t.Fatalf("with its token: %d", code)
	}

	// Full (as the replica sees it once its snapshot is fresh; the admin API refreshes it): 403 with
	// where to wait and to join, and no place taken.
	adminJSON(t, in, "GET", "/api/queue/app", "", nil)
	code, _, body := call(nil)
	if code != 403 || body["error"] != "QUEUE_REQUIRED" || body["queue_id"] != "app" ||
		body["join_url"] != "/_edgeq/assign_queue_pos" || body["wait_url"] == nil || body["queue_position"] != nil {
		t.Fatalf("a full queue: %d %v", code, body)
	}
	// It joins through join_url and names its place: the 403 says where it stands.
	resp, err := client.PostForm(base+body["join_url"].(string), url.Values{"queue_id": {"app"}})
	if err != nil {
		t.Fatal(err)
	}
	var joined struct {
		RequestID string `json:"request_id"`
	}
	json.NewDecoder(resp.Body).Decode(&joined)
	resp.Body.Close()
	code, _, body = call(http.Header{"Edgeq-Request-Id": {joined.RequestID}})
	if code != 403 || body["queue_status"] != "waiting" || body["queue_position"] != float64(2) || body["ahead"] != float64(0) ||
		body["estimated_wait_time"] == nil {
		t.Fatalf("a waiting app: %d %v", code, body)
	}
	// A made-up id names nothing.
	if _, _, body := call(http.Header{"Edgeq-Request-Id": {"00000000-0000-8000-8000-000000000000"}}); body["queue_position"] != nil {
		t.Fatalf("a forged request id: %v", body)
	}
	var q struct {
		AssignedPos int64 `json:"assigned_pos"`
	}
	adminJSON(t, in, "GET", "/api/queue/app", "", &q)
	if q.AssignedPos != 2 {
		t.Fatalf("%d places taken, want 2 (the first app, the one that joined)", q.AssignedPos)
	}
}

// An app that calls without keeping its token takes a place on every call while there is room; past
// the join limit of its address it is told to slow down (429 with Retry-After), not pointed at a join
// that would refuse it too, and no place is taken.
func TestAPIClients_PastTheJoinLimitAreToldToWait(t *testing.T) {
	redisSrv := privateRedis(t)
	in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 3, status_per_ip_per_minute: 0}
queues:
  - {id: app, capacity: 100, token_ttl: 10m}
routes:
  - {name: orders, match: "GET /api/orders", queue: app}
`, newOrigin(t).URL, redisSrv.Addr()))
	codes := make([]int, 0, 6)
	var last *http.Response
	var body map[string]any
	for range 6 {
		req, _ := http.NewRequest("GET", in.public+"/api/orders", nil)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body = nil
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		last = resp
	}
	served := 0
	for _, c := range codes {
		if c == 200 {
			served++
		}
	}
	if served < 3 || codes[5] != http.StatusTooManyRequests || body["error"] != "RATE_LIMITED" || last.Header.Get("Retry-After") == "" {
		t.Fatalf("six calls: %v, last %v (Retry-After %q)", codes, body, last.Header.Get("Retry-After"))
	}
	var q struct {
		AssignedPos int64 `json:"assigned_pos"`
	}
	adminJSON(t, in, "GET", "/api/queue/app", "", &q)
	if q.AssignedPos != int64(served) {
		t.Fatalf("%d places taken for %d calls served", q.AssignedPos, served)
	}
}
