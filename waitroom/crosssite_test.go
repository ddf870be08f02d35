package waitroom

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// Requests as browsers send them from a page of https://evil.example to https://shop.example: the
// headers Chromium sends (Chrome 124) for a no-cors fetch with credentials and for a hidden form that
// submits itself, at the top level or into a hidden iframe; and what a browser without Fetch Metadata
// (Safari before 16.4) sends, where only Origin tells.
var crossSiteRequests = map[string]http.Header{
	"Chromium no-cors fetch": {
		"Host": {"shop.example"}, "Accept": {"*/*"}, "Accept-Language": {"en-US,en;q=0.9"},
		"Content-Type": {"application/x-www-form-urlencoded;charset=UTF-8"},
		"Origin":       {"https://evil.example"}, "Referer": {"https://evil.example/"},
		"Sec-Ch-Ua":        {`"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"`},
		"Sec-Ch-Ua-Mobile": {"?0"}, "Sec-Ch-Ua-Platform": {`"Linux"`},
		"Sec-Fetch-Dest": {"empty"}, "Sec-Fetch-Mode": {"no-cors"}, "Sec-Fetch-Site": {"cross-site"},
		"User-Agent": {"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"},
	},
	"Chromium form POST": {
		"Host":          {"shop.example"},
		"Accept":        {"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"},
		"Cache-Control": {"max-age=0"}, "Content-Type": {"application/x-www-form-urlencoded"},
		"Origin": {"https://evil.example"}, "Referer": {"https://evil.example/"},
		"Sec-Fetch-Dest": {"document"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Site": {"cross-site"},
		"Upgrade-Insecure-Requests": {"1"},
	},
	"Chromium form POST into a hidden iframe": {
		"Host":         {"shop.example"},
		"Accept":       {"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"},
		"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {"https://evil.example"},
		"Sec-Fetch-Dest": {"iframe"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Site": {"cross-site"},
	},
	"Safari 15 form POST (Origin only)": {
		"Host": {"shop.example"}, "Accept": {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
		"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {"https://evil.example"},
	},
	"sandboxed iframe (Origin: null)": {
		"Host": {"shop.example"}, "Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {"null"},
	},
}

// Another site cannot take places in line from its own visitors' browsers (a no-cors fetch or a
// hidden form on a busy page would otherwise fill the queue with phantoms that hold capacity until
// position_expiry): assign_queue_pos, generate_token and the waiting page's join form refuse such
// requests with 403 CROSS_SITE_REQUEST, take no place and spend no Turnstile response. The shop's own
// pages, API clients and a visitor following a link from elsewhere still join.
func TestCrossSite_JoinsFromAnotherSiteAreRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newTurnstileHarness(t, s, "closed", []config.Queue{testQueue("drop", 0), turnstileQueue("club", 0)},
			[]config.Route{{Name: "p", Match: "GET /p/", Queue: "drop"}})
		rp := h.replicas[0]
		refused := func(what string, a answer) {
			t.Helper()
			if a.status != http.StatusForbidden || !strings.Contains(a.body, "CROSS_SITE_REQUEST") {
				t.Errorf("%s: %d %s", what, a.status, a.body)
			}
			for _, c := range []string{"edgeq_rq_drop", "edgeq_rq_club", "edgeq_tk_drop"} {
				if cookieOf(a.header, c) != nil {
					t.Errorf("%s: set %s", what, c)
				}
			}
		}
		// A place held by an API client, for generate_token below.
		held := h.visitor(rp).assign("drop")
		if held.status != 200 {
			t.Fatalf("API join: %d %s", held.status, held.body)
		}
		heldID := str(held.json["request_id"])
		// Turnstile responses the attacker's visitors solved: refused requests must not spend them.
		var unspent []string
		for name, header := range crossSiteRequests {
			v := h.visitor(rp)
			refused(name+": assign_queue_pos", v.do("POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}}, header))
			response := h.fake.Mint("shop.example", "")
			unspent = append(unspent, response)
			refused(name+": assign_queue_pos with Turnstile", v.do("POST", "/_edgeq/assign_queue_pos",
				url.Values{"queue_id": {"club"}, "cf-turnstile-response": {response}}, header))
			refused(name+": the no-JS join form", v.do("POST", "/_edgeq/wait/drop?return=%2Fp", url.Values{}, header))
			refused(name+": the Turnstile join form", v.do("POST", "/_edgeq/wait/club?return=%2Fp",
				url.Values{"cf-turnstile-response": {h.fake.Mint("shop.example", "edgeq_join")}}, header))
			refused(name+": generate_token", v.do("POST", "/_edgeq/generate_token",
				url.Values{"queue_id": {"drop"}, "request_id": {heldID}}, header))
		}
		if n := assigned(t, rp, "drop") + assigned(t, rp, "club"); n != 1 {
			t.Fatalf("%d places taken, want only the API client's", n)
		}
		if n := h.fake.Calls.Load(); n != 0 {
			t.Fatalf("siteverify called %d times for refused requests", n)
		}

		// Allowed: the shop's own pages (same-origin, same-site), the address bar (none), an API client
		// (no such headers), a browser without Fetch Metadata on the shop's own page (Origin names the
		// request's host, port included).
		allowed := map[string]http.Header{
			"same-origin fetch": {"Host": {"shop.example"}, "Origin": {"https://shop.example"}, "Sec-Fetch-Site": {"same-origin"},
				"Sec-Fetch-Mode": {"cors"}, "Sec-Fetch-Dest": {"empty"}},
			"same-site fetch": {"Host": {"shop.example"}, "Origin": {"https://www.shop.example"}, "Sec-Fetch-Site": {"same-site"},
				"Sec-Fetch-Mode": {"cors"}, "Sec-Fetch-Dest": {"empty"}},
			"typed by the visitor":  {"Host": {"shop.example"}, "Sec-Fetch-Site": {"none"}},
			"API client":            {"Host": {"shop.example"}},
			"Safari 15 on the shop": {"Host": {"Shop.Example:443"}, "Origin": {"https://shop.example"}},
		}
		for name, header := range allowed {
			if a := h.visitor(rp).do("POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}}, header); a.status != 200 {
				t.Errorf("%s: %d %s", name, a.status, a.body)
			}
		}
		// The responses the refused requests carried were never spent: each still joins once.
		for _, response := range unspent {
			a := h.visitor(rp).do("POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"club"}, "cf-turnstile-response": {response}}, shopHost)
			if a.status != 200 {
				t.Fatalf("a response carried by a refused request: %d %s", a.status, a.body)
			}
		}
		// A link from another site (an e-mail, an advert) is a top-level GET: it still opens the waiting
		// page and joins, as does a gated page.
		link := http.Header{"Host": {"shop.example"}, "Accept": {"text/html"}, "Sec-Fetch-Dest": {"document"},
			"Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-User": {"?1"}}
		if a := h.visitor(rp).do("GET", "/_edgeq/wait/drop?return=%2Fp", nil, link); a.status != 200 || cookieOf(a.header, "edgeq_rq_drop") == nil {
			t.Fatalf("a link to the waiting page: %d", a.status)
		}
		if a := h.visitor(rp).do("GET", "/p/item", nil, link); a.status != http.StatusFound {
			t.Fatalf("a link to a gated page: %d", a.status)
		}
		if n, want := assigned(t, rp, "drop"), int64(1+len(allowed)+1); n != want {
			t.Fatalf("%d places in drop, want %d", n, want)
		}
	})
}
