package waitroom

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/turnstiletest"
)

var shopHost = http.Header{"Host": {"shop.example"}}

func turnstileQueue(id string, capacity int) config.Queue {
	q := testQueue(id, capacity)
	q.Turnstile = true
	return q
}

func claimsOf(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	json.Unmarshal(raw, &c)
	return c
}

func assigned(t *testing.T, rp *replica, queue string) int64 {
	t.Helper()
	return rp.room.refresh(context.Background(), rp.room.tracked(queue)).Counter
}

// Join-time checks: a failed check takes no position; a passed one is carried in the token as tsv.
func TestTurnstile_Join(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newTurnstileHarness(t, s, "closed", []config.Queue{turnstileQueue("drop", 5)}, nil)
		rp := h.replicas[0]
		join := func(form url.Values) answer {
			form.Set("queue_id", "drop")
			return h.visitor(rp).do("POST", "/_edgeq/assign_queue_pos", form, shopHost)
		}
		good := h.fake.Mint("shop.example", "")
		refusals := []struct {
			name string
			form url.Values
		}{
			{"missing", url.Values{}},
			{"invalid", url.Values{"cf-turnstile-response": {"nonsense"}}},
			{"wrong hostname", url.Values{"cf-turnstile-response": {h.fake.Mint("evil.example", "")}}},
		}
		for _, c := range refusals {
			if a := join(c.form); a.status != 403 || a.json["error"] != "INVALID_TURNSTILE_TOKEN" {
				t.Fatalf("%s: %d %s", c.name, a.status, a.body)
			}
		}
		if n := assigned(t, rp, "drop"); n != 0 {
			t.Fatalf("failed checks took %d positions", n)
		}
		v := h.visitor(rp)
		a := v.do("POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}, "turnstile_token": {good}}, shopHost)
		if a.status != 200 {
			t.Fatalf("good token: %d %s", a.status, a.body)
		}
		id := str(a.json["request_id"])
		// The same browser asking again keeps its place without a new check.
		if again := v.do("POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}}, shopHost); again.json["request_id"] != id {
			t.Fatalf("second join of the same browser: %s", again.body)
		}
		// The spent response does not get anybody else in.
		if a := join(url.Values{"cf-turnstile-response": {good}}); a.status != 403 {
			t.Fatalf("replayed response: %d %s", a.status, a.body)
		}
		tok := v.generate("drop", id)
		if tok.status != 200 {
			t.Fatal(tok.body)
		}
		claims := claimsOf(t, str(tok.json["access_token"]))
		tsv, _ := claims["tsv"].(float64)
		if tsv == 0 || time.Since(time.Unix(int64(tsv), 0)) > time.Minute {
			t.Fatalf("token claims %v: want a recent tsv", claims)
		}
		if n := assigned(t, rp, "drop"); n != 1 {
			t.Fatalf("%d positions taken, want 1", n)
		}
	})
}

func TestTurnstile_SiteverifyDownAtJoin(t *testing.T) {
	for _, c := range []struct {
		onError string
		status  int
	}{{"closed", 403}, {"open", 200}} {
		t.Run(c.onError, func(t *testing.T) {
			h := newTurnstileHarness(t, storetest.Embedded(t), c.onError, []config.Queue{turnstileQueue("drop", 5)}, nil)
			h.fakeTS.Close()
			a := h.visitor(h.replicas[0]).do("POST", "/_edgeq/assign_queue_pos",
				url.Values{"queue_id": {"drop"}, "cf-turnstile-response": {"anything"}}, shopHost)
			if a.status != c.status {
				t.Fatalf("%d %s", a.status, a.body)
			}
			if want := int64(c.status / 200 % 2); assigned(t, h.replicas[0], "drop") != want {
				t.Fatalf("positions taken: %d, want %d", assigned(t, h.replicas[0], "drop"), want)
			}
		})
	}
}

