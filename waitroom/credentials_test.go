package waitroom

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
)

// shopSession is the shop's own bearer session (a Vendure session token, say): edgeq never takes it,
// and it reaches the shop exactly as sent.
const shopSession = "Bearer shop-session-abc"

// served joins queue with a fresh visitor and takes its token, which the visitor's jar then holds
// as the token cookie.
func (h *harness) served(rp *replica, queue string) (placeHolder, string) {
	h.t.Helper()
	p := h.holder(rp, queue, false)
	a := p.v.generate(queue, p.id)
	if a.status != http.StatusOK {
		h.t.Fatalf("token: %d %s", a.status, a.body)
	}
	return p, str(a.json["access_token"])
}

// app is a client without cookies.
func (h *harness) app(rp *replica) *visitor {
	v := h.visitor(rp)
	v.client.Jar = nil
	return v
}

// seenAuthorization is the Authorization the shop received with the last request that reached it.
func (h *harness) seenAuthorization() []string {
	seen, _ := h.seen.Load().(http.Header)
	return seen["Authorization"]
}

func withHeaders(kv ...string) http.Header {
	hdr := apiHeader.Clone()
	for i := 0; i+1 < len(kv); i += 2 {
		hdr.Add(kv[i], kv[i+1])
	}
	return hdr
}

// docs/reference.md "The queue gate": an app sends edgeq's token in Edgeq-Token and keeps Authorization
// for the shop's own session, which reaches the shop untouched, as it does beside the token cookie. The
// shop's bearer is never taken for edgeq's: alone it opens nothing. TokenRequestID reads the token the
// same way.
func TestEdgeqToken_OpensTheQueueBesideTheShopsAuthorization(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 1)}, []config.Route{{Name: "api", Match: "/api/", Queue: "drop"}})
		rp := h.replicas[0]
		browser, tok := h.served(rp, "drop") // the queue is full now
		app := h.app(rp)

		a := app.do("POST", "/api/cart", nil, withHeaders(HeaderToken, tok, "Authorization", shopSession))
		if a.status != http.StatusOK || a.body != "origin /api/cart queue=drop request="+browser.id {
			t.Fatalf("Edgeq-Token: %d %s", a.status, a.body)
		}
		if got := h.seenAuthorization(); !slices.Equal(got, []string{shopSession}) {
			t.Fatalf("the shop received Authorization %q beside Edgeq-Token, want the shop's own", got)
		}
		if seen := h.seen.Load().(http.Header); seen.Get(HeaderToken) != "" {
			t.Fatal("the shop received Edgeq-Token")
		}
		a = browser.v.do("POST", "/api/cart", nil, withHeaders("Authorization", shopSession))
		if a.status != http.StatusOK || !slices.Equal(h.seenAuthorization(), []string{shopSession}) {
			t.Fatalf("token cookie: %d %s, the shop received Authorization %q", a.status, a.body, h.seenAuthorization())
		}

		hits := h.hits.Load()
		for name, hdr := range map[string]http.Header{
			"the shop's bearer alone":              withHeaders("Authorization", shopSession),
			"a junk Edgeq-Token":                   withHeaders(HeaderToken, "junk", "Authorization", shopSession),
			"two Edgeq-Token values":               withHeaders(HeaderToken, tok, HeaderToken, tok),
			"the token in another queue's cookie":  withHeaders("Cookie", "edgeq_tk_other="+tok),
			"the token as the shop's Basic scheme": withHeaders("Authorization", "Basic "+tok),
		} {
			if a := app.do("POST", "/api/cart", nil, hdr); a.status != http.StatusForbidden || a.json["error"] != "QUEUE_REQUIRED" {
				t.Errorf("%s: %d %s", name, a.status, a.body)
			}
		}
		if h.hits.Load() != hits {
			t.Fatal("a refused request reached the shop")
		}

		// TokenRequestID (GET {prefix}/auctions/mine and the like) follows the same rule.
		for name, c := range map[string]struct {
			claimed, authorization string
			want                   bool
		}{
			"Edgeq-Token":              {claimed: tok, want: true},
			"edgeq's bearer":           {authorization: "Bearer " + tok, want: true},
			"the shop's bearer":        {authorization: shopSession},
			"Edgeq-Token, shop bearer": {claimed: tok, authorization: shopSession, want: true},
		} {
			req := httptest.NewRequest("GET", "/_edgeq/auctions/mine", nil)
			if c.authorization != "" {
				req.Header.Set("Authorization", c.authorization)
			}
			info := web.NewRequest(nil, "test")
			info.ClaimedToken = c.claimed
			req = req.WithContext(web.WithRequest(req.Context(), info))
			if id, ok := rp.room.TokenRequestID(req, "drop"); ok != c.want || ok && id != browser.id {
				t.Errorf("TokenRequestID with %s: %q %v, want %v", name, id, ok, c.want)
			}
		}
	})
}

