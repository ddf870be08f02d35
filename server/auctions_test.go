package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// auctionsConfig is a bid route identified by the queue token, with auctions_source at sourceURL
// ("" = off).
func auctionsConfig(originURL, redisAddr, sourceURL string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: info}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: room, capacity: 1000}
auctions_source: {url: %q, timeout: 2s, cache_ttl: 60s}
routes:
  - name: bid
    match: "POST /auctions/{id}/bid"
    queue: room
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: token}
`, originURL, redisAddr, sourceURL)
}

// bidWith posts a bid with an access token; mineWith lists the token holder's auctions.
func bidWith(t *testing.T, in *instance, token, auction, amount string) reply {
	t.Helper()
	req, _ := http.NewRequest("POST", in.public+"/auctions/"+auction+"/bid", strings.NewReader(url.Values{"amount": {amount}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func mineWith(t *testing.T, in *instance, token string) (int, map[string]any) {
	t.Helper()
	header := http.Header{"Accept": {"application/json"}}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	r, err := send("GET", in.public+"/_edgeq/auctions/mine", header)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	json.Unmarshal([]byte(r.body), &body)
	return r.status, body
}

// End to end: auctions_source from the configuration file, a bid on the shop's auction without a
// push, the bidder's own list identified by the queue token as the bid route identifies bidders, the
// metrics, and a reload that turns the source off and on again.
func TestAuctionsSource_FromTheConfigurationFileWithTokenBidders(t *testing.T) {
	redisSrv := privateRedis(t)
	origin := newOrigin(t)
	var asked atomic.Int64
	ends := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		switch r.URL.Path {
		case "/api/auctions/vase", "/api/auctions/chair":
			fmt.Fprintf(w, `{"starting_price":"10.00","min_increment":"0.50","ends_at":%q}`, ends)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(shop.Close)
	sourceURL := shop.URL + "/api/auctions/{id}"
	in := start(t, auctionsConfig(origin.URL, redisSrv.Addr(), sourceURL))

	_, alice := joinAndToken(t, in, "room")
	_, bob := joinAndToken(t, in, "room")
	if r := bidWith(t, in, alice, "vase", "12.00"); r.status != 200 {
		t.Fatalf("bid on the shop's auction: %d %s", r.status, r.body)
	}
	r, _ := send("GET", in.public+"/_edgeq/auctions/vase/highest-bid", nil)
	if !strings.Contains(r.body, `"amount":"12.00"`) {
		t.Fatalf("highest bid: %d %s", r.status, r.body)
	}
	if asked.Load() != 1 || in.metric(t, `edgeq_auctions_source_requests_total{result="found"}`) != 1 ||
		in.metric(t, "edgeq_auctions_source_breaker_open") != 0 {
		t.Fatalf("shop asked %d times; metrics found %v", asked.Load(), in.metric(t, `edgeq_auctions_source_requests_total{result="found"}`))
	}

	// The worker picks up the new auction's events (its list of auctions is refreshed every 5 s).
	eventually(t, "alice's bid in her list", func() bool {
		status, body := mineWith(t, in, alice)
		return status == 200 && body["total_count"] == 1.0
	})
	_, body := mineWith(t, in, alice)
	item := body["items"].([]any)[0].(map[string]any)
	if item["auction_id"] != "vase" || item["is_highest"] != true || item["status"] != "active" || item["amount"] != "12.00" {
		t.Fatalf("alice's list: %v", body)
	}
	if status, body := mineWith(t, in, bob); status != 200 || body["total_count"] != 0.0 {
		t.Fatalf("bob's list: %d %v", status, body)
	}
	if status, body := mineWith(t, in, ""); status != 400 || body["error"] != "INVALID_REQUEST" || body["field"] != "user" {
		t.Fatalf("no token: %d %v", status, body)
	}

	// Hot reload: off, then on again.
	in.rewrite(t, auctionsConfig(origin.URL, redisSrv.Addr(), ""))
	eventually(t, "reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == 1 })
	if r := bidWith(t, in, bob, "chair", "12.00"); r.status != 404 || !strings.Contains(r.body, "AUCTION_NOT_FOUND") || asked.Load() != 1 {
		t.Fatalf("with auctions_source off: %d %s (shop asked %d times)", r.status, r.body, asked.Load())
	}
	in.rewrite(t, auctionsConfig(origin.URL, redisSrv.Addr(), sourceURL))
	eventually(t, "reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == 2 })
	if r := bidWith(t, in, bob, "chair", "12.00"); r.status != 200 || asked.Load() != 2 {
		t.Fatalf("with auctions_source on again: %d %s (shop asked %d times)", r.status, r.body, asked.Load())
	}
	if strings.Contains(in.logs.String(), "auctions_source") && strings.Contains(in.logs.String(), "only take effect after a restart") {
		t.Fatalf("auctions_source reported as needing a restart:\n%s", in.logs)
	}
}

// sourceBreakerConfig is a bid route identified by a header, with auctions_source's breaker settings
// given as extra keys of auctions_source.
func sourceBreakerConfig(originURL, sourceURL, breaker string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
log: {level: warn}
auctions_source: {url: %q, timeout: 2s, cache_ttl: 60s%s}
routes:
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-Bidder"}
`, originURL, sourceURL, breaker)
}

