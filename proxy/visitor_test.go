package proxy

import (
	"cmp"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/visitor"
	"github.com/edgeq/edgeq/internal/web"
)

// visitorRig is a proxy whose buy route identifies buyers by visitor id (or, with by "token", does
// not), its cookies Secure per cookieSecure (tokens.cookie_secure, "" auto), in front of a shop whose
// pages set two cookies of their own and may be cached (unless o.originHandler says otherwise). seen
// is the visitor id the admission step saw on the last request.
type visitorRig struct {
	*rig
	ids  *visitor.IDs
	seen *atomic.Value
}

func newVisitorRig(t *testing.T, by, cookieSecure string, o rigOptions) visitorRig {
	t.Helper()
	seen := &atomic.Value{}
	o.steps = []Step{stepFunc{requirement: config.RequireAdmission, wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Store(web.RequestFrom(r.Context()).VisitorID)
			next.ServeHTTP(w, r)
		})
	}}}
	o.routes = []config.Route{{Name: "buy", Match: "POST /buy/{product}", Admission: config.Admission{Type: "stock", User: by}}}
	if o.originHandler == nil {
		o.originHandler = func(w http.ResponseWriter, r *http.Request) {
			http.SetCookie(w, &http.Cookie{Name: "cart", Value: "c1", Path: "/"})
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/", HttpOnly: true})
			w.Header().Set("Cache-Control", "public, max-age=600")
			echoHeaders(w, r)
		}
	}
	ids := visitor.New([]byte("test key"))
	o.visitors = &Visitors{IDs: ids, Cookies: web.Cookies{Secure: cmp.Or(cookieSecure, "auto")}}
	return visitorRig{rig: newRig(t, o), ids: ids, seen: seen}
}

// visitorCookie returns the edgeq_vid cookie an answer sets, nil if none.
func visitorCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == visitor.Cookie {
			return c
		}
	}
	return nil
}

func cookieNames(resp *http.Response) []string {
	var names []string
	for _, c := range resp.Cookies() {
		names = append(names, c.Name)
	}
	return names
}

func TestVisitor_OffWhileNoRouteUsesIt(t *testing.T) {
	rg := newVisitorRig(t, "token", "", rigOptions{})
	for _, path := range []string{"/page", "/_edgeq/hello"} {
		resp, _ := rg.do(t, rg.request(t, "GET", path, nil))
		if c := visitorCookie(resp); c != nil || resp.Header.Get(visitor.Header) != "" {
			t.Fatalf("%s: a visitor id without a route that uses one: %v %q", path, c, resp.Header.Get(visitor.Header))
		}
	}
	resp, _ := rg.do(t, rg.request(t, "GET", "/page", nil))
	if got := resp.Header.Get("Cache-Control"); got != "public, max-age=600" {
		t.Fatalf("the shop's caching headers changed: %q", got)
	}
}

// A browser without a visitor id gets one with the first answer, the shop's cookies kept beside it,
// and the answer is no longer cacheable (a cache would give every visitor the same id); with it, it
// gets none again, and the shop never sees it.
func TestVisitor_GivenOnceBesideTheShopsCookiesAndNeverForwarded(t *testing.T) {
	rg := newVisitorRig(t, "visitor", "", rigOptions{})
	resp, _ := rg.do(t, rg.request(t, "GET", "/page", nil))
	c := visitorCookie(resp)
	if c == nil {
		t.Fatalf("no %s cookie: %v", visitor.Cookie, resp.Header["Set-Cookie"])
	}
	if names := cookieNames(resp); !slices.Equal(names, []string{"cart", "session", visitor.Cookie}) {
		t.Fatalf("cookies set: %v, want the shop's two and the visitor id", names)
	}
	if !c.HttpOnly || c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge != 365*24*3600 {
		t.Fatalf("cookie attributes: %s", c.String())
	}
	if resp.Header.Get(visitor.Header) != c.Value {
		t.Fatalf("%s header %q, cookie %q", visitor.Header, resp.Header.Get(visitor.Header), c.Value)
	}
	if _, ok := rg.ids.Check(c.Value); !ok {
		t.Fatalf("the cookie's id does not verify: %q", c.Value)
	}
	if got := resp.Header.Get("Cache-Control"); got != "private, no-store" {
		t.Fatalf("an answer with a new visitor id is cacheable: %q", got)
	}

	// Back with it (and the shop's own cookie): nothing new, and the shop sees only its cookie.
	resp, body := rg.do(t, rg.request(t, "POST", "/buy/p1", http.Header{"Cookie": {"cart=c1; " + visitor.Cookie + "=" + c.Value}}))
	if visitorCookie(resp) != nil || resp.Header.Get(visitor.Header) != "" {
		t.Fatalf("a second visitor id for a browser that has one: %v", resp.Header["Set-Cookie"])
	}
	if got := resp.Header.Get("Cache-Control"); got != "public, max-age=600" {
		t.Fatalf("an answer without a new credential lost its caching headers: %q", got)
	}
	id, _ := rg.ids.Check(c.Value)
	if got := rg.seen.Load(); got != id {
		t.Fatalf("admission saw visitor %q, want %q", got, id)
	}
	if got := decodeHeaders(t, body).Values("Cookie"); !slices.Equal(got, []string{"cart=c1"}) {
		t.Fatalf("the shop got Cookie %q", got)
	}
}