// Route-level checks: clearance from a fresh response (header or form field), from the clearance
// cookie, or from the token's tsv; nothing refused reaches the origin.
func TestTurnstile_Route(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newTurnstileHarness(t, s, "closed", []config.Queue{turnstileQueue("drop", 5)}, []config.Route{
			{Name: "checkout", Match: "POST /checkout/{p}", Turnstile: true, OnStoreError: "closed"},
			{Name: "account", Match: "GET /account/", Turnstile: true, OnStoreError: "closed"},
			{Name: "drop", Match: "GET /drop/", Queue: "drop", Turnstile: true, OnStoreError: "closed"},
		})
		h.bodies = make(chan string, 10)
		rp := h.replicas[0]
		api := http.Header{"Host": {"shop.example"}, "Accept": {"application/json"}}
		browser := http.Header{"Host": {"shop.example"}, "Accept": {"text/html"}}

		v := h.visitor(rp)
		if a := v.do("POST", "/checkout/1", url.Values{"qty": {"1"}}, api); a.status != 403 || a.json["error"] != "TURNSTILE_REQUIRED" {
			t.Fatalf("no check: %d %s", a.status, a.body)
		}
		if a := v.do("GET", "/account/orders?x=1", nil, browser); a.status != http.StatusFound ||
			a.header.Get("Location") != "/_edgeq/challenge?return=%2Faccount%2Forders%3Fx%3D1" {
			t.Fatalf("browser without a check: %d %q", a.status, a.header.Get("Location"))
		}
		bad := http.Header{"Host": {"shop.example"}, "Accept": {"application/json"}, "Cf-Turnstile-Response": {"junk"}}
		if a := v.do("POST", "/checkout/1", nil, bad); a.status != 403 || a.json["error"] != "INVALID_TURNSTILE_TOKEN" {
			t.Fatalf("bad response: %d %s", a.status, a.body)
		}
		if h.hits.Load() != 0 {
			t.Fatal("a refused request reached the origin")
		}

		// A fresh response in the form: through, body intact for the origin, clearance cookie set.
		good := h.fake.Mint("shop.example", "")
		form := url.Values{"qty": {"2"}, "cf-turnstile-response": {good}}
		a := v.do("POST", "/checkout/1", form, api)
		if a.status != 200 || cookieOf(a.header, "edgeq_clearance") == nil {
			t.Fatalf("form response: %d %s", a.status, a.body)
		}
		if got := <-h.bodies; got != form.Encode() {
			t.Fatalf("the origin got %q, want the body unchanged %q", got, form.Encode())
		}
		// The clearance cookie carries the visitor on without another check.
		if a := v.do("POST", "/checkout/2", url.Values{"qty": {"1"}}, api); a.status != 200 {
			t.Fatalf("with the clearance cookie: %d %s", a.status, a.body)
		}
		<-h.bodies
		// The spent response does not work a second time, for anybody.
		other := h.visitor(rp)
		hdr := http.Header{"Host": {"shop.example"}, "Accept": {"application/json"}, "Cf-Turnstile-Response": {good}}
		if a := other.do("POST", "/checkout/1", nil, hdr); a.status != 403 {
			t.Fatalf("replayed response: %d", a.status)
		}
		// A forged clearance cookie is nothing.
		forged := http.Header{"Host": {"shop.example"}, "Accept": {"application/json"}, "Cookie": {"edgeq_clearance=AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA"}}
		if a := other.do("POST", "/checkout/1", nil, forged); a.status != 403 {
			t.Fatalf("forged clearance: %d", a.status)
		}
		// A fresh response in the header works too.
		if a := other.do("POST", "/checkout/3", nil, http.Header{"Host": {"shop.example"}, "Cf-Turnstile-Response": {h.fake.Mint("shop.example", "")}}); a.status != 200 {
			t.Fatalf("header response: %d %s", a.status, a.body)
		}
		<-h.bodies

		// A visitor who passed Turnstile to join the queue is cleared by its token's tsv.
		q := h.visitor(rp)
		id := str(q.do("POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}, "cf-turnstile-response": {h.fake.Mint("shop.example", "")}}, shopHost).json["request_id"])
		// (Go's client files cookies under the Host header, so every call of this visitor sends it.)
		if a := q.do("POST", "/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {id}}, shopHost); a.status != 200 {
			t.Fatal(a.body)
		}
		if a := q.do("GET", "/drop/item", nil, browser); a.status != 200 || cookieOf(a.header, "edgeq_clearance") != nil {
			t.Fatalf("token with tsv: %d %q (a new clearance cookie means the tsv was ignored)", a.status, a.header.Get("Location"))
		}
	})
}

