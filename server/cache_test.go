package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// cacheableOrigin answers every request as a shop answers a page it means CDNs to keep: public for
// ten minutes, in every header a cache in front may read.
func cacheableOrigin(t *testing.T) *httptest.Server {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "public, max-age=600, s-maxage=600")
		h.Set("CDN-Cache-Control", "max-age=600")
		h.Set("Cloudflare-CDN-Cache-Control", "max-age=600")
		h.Set("Surrogate-Control", "max-age=600")
		h.Set("Expires", time.Now().Add(10*time.Minute).UTC().Format(http.TimeFormat))
		h.Set("Vary", "Accept-Encoding")
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("ETag", `"v1"`)
		fmt.Fprint(w, "page ", r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	return origin
}

// sharedCacheHeaders are the headers that let a cache in front of edgeq keep an answer for others.
var sharedCacheHeaders = []string{"CDN-Cache-Control", "Cloudflare-CDN-Cache-Control", "Surrogate-Control", "Expires"}

// An answer to which edgeq adds a credential (the token cookie, the request cookie,
// Edgeq-Token) is never storable by a cache in front, whatever the shop said about its page: a CDN
// would hand one visitor's token to the next. Answers without one keep the shop's caching headers.
func TestCache_AnswersCarryingACredentialAreNeverStorable(t *testing.T) {
	in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: shop, capacity: 100, token_ttl: 2s, session_renewal: true}
  - {id: line, capacity: 0, token_ttl: 10m}
routes:
  - {name: shop, match: "GET /shop/", queue: shop}
  - {name: line, match: "GET /line/", queue: line}
`, cacheableOrigin(t).URL))
	call := func(t *testing.T, path string, h http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", in.public+path, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no cookie jar, no redirects
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	private := func(t *testing.T, what string, resp *http.Response) {
		t.Helper()
		if got := resp.Header.Values("Cache-Control"); len(got) != 1 || got[0] != "private, no-store" {
			t.Errorf("%s: Cache-Control %q, want \"private, no-store\"", what, got)
		}
		for _, name := range sharedCacheHeaders {
			if v := resp.Header.Values(name); len(v) > 0 {
				t.Errorf("%s: %s %q kept", what, name, v)
			}
		}
	}
	untouched := func(t *testing.T, what string, resp *http.Response) {
		t.Helper()
		if got := resp.Header.Get("Cache-Control"); got != "public, max-age=600, s-maxage=600" {
			t.Errorf("%s: Cache-Control %q, want the shop's", what, got)
		}
		for _, name := range sharedCacheHeaders {
			if resp.Header.Get(name) == "" {
				t.Errorf("%s: the shop's %s was dropped", what, name)
			}
		}
	}
	tokenCookie := func(resp *http.Response) string {
		for _, c := range resp.Cookies() {
			if c.Name == "edgeq_tk_shop" {
				return c.Value
			}
		}
		return ""
	}

	// A browser served at once: the request cookie and the token cookie on the shop's page.
	page := http.Header{"Accept": {"text/html"}, "Sec-Fetch-Dest": {"document"}}
	resp := call(t, "/shop/page", page)
	tok := tokenCookie(resp)
	if resp.StatusCode != 200 || tok == "" {
		t.Fatalf("a browser served at once: %d, token cookie %q", resp.StatusCode, tok)
	}
	private(t, "a browser served at once", resp)

	// An API client served at once: Edgeq-Token on the shop's answer.
	resp = call(t, "/shop/api", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Edgeq-Token") == "" {
		t.Fatalf("an API client served at once: %d, Edgeq-Token %q", resp.StatusCode, resp.Header.Get("Edgeq-Token"))
	}
	private(t, "an API client served at once", resp)

	// With a fresh token nothing is added: the shop's caching headers reach the client as they were.
	resp = call(t, "/shop/page", http.Header{"Authorization": {"Bearer " + tok}})
	if resp.StatusCode != 200 || resp.Header.Get("Edgeq-Token") != "" {
		t.Fatalf("a fresh token: %d, Edgeq-Token %q", resp.StatusCode, resp.Header.Get("Edgeq-Token"))
	}
	untouched(t, "a request with a fresh token", resp)
	// Nor on a route without a gate.
	untouched(t, "an ungated page", call(t, "/news", nil))

	// Past half of the token's life, the renewal rides on the shop's answer: a 200, and a 304.
	time.Sleep(1100 * time.Millisecond)
	resp = call(t, "/shop/page", http.Header{"Authorization": {"Bearer " + tok}})
	if resp.StatusCode != 200 || resp.Header.Get("Edgeq-Token") == "" {
		t.Fatalf("a renewal: %d, Edgeq-Token %q", resp.StatusCode, resp.Header.Get("Edgeq-Token"))
	}
	private(t, "a renewal", resp)
	resp = call(t, "/shop/page", http.Header{"Authorization": {"Bearer " + tok}, "If-None-Match": {`"v1"`}})
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("Edgeq-Token") == "" {
		t.Fatalf("a renewal on a 304: %d, Edgeq-Token %q", resp.StatusCode, resp.Header.Get("Edgeq-Token"))
	}
	private(t, "a renewal on a 304", resp)
	if !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
		t.Errorf("Vary %q: the shop's Vary is kept", resp.Header.Get("Vary"))
	}

	// An API client whose place was reached gets its token on the shop's answer.
	joinResp, err := http.PostForm(in.public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {"line"}})
	if err != nil {
		t.Fatal(err)
	}
	var joined struct {
		RequestID string `json:"request_id"`
	}
	json.NewDecoder(joinResp.Body).Decode(&joined)
	joinResp.Body.Close()
	if resp := call(t, "/line/api", http.Header{"Edgeq-Request-Id": {joined.RequestID}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a place not reached yet: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", in.admin+"/api/queue/increment_serving_position",
		strings.NewReader(url.Values{"queue_id": {"line"}, "increment_by": {"1"}}.Encode()))
	req.Header.Set("Authorization", "Bearer test-key")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("increment_serving_position: %v %v", r, err)
	}
	eventually(t, "the reached place served", func() bool {
		resp = call(t, "/line/api", http.Header{"Edgeq-Request-Id": {joined.RequestID}})
		return resp.StatusCode == 200
	})
	if resp.Header.Get("Edgeq-Token") == "" {
		t.Fatal("a reached place: no Edgeq-Token")
	}
	private(t, "a reached place", resp)
}