// A forged or tampered visitor id is never an identity: the request counts as one without a visitor
// id, and gets a new one.
func TestVisitor_ForgedOrTamperedIDsAreReplaced(t *testing.T) {
	rg := newVisitorRig(t, "visitor", "", rigOptions{})
	_, genuine := rg.ids.Mint()
	_, otherKey := visitor.New([]byte("another key")).Mint()
	tampered := []byte(genuine)
	tampered[0] ^= 1
	for name, value := range map[string]string{
		"tampered": string(tampered), "another key": otherKey, "made up": strings.Repeat("a", 32) + "." + strings.Repeat("b", 32),
	} {
		for _, header := range []http.Header{{"Cookie": {visitor.Cookie + "=" + value}}, {visitor.Header: {value}}} {
			rg.seen.Store("unset")
			resp, _ := rg.do(t, rg.request(t, "POST", "/buy/p1", header))
			if got := rg.seen.Load(); got != "" {
				t.Fatalf("%s %v: admission saw visitor %q", name, header, got)
			}
			c := visitorCookie(resp)
			if c == nil || c.Value == value || resp.Header.Get(visitor.Header) != c.Value {
				t.Fatalf("%s %v: no new visitor id: %v", name, header, resp.Header["Set-Cookie"])
			}
		}
	}
}

// An API client keeps the id from the Edgeq-Visitor answer header and sends it back in the request
// header, which the shop never sees (in any spelling).
func TestVisitor_APIClientsUseTheHeader(t *testing.T) {
	rg := newVisitorRig(t, "visitor", "", rigOptions{})
	resp, _ := rg.do(t, rg.request(t, "POST", "/buy/p1", http.Header{"Accept": {"application/json"}}))
	signed := resp.Header.Get(visitor.Header)
	id, ok := rg.ids.Check(signed)
	if !ok {
		t.Fatalf("no visitor id in %s: %q", visitor.Header, signed)
	}
	resp, body := rg.do(t, rg.request(t, "POST", "/buy/p1", http.Header{visitor.Header: {signed}, "Edgeq_Visitor": {signed}}))
	if got := rg.seen.Load(); got != id {
		t.Fatalf("admission saw visitor %q, want %q", got, id)
	}
	if visitorCookie(resp) != nil || resp.Header.Get(visitor.Header) != "" {
		t.Fatalf("a new visitor id for a client that sent one: %v", resp.Header)
	}
	for name := range decodeHeaders(t, body) {
		if strings.Contains(strings.ToLower(name), "visitor") {
			t.Fatalf("the shop got %s", name)
		}
	}
	// The header wins over a cookie: the client named its id.
	_, other := rg.ids.Mint()
	rg.do(t, rg.request(t, "POST", "/buy/p1", http.Header{visitor.Header: {signed}, "Cookie": {visitor.Cookie + "=" + other}}))
	if got := rg.seen.Load(); got != id {
		t.Fatalf("with a header and a cookie admission saw %q, want the header's %q", got, id)
	}
}

// The cookie is Secure when the visitor's connection is HTTPS: a TLS connection to edgeq, or a trusted
// proxy's X-Forwarded-Proto; not on a proxy's word that edgeq does not trust. tokens.cookie_secure
// decides as for every edgeq cookie.
func TestVisitor_SecureOverHTTPS(t *testing.T) {
	https := http.Header{"X-Forwarded-Proto": {"https"}}
	cases := []struct {
		name    string
		tls     bool
		trusted []string
		header  http.Header
		policy  string
		secure  bool
	}{
		{name: "plain HTTP", secure: false},
		{name: "TLS to edgeq", tls: true, secure: true},
		{name: "a trusted proxy's https", trusted: []string{"127.0.0.1/32"}, header: https, secure: true},
		{name: "an untrusted peer's https", header: https, secure: false},
		{name: "never, over TLS", tls: true, policy: "never", secure: false},
		{name: "always, over plain HTTP", policy: "always", secure: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rg := newVisitorRig(t, "visitor", c.policy, rigOptions{trusted: c.trusted})
			client, base := http.DefaultClient, rg.server.URL
			if c.tls {
				srv := httptest.NewTLSServer(rg.proxy)
				t.Cleanup(srv.Close)
				client, base = srv.Client(), srv.URL
			}
			req, _ := http.NewRequest("GET", base+"/page", nil)
			for k, v := range c.header {
				req.Header[k] = v
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ck := visitorCookie(resp); ck == nil || ck.Secure != c.secure {
				t.Fatalf("cookie %v, want Secure %v", resp.Header["Set-Cookie"], c.secure)
			}
		})
	}
}

// edgeq's own answers (its endpoints, its error pages) give a visitor id like the shop's.
func TestVisitor_EdgeqsOwnAnswersGiveItToo(t *testing.T) {
	rg := newVisitorRig(t, "visitor", "", rigOptions{})
	for _, path := range []string{"/_edgeq/hello", "/_edgeq/nothing-here"} {
		resp, _ := rg.do(t, rg.request(t, "GET", path, http.Header{"Accept": {"text/html"}}))
		if c := visitorCookie(resp); c == nil || resp.Header.Get("Cache-Control") != "private, no-store" {
			t.Fatalf("%s (%d): cookie %v, Cache-Control %q", path, resp.StatusCode, c, resp.Header.Get("Cache-Control"))
		}
	}
}

// A shop's scripts on other origins may read and send Edgeq-Visitor under the shop's CORS policy.
func TestVisitor_CORSLetsScriptsUseTheHeader(t *testing.T) {
	rg := newVisitorRig(t, "visitor", "", rigOptions{originHandler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "https://app.example")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	}})
	resp, _ := rg.do(t, rg.request(t, "OPTIONS", "/buy/p1", http.Header{
		"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"content-type,edgeq-visitor"},
	}))
	if got := resp.Header.Get("Access-Control-Expose-Headers"); got != "Edgeq-Token, Edgeq-Visitor" {
		t.Fatalf("Access-Control-Expose-Headers %q", got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Headers"); got != "Content-Type, Edgeq-Visitor" {
		t.Fatalf("Access-Control-Allow-Headers %q", got)
	}
}