func TestTurnstile_ChallengePage(t *testing.T) {
	h := newTurnstileHarness(t, storetest.Embedded(t), "closed", nil, []config.Route{
		{Name: "account", Match: "GET /account/", Turnstile: true, OnStoreError: "closed"},
	})
	rp := h.replicas[0]
	v := h.visitor(rp)
	browser := http.Header{"Host": {"shop.example"}, "Accept": {"text/html"}}
	page := v.do("GET", "/_edgeq/challenge?return=%2Faccount%2F", nil, browser)
	csp := page.header.Get("Content-Security-Policy")
	if page.status != 200 || !strings.Contains(page.body, `data-sitekey="`+turnstiletest.SiteKey+`"`) ||
		!strings.Contains(page.body, `data-action="edgeq_challenge"`) || !strings.Contains(csp, h.fakeTS.URL) {
		t.Fatalf("challenge page: %d CSP %q\n%s", page.status, csp, page.body)
	}
	// A response solved for another widget is refused.
	a := v.do("POST", "/_edgeq/challenge?return=%2Faccount%2F", url.Values{"cf-turnstile-response": {h.fake.Mint("shop.example", "other")}}, browser)
	if a.status != 403 || !strings.Contains(a.body, "did not succeed") {
		t.Fatalf("wrong action: %d", a.status)
	}
	a = v.do("POST", "/_edgeq/challenge?return=%2Faccount%2F", url.Values{"cf-turnstile-response": {h.fake.Mint("shop.example", "edgeq_challenge")}}, browser)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/account/" || cookieOf(a.header, "edgeq_clearance") == nil {
		t.Fatalf("passed challenge: %d %q", a.status, a.header.Get("Location"))
	}
	if a := v.do("GET", "/account/", nil, browser); a.status != 200 {
		t.Fatalf("after the challenge: %d", a.status)
	}
	// return never leads off-site.
	a = v.do("POST", "/_edgeq/challenge?return=%2F%2Fevil.example", url.Values{"cf-turnstile-response": {h.fake.Mint("shop.example", "edgeq_challenge")}}, browser)
	if a.header.Get("Location") != "/" {
		t.Fatalf("return=//evil.example: Location %q", a.header.Get("Location"))
	}
}

// The waiting page of a Turnstile queue shows the widget; posting a passed check joins and redirects
// to the page itself (post/redirect/get).
func TestTurnstile_WaitingPageJoinForm(t *testing.T) {
	h := newTurnstileHarness(t, storetest.Embedded(t), "closed", []config.Queue{turnstileQueue("drop", 0)}, nil)
	rp := h.replicas[0]
	v := h.visitor(rp)
	browser := http.Header{"Host": {"shop.example"}, "Accept": {"text/html"}}
	page := v.do("GET", "/_edgeq/wait/drop?return=%2Fp", nil, browser)
	if page.status != 200 || !strings.Contains(page.body, `class="cf-turnstile"`) || !strings.Contains(page.body, `data-action="edgeq_join"`) {
		t.Fatalf("join form: %d\n%s", page.status, page.body)
	}
	if a := v.do("POST", "/_edgeq/wait/drop?return=%2Fp", url.Values{"cf-turnstile-response": {"junk"}}, browser); a.status != 403 || !strings.Contains(a.body, "cf-turnstile") {
		t.Fatalf("failed check: %d", a.status)
	}
	if assigned(t, rp, "drop") != 0 {
		t.Fatal("a failed check took a position")
	}
	a := v.do("POST", "/_edgeq/wait/drop?return=%2Fp", url.Values{"cf-turnstile-response": {h.fake.Mint("shop.example", "edgeq_join")}}, browser)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/_edgeq/wait/drop?return=%2Fp" {
		t.Fatalf("passed check: %d %q", a.status, a.header.Get("Location"))
	}
	if page := v.do("GET", "/_edgeq/wait/drop?return=%2Fp", nil, browser); !strings.Contains(page.body, `id="position">1<`) {
		t.Fatalf("after joining:\n%s", page.body)
	}
}

