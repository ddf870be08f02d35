package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// inviteConfig is a presale: an invite-only queue with room for one at a time, its product pages
// behind it.
func inviteConfig(originURL, redisAddr string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: pre, capacity: 1, token_ttl: 10m, invite_only: true}
routes:
  - {name: presale, match: "GET /pre/", queue: pre}
`, originURL, redisAddr)
}

type createdInvites struct {
	Items []struct {
		Code      string `json:"code"`
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	} `json:"items"`
}

func createInvites(t *testing.T, in *instance, queue, body string) createdInvites {
	t.Helper()
	var out createdInvites
	if code := adminJSON(t, in, "POST", "/api/queue/"+queue+"/invites", body, &out); code != http.StatusCreated {
		t.Fatalf("creating invitations %s: %d", body, code)
	}
	return out
}

// guest is a browser following an invitation link: it opens the page (GET), whose script posts the
// form at once. It returns the POST's status, its Location and its body.
func (s *shopper) useInvite(t *testing.T, base, link string) (int, string, string) {
	t.Helper()
	get, _ := http.NewRequest("GET", base+link, nil)
	get.Header.Set("Accept", "text/html")
	resp, err := s.client.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The code is in the URL: every answer here lets a browser send the origin only.
	if p := resp.Header.Get("Referrer-Policy"); p != "strict-origin" {
		t.Errorf("GET %s: Referrer-Policy %q, want strict-origin", link, p)
	}
	if resp.StatusCode != 200 || !strings.Contains(string(page), `<form id="invite" method="post"`) {
		return resp.StatusCode, resp.Header.Get("Location"), string(page)
	}
	// What a browser sends for the page's form.
	post, _ := http.NewRequest("POST", base+link, strings.NewReader(""))
	post.Header.Set("Accept", "text/html")
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Sec-Fetch-Site", "same-origin")
	post.Header.Set("Sec-Fetch-Mode", "navigate")
	resp, err = s.client.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if p := resp.Header.Get("Referrer-Policy"); p != "strict-origin" {
		t.Errorf("POST %s (%d): Referrer-Policy %q, want strict-origin", link, resp.StatusCode, p)
	}
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// storeText is every key, field and value of a redis-server, for looking for secrets in it.
func storeText(t *testing.T, addr string) string {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "\n")
		switch c.Type(ctx, k).Val() {
		case "string":
			b.WriteString(c.Get(ctx, k).Val())
		case "hash":
			for f, v := range c.HGetAll(ctx, k).Val() {
				b.WriteString(f + "=" + v + "\n")
			}
		case "zset":
			b.WriteString(strings.Join(c.ZRange(ctx, k, 0, -1).Val(), "\n"))
		case "set":
			b.WriteString(strings.Join(c.SMembers(ctx, k).Val(), "\n"))
		case "list":
			b.WriteString(strings.Join(c.LRange(ctx, k, 0, -1).Val(), "\n"))
		case "stream":
			for _, m := range c.XRange(ctx, k, "-", "+").Val() {
				fmt.Fprint(&b, m.Values)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// 10,000 invitations in one call; none is in the store in clear; each works
// once (the second use elsewhere shows the used page, the same browser goes on); opening the link
// without the page's script uses nothing; expired ones are refused; a front invitation serves at once
// with 500 waiting; an invite-only queue refuses everyone else; the list shows which were used.
func TestInvitations_OncePerCodeFrontServesAtOnceInviteOnlyRefusesTheRest(t *testing.T) {
	redisSrv := privateRedis(t)
	in := start(t, inviteConfig(newOrigin(t).URL, redisSrv.Addr()))

	created := createInvites(t, in, "pre", `{"count": 10000, "ttl_second": 3600}`)
	if len(created.Items) != 10000 {
		t.Fatalf("%d invitations created", len(created.Items))
	}
	codes := map[string]bool{}
	for _, it := range created.Items {
		if codes[it.Code] || len(it.Code) != 22 || it.URL != "/_edgeq/invite/pre/"+it.Code || it.ExpiresAt == "" {
			t.Fatalf("invitation %+v (duplicate %t)", it, codes[it.Code])
		}
		codes[it.Code] = true
	}
	// The store holds each code's SHA-256 and never the code: every 22-byte window of everything in
	// it is looked up.
	text := storeText(t, redisSrv.Addr())
	sum := sha256.Sum256([]byte(created.Items[0].Code))
	if !strings.Contains(text, hex.EncodeToString(sum[:])) {
		t.Fatal("the store does not hold the invitations' hashes: is this the right store?")
	}
	for i := 0; i+22 <= len(text); i++ {
		if codes[text[i:i+22]] {
			t.Fatalf("an invitation code is in the store in clear near %q", text[max(0, i-40):i+22])
		}
	}

	// Nobody joins without an invitation: API, waiting page, gated page.
	if code, _ := joinQueue(t, in, "pre"); code != http.StatusForbidden {
		t.Fatalf("uninvited join: %d, want 403", code)
	}
	stranger := newShopper(t, "pre")
	if code, loc, _ := stranger.visit(t, in.public); code != http.StatusFound || !strings.Contains(loc, "/_edgeq/wait/pre") {
		t.Fatalf("uninvited navigation: %d %q", code, loc)
	}
	// An app's call is told it needs an invitation, not pointed at a join that would refuse it.
	api, _ := http.NewRequest("GET", in.public+"/pre/page", nil)
	api.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(api)
	if err != nil {
		t.Fatal(err)
	}
	refused, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(refused), `"error":"INVITE_REQUIRED"`) ||
		!strings.Contains(string(refused), `"queue_id":"pre"`) || strings.Contains(string(refused), "join_url") {
		t.Fatalf("uninvited API call: %d %s", resp.StatusCode, refused)
	}
	req, _ := http.NewRequest("GET", in.public+"/_edgeq/wait/pre", nil)
	req.Header.Set("Accept", "text/html")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(page), "By invitation only") {
		t.Fatalf("uninvited waiting page: %d\n%s", resp.StatusCode, page)
	}

	// Opening a link without running the page's script (a mail scanner) uses nothing.
	if code := get(t, in.public+created.Items[0].URL); code != 200 {
		t.Fatalf("GET of an invitation link: %d", code)
	}
	var unused struct {
		TotalCount int `json:"total_count"`
	}
	adminJSON(t, in, "GET", "/api/queue/pre/invites?used=true", "", &unused)
	if unused.TotalCount != 0 {
		t.Fatalf("a GET used %d invitations", unused.TotalCount)
	}

	// 500 guests use theirs: the first is served (capacity 1), 499 wait.
	guests := make([]*shopper, 500)
	var wg sync.WaitGroup
	var mu sync.Mutex
	served := 0
	for i := range guests {
		guests[i] = newShopper(t, "pre")
		wg.Go(func() {
			code, loc, _ := guests[i].useInvite(t, in.public, created.Items[i].URL+"?return=/pre/page")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == http.StatusSeeOther && loc == "/pre/page":
				served++
			case code == http.StatusSeeOther && strings.HasPrefix(loc, "/_edgeq/wait/pre?return="):
			default:
				t.Errorf("guest %d: %d %q", i, code, loc)
			}
		})
	}
	wg.Wait()
	if served != 1 || t.Failed() {
		t.Fatalf("%d guests served at once with capacity 1", served)
	}
	// A guest in line (the request cookie) calling from a script is told where they stand.
	call, _ := http.NewRequest("GET", in.public+"/pre/page", nil)
	call.Header.Set("Accept", "application/json")
	for i := range guests {
		resp, err := guests[i].client.Do(call)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			continue // the one served
		}
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"error":"QUEUE_REQUIRED"`) ||
			!strings.Contains(string(b), `"queue_status":"waiting"`) {
			t.Fatalf("a waiting guest's API call: %d %s", resp.StatusCode, b)
		}
		break
	}
	var q struct {
		WaitingNum int64 `json:"waiting_num"`
		ActiveNum  int64 `json:"active_num"`
		Invites    struct {
			Total, Used, Unused int64
		} `json:"invites"`
	}
	adminJSON(t, in, "GET", "/api/queue/pre", "", &q)
	if q.WaitingNum != 499 || q.Invites.Total != 10000 || q.Invites.Used != 500 || q.Invites.Unused != 9500 {
		t.Fatalf("queue after 500 invitations: %+v", q)
	}

	// A second use: elsewhere the used page, in the same browser the way on.
	other := newShopper(t, "pre")
	code, _, body := other.useInvite(t, in.public, created.Items[7].URL)
	if code != http.StatusGone || !strings.Contains(body, "Invitation already used") {
		t.Fatalf("second use elsewhere: %d\n%s", code, body)
	}
	if code, loc, _ := guests[7].useInvite(t, in.public, created.Items[7].URL); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/_edgeq/wait/pre") {
		t.Fatalf("second use by the same guest: %d %q", code, loc)
	}

	// A front invitation is served at once with 499 waiting, and its guest lands on the shop.
	front := createInvites(t, in, "pre", `{"count": 1, "front": true}`)
	vip := newShopper(t, "pre")
	if code, loc, _ := vip.useInvite(t, in.public, front.Items[0].URL+"?return=/pre/launch"); code != http.StatusSeeOther || loc != "/pre/launch" {
		t.Fatalf("front invitation: %d %q, want 303 to /pre/launch", code, loc)
	}
	if code, loc, _ := vip.visit(t, in.public); code != 200 {
		t.Fatalf("front guest on the shop: %d %q", code, loc)
	}
	adminJSON(t, in, "GET", "/api/queue/pre", "", &q)
	if q.WaitingNum != 499 || q.ActiveNum != 2 {
		t.Fatalf("after the front invitation: waiting %d, active %d (want 499 and 2)", q.WaitingNum, q.ActiveNum)
	}

	// Expired and unknown codes, a deleted one.
	short := createInvites(t, in, "pre", `{"count": 2, "ttl_second": 1}`)
	time.Sleep(1100 * time.Millisecond)
	if code, _, body := newShopper(t, "pre").useInvite(t, in.public, short.Items[0].URL); code != http.StatusGone || !strings.Contains(body, "Invitation expired") {
		t.Fatalf("expired invitation: %d\n%s", code, body)
	}
	if code, _, _ := newShopper(t, "pre").useInvite(t, in.public, "/_edgeq/invite/pre/AAAAAAAAAAAAAAAAAAAAAA"); code != http.StatusNotFound {
		t.Fatalf("unknown invitation: %d", code)
	}
	if code := adminJSON(t, in, "DELETE", "/api/queue/pre/invites/"+created.Items[9999].Code, "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE by code: %d", code)
	}
	if code, _, _ := newShopper(t, "pre").useInvite(t, in.public, created.Items[9999].URL); code != http.StatusNotFound {
		t.Fatalf("deleted invitation: %d", code)
	}
	if code := adminJSON(t, in, "DELETE", "/api/queue/pre/invites/"+created.Items[9999].Code, "", nil); code != http.StatusNotFound {
		t.Fatalf("DELETE again: %d", code)
	}

	// The list shows which were used; ids are hashes, and DELETE takes them too.
	type listed struct {
		ID       string `json:"id"`
		Used     bool   `json:"used"`
		Position int64  `json:"position"`
		Front    bool   `json:"front"`
	}
	var used struct {
		Items      []listed `json:"items"`
		TotalCount int      `json:"total_count"`
	}
	for page := 1; page <= 6; page++ {
		var p struct {
			Items      []listed `json:"items"`
			TotalCount int      `json:"total_count"`
		}
		adminJSON(t, in, "GET", fmt.Sprintf("/api/queue/pre/invites?used=true&page=%d", page), "", &p)
		used.Items, used.TotalCount = append(used.Items, p.Items...), p.TotalCount
	}
	if used.TotalCount != 501 || len(used.Items) != 501 {
		t.Fatalf("used invitations listed: %d (%d items), want 501", used.TotalCount, len(used.Items))
	}
	fronts := 0
	for _, it := range used.Items {
		if !it.Used || it.Position == 0 || len(it.ID) != 64 {
			t.Fatalf("listed %+v", it)
		}
		if it.Front {
			fronts++
		}
	}
	if fronts != 1 {
		t.Fatalf("%d front invitations listed as used", fronts)
	}
	if code := adminJSON(t, in, "DELETE", "/api/queue/pre/invites/"+used.Items[0].ID, "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE by id: %d", code)
	}
	adminJSON(t, in, "GET", "/api/queue/pre", "", &q)
	if q.Invites.Total != 10000+1+2-2 || q.Invites.Used != 500 {
		t.Fatalf("counts after two deletions: %+v", q.Invites)
	}

	// Bad input changes nothing; the admin key is required.
	for _, body := range []string{`{"count": 0}`, `{"count": 10001}`, `{"count": 1, "ttl_second": 0}`, `{"count": "many"}`} {
		if code := adminJSON(t, in, "POST", "/api/queue/pre/invites", body, nil); code != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", body, code)
		}
	}
	if code := adminJSON(t, in, "POST", "/api/queue/nope/invites", `{"count": 1}`, nil); code != http.StatusNotFound {
		t.Errorf("invitations of an unknown queue: %d", code)
	}
	noKey, _ := http.NewRequest("POST", in.admin+"/api/queue/pre/invites", strings.NewReader(`{"count": 1}`))
	if resp, err := http.DefaultClient.Do(noKey); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the key: %v %v", resp.StatusCode, err)
	}
	adminJSON(t, in, "GET", "/api/queue/pre", "", &q)
	if q.Invites.Total != 10001 {
		t.Errorf("refused requests changed the invitations: %+v", q.Invites)
	}
	if n := in.metric(t, `edgeq_invites_total{queue="pre",result="used"}`); n != 1 {
		t.Errorf(`edgeq_invites_total{result="used"} = %v`, n)
	}
}

