package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// visitorConfig is one queue with room, a product guarded per browser (user: visitor) and one guarded
// per place in line (user: token), both one per buyer.
func visitorConfig(originURL, redisAddr string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: drop, capacity: 100, token_ttl: 10m}
products:
  - {id: cap, stock: 10, per_user_limit: 1}
  - {id: scarf, stock: 10, per_user_limit: 1}
routes:
  - {name: per_browser, match: "POST /buy/{product}", queue: drop, admission: {type: stock, product: "path:product", user: visitor}}
  - {name: per_place, match: "POST /per-place/{product}", queue: drop, admission: {type: stock, product: "path:product", user: token}}
`, originURL, redisAddr)
}

// buyer is a client of the drop queue: an app (no cookies, its visitor id kept from Edgeq-Visitor) or
// a browser (a cookie jar).
type buyer struct {
	t       *testing.T
	base    string
	client  *http.Client
	visitor string // an app's visitor id, sent in Edgeq-Visitor
	token   string // an app's access token
	place   string // the request id of its current place
}

func newBuyer(t *testing.T, base string, browser bool) *buyer {
	b := &buyer{t: t, base: base, client: &http.Client{}}
	if browser {
		b.client.Jar, _ = cookiejar.New(nil)
	}
	return b
}

// call sends a form as the buyer; an app keeps the visitor id an answer gives it.
func (b *buyer) call(path string, form url.Values) (int, map[string]any) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if b.client.Jar == nil {
		if b.visitor != "" {
			req.Header.Set("Edgeq-Visitor", b.visitor)
		}
		if b.token != "" {
			req.Header.Set("Authorization", "Bearer "+b.token)
		}
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if v := resp.Header.Get("Edgeq-Visitor"); v != "" && b.client.Jar == nil && b.visitor == "" {
		b.visitor = v
	}
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// join takes a new place in the drop queue and its token (a browser's in its cookie).
func (b *buyer) join() {
	b.t.Helper()
	code, body := b.call("/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}})
	id, _ := body["request_id"].(string)
	if code != 200 || id == "" || id == b.place {
		b.t.Fatalf("join: %d %v (last place %s)", code, body, b.place)
	}
	b.place = id
	code, body = b.call("/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {id}})
	if code != 200 {
		b.t.Fatalf("token: %d %v", code, body)
	}
	b.token, _ = body["access_token"].(string)
}

// Under user: visitor a browser or an app is one buyer across its places in line: it buys, its
// session ends as an order completes it, it joins again for a new place, and its second purchase is
// refused ALREADY_PURCHASED. Under user: token the same buyer buys again with its new place (the
// documented trade-off). The visitor ids are in neither the store nor the admin API.
func TestVisitor_OneBuyerAcrossQueuePlaces(t *testing.T) {
	redisSrv := privateRedis(t)
	var hits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"ok": true}`)
	}))
	t.Cleanup(origin.Close)
	in := start(t, visitorConfig(origin.URL, redisSrv.Addr()))
	remaining := func(product string) float64 {
		var p struct {
			RemainingStock float64 `json:"remaining_stock"`
		}
		resp, err := http.Get(in.public + "/_edgeq/products/" + product)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&p)
		return p.RemainingStock
	}
	complete := func(place string) {
		form := url.Values{"queue_id": {"drop"}, "request_id": {place}, "status": {"1"}}
		req, _ := http.NewRequest("POST", in.admin+"/api/queue/update_token_status", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer test-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("completing %s: %v %v", place, resp, err)
		}
		resp.Body.Close()
	}

	var visitorIDs []string
	for _, browser := range []bool{false, true} {
		b := newBuyer(t, in.public, browser)
		b.join()
		if code, body := b.call("/buy/cap", nil); code != 200 {
			t.Fatalf("browser %v, first purchase: %d %v", browser, code, body)
		}
		if code, body := b.call("/per-place/scarf", nil); code != 200 {
			t.Fatalf("browser %v, first purchase per place: %d %v", browser, code, body)
		}
		complete(b.place)
		b.join()
		if code, body := b.call("/buy/cap", nil); code != 409 || body["error"] != "ALREADY_PURCHASED" {
			t.Fatalf("browser %v, again with a new place: %d %v", browser, code, body)
		}
		if code, body := b.call("/per-place/scarf", nil); code != 200 {
			t.Fatalf("browser %v, again per place: %d %v, want a second unit", browser, code, body)
		}
		if browser {
			u, _ := url.Parse(in.public)
			for _, c := range b.client.Jar.Cookies(u) {
				if c.Name == "edgeq_vid" {
					visitorIDs = append(visitorIDs, c.Value)
				}
			}
		} else {
			visitorIDs = append(visitorIDs, b.visitor)
		}
	}
	if len(visitorIDs) != 2 || visitorIDs[0] == visitorIDs[1] {
		t.Fatalf("visitor ids %q: want one for the app and one for the browser", visitorIDs)
	}
	if got := remaining("cap"); got != 8 {
		t.Fatalf("cap: %v left, want 8 (one for each buyer)", got)
	}
	if got := remaining("scarf"); got != 6 {
		t.Fatalf("scarf: %v left, want 6 (two for each buyer)", got)
	}

	// Without its visitor id nothing is taken and the shop hears nothing.
	app := newBuyer(t, in.public, false)
	app.join()
	app.visitor = ""
	before := hits.Load()
	code, body := app.call("/buy/cap", nil)
	if code != 400 || body["error"] != "INVALID_REQUEST" || body["field"] != "user" {
		t.Fatalf("without a visitor id: %d %v", code, body)
	}
	if hits.Load() != before || remaining("cap") != 8 {
		t.Fatalf("without a visitor id: the shop got %d requests, %v left", hits.Load()-before, remaining("cap"))
	}

	// Once the event worker has recorded the six admissions, neither the store nor the admin API shows
	// a visitor id: buyers are pseudonyms.
	var listed struct {
		Items []struct {
			User string `json:"user"`
		} `json:"items"`
		TotalCount int `json:"total_count"`
	}
	eventually(t, "the admissions listed", func() bool {
		adminJSON(t, in, "GET", "/api/admissions", "", &listed)
		return listed.TotalCount == 6
	})
	stored := storeText(t, redisSrv.Addr())
	for _, signed := range visitorIDs {
		id, _, _ := strings.Cut(signed, ".")
		for _, item := range listed.Items {
			if item.User == "" || strings.Contains(item.User, id) {
				t.Fatalf("admission listed with user %q (visitor %s)", item.User, id)
			}
		}
		if strings.Contains(stored, id) {
			t.Fatalf("visitor id %s is stored in clear", id)
		}
	}
}