// newProxiedTurnstileHarness is a Turnstile harness whose replicas believe X-Forwarded-For from
// loopback, so a test can speak from any address, with limits.
func newProxiedTurnstileHarness(t *testing.T, s *store.Store, limits config.Limits, queues []config.Queue, routes []config.Route) *harness {
	t.Helper()
	h := buildHarness(t, s, queues, routes).withTurnstile("closed")
	h.trusted = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	h.limits = limits
	h.addReplica()
	return h
}

// from is a request header of a client at addr (through the trusted proxy) asking for host.
func from(addr, host string, more ...string) http.Header {
	h := http.Header{"X-Forwarded-For": {addr}, "Host": {host}, "Accept": {"application/json"}}
	for i := 0; i+1 < len(more); i += 2 {
		h.Set(more[i], more[i+1])
	}
	return h
}

// A clearance cookie is bound to the host and to the visitor's network (IPv4 /24, IPv6 /48): copied
// to another network or another host it is nothing, and its bearer is challenged again (a browser is
// sent to the challenge page, an API client gets 403 TURNSTILE_REQUIRED). Before, one solve let
// requests from any address and any Host through for clearance_ttl.
func TestTurnstile_ClearanceIsBoundToHostAndNetwork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newProxiedTurnstileHarness(t, s, config.Limits{}, nil, []config.Route{
			{Name: "checkout", Match: "POST /checkout/{p}", Turnstile: true, OnStoreError: "closed"},
			{Name: "account", Match: "GET /account/", Turnstile: true, OnStoreError: "closed"},
		})
		rp := h.replicas[0]
		solve := func(addr string) string {
			t.Helper()
			a := h.visitor(rp).do("POST", "/checkout/1", url.Values{"cf-turnstile-response": {h.fake.Mint("shop.example", "")}},
				from(addr, "shop.example"))
			c := cookieOf(a.header, "edgeq_clearance")
			if a.status != 200 || c == nil {
				t.Fatalf("solving from %s: %d %s", addr, a.status, a.body)
			}
			return c.Value
		}
		use := func(clearance, addr, host string) answer {
			t.Helper()
			return h.visitor(rp).do("POST", "/checkout/2", url.Values{}, from(addr, host, "Cookie", "edgeq_clearance="+clearance))
		}
		for _, c := range []struct{ solvedAt, sameNetwork, otherNetwork string }{
			{"198.51.100.7", "198.51.100.250", "198.51.101.7"},
			{"2001:db8:1:1::7", "2001:db8:1:ff:1234::9", "2001:db8:2:1::7"},
		} {
			clearance := solve(c.solvedAt)
			hits := h.hits.Load()
			for _, ok := range []struct{ addr, host string }{
				{c.solvedAt, "shop.example"}, {c.sameNetwork, "shop.example"}, {c.solvedAt, "SHOP.example."},
			} {
				if a := use(clearance, ok.addr, ok.host); a.status != 200 {
					t.Fatalf("clearance of %s used from %s for %s: %d %s", c.solvedAt, ok.addr, ok.host, a.status, a.body)
				}
			}
			if got := h.hits.Load() - hits; got != 3 {
				t.Fatalf("%d requests reached the origin, want 3", got)
			}
			hits = h.hits.Load()
			elsewhere := []string{c.otherNetwork, "192.0.2.1", "203.0.113.9", "10.1.2.3", "172.16.0.1", "2001:db8:ffff::1",
				"100.64.0.1", "8.8.8.8", "198.18.0.1", "::ffff:198.51.99.7"}
			for _, addr := range elsewhere {
				if a := use(clearance, addr, "shop.example"); a.status != 403 || a.json["error"] != "TURNSTILE_REQUIRED" {
					t.Errorf("clearance of %s used from %s: %d %s", c.solvedAt, addr, a.status, a.body)
				}
			}
			if a := use(clearance, c.solvedAt, "other.example"); a.status != 403 || a.json["error"] != "TURNSTILE_REQUIRED" {
				t.Errorf("clearance for shop.example used with Host other.example: %d %s", a.status, a.body)
			}
			browser := from(c.otherNetwork, "shop.example", "Accept", "text/html", "Cookie", "edgeq_clearance="+clearance)
			if a := h.visitor(rp).do("GET", "/account/", nil, browser); a.status != http.StatusFound ||
				a.header.Get("Location") != "/_edgeq/challenge?return=%2Faccount%2F" {
				t.Errorf("a browser with a clearance from another network: %d %q", a.status, a.header.Get("Location"))
			}
			if got := h.hits.Load() - hits; got != 0 {
				t.Fatalf("%d requests with a copied clearance reached the origin", got)
			}
		}
		// The challenge page's clearance is bound the same way.
		v := h.visitor(rp)
		a := v.do("POST", "/_edgeq/challenge?return=%2Faccount%2F", url.Values{"cf-turnstile-response": {h.fake.Mint("shop.example", "edgeq_challenge")}},
			from("192.0.2.44", "shop.example", "Accept", "text/html"))
		clearance := cookieOf(a.header, "edgeq_clearance")
		if a.status != http.StatusSeeOther || clearance == nil {
			t.Fatalf("challenge: %d", a.status)
		}
		if a := use(clearance.Value, "192.0.2.45", "shop.example"); a.status != 200 {
			t.Fatalf("challenge clearance on its network: %d", a.status)
		}
		if a := use(clearance.Value, "192.0.3.44", "shop.example"); a.status != 403 {
			t.Fatalf("challenge clearance from another network: %d", a.status)
		}
	})
}