// bypassConfig lets 203.0.113.0/24 and 127.0.0.1 past a queue with no room at all.
func bypassConfig(originURL, redisAddr, trusted string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0", trusted_proxies: [%s]}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
queues:
  - {id: full, capacity: 0, bypass_cidrs: ["203.0.113.0/24"]}
routes:
  - {name: full, match: "GET /full/", queue: full}
`, trusted, originURL, redisAddr)
}

// bypass_cidrs are honoured for the client address found through
// trusted_proxies: behind a trusted proxy, a client of the range is served at once, counted, and holds
// no capacity; the same X-Forwarded-For from an untrusted peer bypasses nothing.
func TestBypass_OnlyThroughTrustedProxies(t *testing.T) {
	redisSrv := privateRedis(t)
	origin := newOrigin(t)
	behindProxy := start(t, bypassConfig(origin.URL, redisSrv.Addr(), `"127.0.0.1"`))
	noTrust := start(t, bypassConfig(origin.URL, redisSrv.Addr(), ""))
	send := func(in *instance, path, xff string) int {
		req, _ := http.NewRequest("GET", in.public+path, nil)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 3 {
		if code := send(behindProxy, "/full/page", "203.0.113.9"); code != 200 {
			t.Fatalf("staff behind the trusted proxy: %d, want 200", code)
		}
	}
	if code := send(behindProxy, "/full/page", "198.51.100.1"); code != http.StatusForbidden {
		t.Fatalf("a shopper behind the trusted proxy: %d, want 403 (no room)", code)
	}
	if code := send(noTrust, "/full/page", "203.0.113.9"); code != http.StatusForbidden {
		t.Fatalf("spoofed X-Forwarded-For from an untrusted peer: %d, want 403", code)
	}
	if n := behindProxy.metric(t, `edgeq_queue_bypassed_total{queue="full"}`); n != 3 {
		t.Errorf("edgeq_queue_bypassed_total = %v, want 3", n)
	}
	var q struct {
		ActiveNum   int64 `json:"active_num"`
		AssignedPos int64 `json:"assigned_pos"`
	}
	adminJSON(t, behindProxy, "GET", "/api/queue/full", "", &q)
	if q.ActiveNum != 0 || q.AssignedPos != 0 {
		t.Errorf("bypassed requests held capacity or places: %+v", q)
	}
}