// sourceShop answers GET /api/auctions/{id}: vase and chair are auctions, bad-* ids the shop's
// validation refuses (400), down-* a shop in trouble (500), others 404.
func sourceShop(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var asked atomic.Int64
	ends := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		id := strings.TrimPrefix(r.URL.Path, "/api/auctions/")
		switch {
		case id == "vase" || id == "chair":
			fmt.Fprintf(w, `{"starting_price":"10.00","min_increment":"0.50","ends_at":%q}`, ends)
		case strings.HasPrefix(id, "bad-"):
			http.Error(w, `{"error":"invalid id"}`, http.StatusBadRequest)
		case strings.HasPrefix(id, "down-"):
			http.Error(w, "database unavailable", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(shop.Close)
	return shop, &asked
}

func bidAs(t *testing.T, in *instance, bidder, auction, amount string) reply {
	t.Helper()
	req, _ := http.NewRequest("POST", in.public+"/auctions/"+auction+"/bid", strings.NewReader(url.Values{"amount": {amount}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Bidder", bidder)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// Over HTTP: five bids from anyone on ids the shop answers 400 (or 404) to do not
// open auctions_source's breaker; a legitimate first bid on another auction goes through.
func TestAuctionsSource_BidsOnIdsTheShopRefusesCannotOpenTheBreaker(t *testing.T) {
	shop, asked := sourceShop(t)
	in := start(t, sourceBreakerConfig(newOrigin(t).URL, shop.URL+"/api/auctions/{id}", ""))
	for i := range 5 {
		for _, id := range []string{fmt.Sprintf("bad-%d", i), fmt.Sprintf("nope-%d", i)} {
			if r := bidAs(t, in, fmt.Sprintf("mallory-%d", i), id, "5.00"); r.status != 404 || !strings.Contains(r.body, "AUCTION_NOT_FOUND") {
				t.Fatalf("bid on %s: %d %s", id, r.status, r.body)
			}
		}
	}
	if r := bidAs(t, in, "alice", "vase", "12.00"); r.status != 200 {
		t.Fatalf("a legitimate first bid after ten on refused ids: %d %s", r.status, r.body)
	}
	if open := in.metric(t, "edgeq_auctions_source_breaker_open"); open != 0 {
		t.Fatalf("breaker gauge %v", open)
	}
	// Cached as unknown for cache_ttl.
	before := asked.Load()
	if r := bidAs(t, in, "mallory", "bad-0", "5.00"); r.status != 404 || asked.Load() != before {
		t.Fatalf("bid on bad-0 again: %d %s, shop asked %d more times", r.status, r.body, asked.Load()-before)
	}
}

// auctions_source.breaker_failures and breaker_open_for: the breaker opens after that many failures
// in a row, for that long.
func TestAuctionsSource_BreakerSettingsFromTheConfigurationFile(t *testing.T) {
	shop, asked := sourceShop(t)
	in := start(t, sourceBreakerConfig(newOrigin(t).URL, shop.URL+"/api/auctions/{id}", ", breaker_failures: 2, breaker_open_for: 1s"))
	for i := range 2 {
		if r := bidAs(t, in, "alice", fmt.Sprintf("down-%d", i), "5.00"); r.status != 503 {
			t.Fatalf("bid %d on a failing shop: %d %s", i, r.status, r.body)
		}
	}
	if open := in.metric(t, "edgeq_auctions_source_breaker_open"); open != 1 {
		t.Fatalf("after 2 failures: breaker gauge %v", open)
	}
	if r := bidAs(t, in, "alice", "vase", "12.00"); r.status != 503 || asked.Load() != 2 {
		t.Fatalf("while open: %d %s, shop asked %d times", r.status, r.body, asked.Load())
	}
	time.Sleep(1100 * time.Millisecond)
	if r := bidAs(t, in, "alice", "vase", "12.00"); r.status != 200 {
		t.Fatalf("after breaker_open_for: %d %s", r.status, r.body)
	}
}