// Per-IP limits are taken before siteverify is asked: with a limit of n, n+k junk responses from one
// address cost at most n siteverify calls (and single-use records), and the rest are refused 429
// RATE_LIMITED with Retry-After. Joins (assign_queue_pos, the waiting page's join form) count against
// limits.join_per_ip_per_minute, once per join; the challenge page and routes against
// limits.turnstile_per_ip_per_minute. Requests that carry a clearance are not counted.
func TestTurnstile_JunkResponsesAreLimitedBeforeSiteverify(t *testing.T) {
	const n, k = 3, 4
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newProxiedTurnstileHarness(t, s, config.Limits{JoinPerIPPerMinute: n, TurnstilePerIPPerMinute: n},
			[]config.Queue{turnstileQueue("club", 0)}, []config.Route{
				{Name: "checkout", Match: "POST /checkout/{p}", Turnstile: true, OnStoreError: "closed"},
			})
		rp := h.replicas[0]
		form := func(fields ...string) url.Values {
			v := url.Values{}
			for i := 0; i+1 < len(fields); i += 2 {
				v.Set(fields[i], fields[i+1])
			}
			return v
		}
		browser := []string{"Accept", "text/html", "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "navigate"}
		cases := []struct {
			name, method, path string
			form               url.Values
			header             []string
			refusedStatus      int // the answer to a junk response within the limit
		}{
			{"assign_queue_pos", "POST", "/_edgeq/assign_queue_pos", form("queue_id", "club", "cf-turnstile-response", "junk"), nil, 403},
			{"the join form", "POST", "/_edgeq/wait/club?return=%2F", form("cf-turnstile-response", "junk"), browser, 403},
			{"a route (header)", "POST", "/checkout/1", url.Values{}, []string{"Cf-Turnstile-Response", "junk"}, 403},
			{"a route (form field)", "POST", "/checkout/1", form("cf-turnstile-response", "junk"), nil, 403},
			{"the challenge page", "POST", "/_edgeq/challenge?return=%2F", form("cf-turnstile-response", "junk"), browser, 403},
		}
		for i, c := range cases {
			addr := fmt.Sprintf("198.51.100.%d", 10+i)
			calls, hits := h.fake.Calls.Load(), h.hits.Load()
			limited := 0
			for j := range n + k {
				// Each junk response is another one: a repeated one would be refused as replayed.
				junk := fmt.Sprintf("junk-%d-%d", i, j)
				body, header := url.Values{}, from(addr, "shop.example", c.header...)
				for name, values := range c.form {
					body[name] = values
				}
				if body.Has("cf-turnstile-response") {
					body.Set("cf-turnstile-response", junk)
				}
				if header.Get("Cf-Turnstile-Response") != "" {
					header.Set("Cf-Turnstile-Response", junk)
				}
				a := h.visitor(rp).do(c.method, c.path, body, header)
				switch {
				case a.status == 429 && strings.Contains(a.body, "RATE_LIMITED") && a.header.Get("Retry-After") != "":
					limited++
				case a.status != c.refusedStatus:
					t.Fatalf("%s: %d %s", c.name, a.status, a.body)
				}
			}
			if got := h.fake.Calls.Load() - calls; got > n {
				t.Errorf("%s: %d junk responses from one address cost %d siteverify calls, want at most %d", c.name, n+k, got, n)
			}
			if limited != k {
				t.Errorf("%s: %d answers 429 RATE_LIMITED with Retry-After, want %d", c.name, limited, k)
			}
			if h.hits.Load() != hits {
				t.Fatalf("%s: junk reached the origin", c.name)
			}
		}
		if got := testutil.ToFloat64(rp.room.rateLimited.WithLabelValues("turnstile")); got != 3*k {
			t.Errorf("edgeq_rate_limited_total{limit=turnstile} = %v, want %d", got, 3*k)
		}
		if assigned(t, rp, "club") != 0 {
			t.Fatal("junk took a place")
		}

		// A join with a good response counts once: n of them from one address join, the next is
		// refused before its response is spent.
		addr := "203.0.113.5"
		for i := range n {
			a := h.visitor(rp).do("POST", "/_edgeq/assign_queue_pos",
				form("queue_id", "club", "cf-turnstile-response", h.fake.Mint("shop.example", "")), from(addr, "shop.example"))
			if a.status != 200 {
				t.Fatalf("good join %d of %d: %d %s", i+1, n, a.status, a.body)
			}
		}
		calls := h.fake.Calls.Load()
		extra := h.fake.Mint("shop.example", "")
		if a := h.visitor(rp).do("POST", "/_edgeq/assign_queue_pos", form("queue_id", "club", "cf-turnstile-response", extra),
			from(addr, "shop.example")); a.status != 429 || h.fake.Calls.Load() != calls {
			t.Fatalf("join over the limit: %d, siteverify calls %d", a.status, h.fake.Calls.Load()-calls)
		}

		// A cleared visitor is not counted, however often it comes.
		addr = "203.0.113.77"
		a := h.visitor(rp).do("POST", "/checkout/1", form("cf-turnstile-response", h.fake.Mint("shop.example", "")), from(addr, "shop.example"))
		clearance := cookieOf(a.header, "edgeq_clearance")
		if a.status != 200 || clearance == nil {
			t.Fatalf("solving: %d %s", a.status, a.body)
		}
		for i := range 2 * n {
			if a := h.visitor(rp).do("POST", "/checkout/2", url.Values{}, from(addr, "shop.example", "Cookie", "edgeq_clearance="+clearance.Value)); a.status != 200 {
				t.Fatalf("cleared request %d: %d %s", i+1, a.status, a.body)
			}
		}
	})
}