// An edgeq token in Authorization: Bearer opens the queue and never reaches the shop, nor does one
// that no longer opens anything (expired, revoked, of another queue), whatever carried the valid
// token; any other Authorization value arrives exactly as sent, on its own line.
func TestEdgeqBearer_NeverReachesTheShop(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 1), testQueue("other", 1)},
			[]config.Route{{Name: "api", Match: "/api/", Queue: "drop"}})
		rp := h.replicas[0]
		ended, endedTok := h.served(rp, "drop")
		if a := h.adminForm(rp, "/api/queue/update_token_status", url.Values{
			"queue_id": {"drop"}, "request_id": {ended.id}, "status": {"1"}}); a.status != http.StatusOK {
			t.Fatalf("complete: %d %s", a.status, a.body)
		}
		browser, tok := h.served(rp, "drop")
		_, otherTok := h.served(rp, "other")
		snap := rp.room.snapshotOf(t.Context(), "drop")
		now := time.Now().Unix()
		expired, e := rp.room.sign("drop", snap.Epoch, browser.id, browser.position, now-7200, now-3600, 0)
		if e != nil {
			t.Fatal(e)
		}
		otherIssuer, err := h.keys.Sign(token.Claims{Issuer: "the-shop", Queue: "drop", RequestID: "u-1", Position: 1,
			IssuedAt: now, NotBefore: now, Expires: now + 600})
		if err != nil {
			t.Fatal(err)
		}
		app := h.app(rp)
		for _, c := range []struct {
			name   string
			client *visitor
			header http.Header
			want   []string // Authorization at the shop
		}{
			{"edgeq's bearer", app, withHeaders("Authorization", "Bearer "+tok), nil},
			{"edgeq's bearer, scheme in lower case", app, withHeaders("Authorization", "bearer "+tok), nil},
			{"edgeq's bearer and the shop's", app, withHeaders("Authorization", "Bearer "+tok, "Authorization", shopSession), []string{shopSession}},
			{"cookie, an expired edgeq bearer", browser.v, withHeaders("Authorization", "Bearer "+expired.Raw), nil},
			{"cookie, a revoked edgeq bearer", browser.v, withHeaders("Authorization", "Bearer "+endedTok), nil},
			{"Edgeq-Token, another queue's edgeq bearer", app, withHeaders(HeaderToken, tok, "Authorization", "Bearer "+otherTok), nil},
			{"cookie, another issuer's JWT", browser.v, withHeaders("Authorization", "Bearer "+otherIssuer), []string{"Bearer " + otherIssuer}},
			{"cookie, the shop's Basic", browser.v, withHeaders("Authorization", "Basic c2hvcDpzZWNyZXQ="), []string{"Basic c2hvcDpzZWNyZXQ="}},
		} {
			h.seen.Store(http.Header{})
			a := c.client.do("GET", "/api/cart", nil, c.header)
			if a.status != http.StatusOK || a.body != "origin /api/cart queue=drop request="+browser.id {
				t.Errorf("%s: %d %s", c.name, a.status, a.body)
				continue
			}
			if got := h.seenAuthorization(); !slices.Equal(got, c.want) {
				t.Errorf("%s: the shop received Authorization %q, want %q", c.name, got, c.want)
			}
		}
		// A revoked or expired edgeq bearer alone opens nothing (the queue is full).
		for _, raw := range []string{endedTok, expired.Raw} {
			if a := app.do("GET", "/api/cart", nil, withHeaders("Authorization", "Bearer "+raw)); a.status != http.StatusForbidden {
				t.Errorf("a dead edgeq bearer: %d %s", a.status, a.body)
			}
		}
	})
}

// session_renewal hands a renewed token over where the old one came from: the Edgeq-Token response
// header for a token sent in Edgeq-Token (or Authorization: Bearer), the token cookie for the cookie.
func TestRenewal_FollowsTheTokenToItsHeader(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		q := testQueue("drop", 10)
		q.SessionRenewal = true
		h := newHarness(t, s, []config.Queue{q}, []config.Route{{Name: "api", Match: "/api/", Queue: "drop"}})
		rp := h.replicas[0]
		_, tok := h.served(rp, "drop")
		c, err := rp.room.opts.Verifier.Verify(tok, "drop")
		if err != nil {
			t.Fatal(err)
		}
		// The same session with a minute left: in the last half of its 10-minute life.
		snap := rp.room.snapshotOf(t.Context(), "drop")
		due, e := rp.room.sign("drop", snap.Epoch, c.RequestID, c.Position, c.IssuedAt, time.Now().Unix()+60, 0)
		if e != nil {
			t.Fatal(e)
		}
		renewedFrom := func(raw string) {
			t.Helper()
			got, err := rp.room.opts.Verifier.Verify(raw, "drop")
			if err != nil || got.RequestID != c.RequestID || got.IssuedAt != c.IssuedAt || got.Expires <= time.Now().Unix()+60 {
				t.Fatalf("renewed token %+v, %v; the old one %+v", got, err, c)
			}
		}
		app := h.app(rp)
		for name, hdr := range map[string]http.Header{
			"Edgeq-Token":    withHeaders(HeaderToken, due.Raw, "Authorization", shopSession),
			"edgeq's bearer": withHeaders("Authorization", "Bearer "+due.Raw),
		} {
			a := app.do("GET", "/api/cart", nil, hdr)
			if a.status != http.StatusOK || a.header.Get(HeaderToken) == "" || len(a.header.Values("Set-Cookie")) != 0 {
				t.Fatalf("%s: %d %s, Edgeq-Token %q, Set-Cookie %q", name, a.status, a.body, a.header.Get(HeaderToken), a.header.Values("Set-Cookie"))
			}
			renewedFrom(a.header.Get(HeaderToken))
			if a := app.do("GET", "/api/cart", nil, withHeaders(HeaderToken, a.header.Get(HeaderToken))); a.status != http.StatusOK {
				t.Fatalf("%s: the renewed token: %d %s", name, a.status, a.body)
			}
		}
		a := app.do("GET", "/api/cart", nil, withHeaders("Cookie", "edgeq_tk_drop="+due.Raw))
		if a.status != http.StatusOK || a.header.Get(HeaderToken) != "" || tokenCookieIn(a, "drop") == "" {
			t.Fatalf("cookie: %d %s, Edgeq-Token %q", a.status, a.body, a.header.Get(HeaderToken))
		}
		renewedFrom(tokenCookieIn(a, "drop"))
	})
}
