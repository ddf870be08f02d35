package botcheck

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/ratelimit"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// clearanceCookie remembers a passed check in the browser for clearance_ttl.
const clearanceCookie = "edgeq_clearance"

// challengeAction is the widget action of edgeq's challenge page.
const challengeAction = "edgeq_challenge"

// GateOptions configures the bot-check step.
type GateOptions struct {
	Check        *Check
	Store        *store.Store // the limit's counters; nil: no limit
	ClearanceTTL time.Duration
	Key          []byte // MAC key of the clearance cookie (derived from identity.secret, else from the signing key)
	Prefix       string
	MaxBodyBytes int64
	Cookies      web.Cookies
	Responder    *web.Responder
	// PerIPPerMinute is limits.turnstile_per_ip_per_minute: responses a client may send to be
	// verified on the challenge page and on routes, counted on the Client's store before siteverify
	// is called; 0 is no limit.
	PerIPPerMinute int
	// RateLimited counts the limit's 429 answers (edgeq_rate_limited_total{limit="turnstile"}); nil
	// counts nothing.
	RateLimited prometheus.Counter
}

// Gate is the bot-check step of the gate chain and the challenge page. It satisfies proxy.Step.
type Gate struct {
	o       GateOptions
	mac     vocab.MAC        // keyed with o.Key: the clearance cookie's MAC
	limiter *ratelimit.Redis // nil: no limit (no store, or PerIPPerMinute 0)
}

// NewGate builds the step.
func NewGate(o GateOptions) *Gate {
	g := &Gate{o: o, mac: vocab.NewMAC(o.Key)}
	if o.PerIPPerMinute > 0 && o.Store != nil {
		g.limiter = ratelimit.NewRedis(o.Store.Client)
	}
	return g
}

// Requirement is the route setting this step enforces.
func (*Gate) Requirement() string { return config.RequireTurnstile }

// Wrap returns next for routes without turnstile: true. Otherwise a request passes with a clearance
// younger than clearance_ttl — from the visitor's access token (its tsv claim) or the clearance cookie —
// or with a fresh solution verified now (in the provider's headers or form fields); browsers without
// one are sent to the challenge page, other clients get 403 TURNSTILE_REQUIRED.
func (g *Gate) Wrap(route config.Route, next http.Handler) (http.Handler, error) {
	if !route.Turnstile {
		return next, nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := web.RequestFrom(r.Context())
		if g.fresh(info.TurnstileAt) || g.cleared(r) {
			next.ServeHTTP(w, r)
			return
		}
		sol, e := g.solution(r)
		if e != nil {
			g.o.Responder.Error(w, r, e)
			return
		}
		if sol.Empty() {
			if web.WantsHTML(r) {
				//nolint:gosec // edgeq's own challenge page on this site; the request's URI rides in its query
				http.Redirect(w, r, g.ChallengeURL(r.URL.RequestURI()), http.StatusFound)
				return
			}
			g.o.Responder.Error(w, r, web.ErrTurnstileRequired)
			return
		}
		if e := g.allow(r); e != nil {
			g.o.Responder.Error(w, r, e)
			return
		}
		v := g.o.Check.Verify(r.Context(), Submission{Solution: sol, Scope: Scope{Kind: "route", Name: route.Name}, Request: r})
		if !v.OK {
			g.o.Responder.Error(w, r, v.Refusal())
			return
		}
		g.setClearance(w, r, v.At)
		next.ServeHTTP(w, r)
	}), nil
}

// allow applies limits.turnstile_per_ip_per_minute to a request that carries a response, before the
// response costs a siteverify call and a single-use record: past its budget a client gets 429
// RATE_LIMITED with Retry-After. Requests with a clearance never get here, so the limit adds no store
// call to them. When the store counts as degraded the limit is skipped: the single-use check that
// follows answers for the request's on_store_error; a failed limiter call is answered the same way.
func (g *Gate) allow(r *http.Request) *web.Error {
	info := web.RequestFrom(r.Context())
	if g.limiter == nil || info.Store.Degraded {
		return nil
	}
	key := limitKey(g.o.Store.Keys, ratelimit.ClientKey(info.ClientIP))
	ok, retry, err := g.limiter.Allow(r.Context(), key, ratelimit.PerMinute(g.o.PerIPPerMinute))
	if err != nil {
		return info.StoreFailed(config.RequireTurnstile, err)
	}
	if !ok {
		if g.o.RateLimited != nil {
			g.o.RateLimited.Inc()
		}
		return web.RateLimited(retry)
	}
	return nil
}

// solution finds the provider's fields in the request's headers and, for a form body, in the form,
// leaving the body intact for the origin.
func (g *Gate) solution(r *http.Request) (Solution, *web.Error) {
	values := map[string]string{}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/x-www-form-urlencoded") || strings.HasPrefix(ct, "multipart/form-data") {
		src := fields.New(r, g.o.MaxBodyBytes)
		for _, name := range g.o.Check.FieldNames() {
			value, _, e := src.Get(config.FieldSource{Kind: "form", Name: name})
			if e != nil {
				return nil, e
			}
			values[name] = value
		}
	}
	return g.o.Check.Pick(values, r.Header), nil
}

// ChallengeURL is the challenge page that returns to returnTo.
func (g *Gate) ChallengeURL(returnTo string) string {
	return g.o.Prefix + "/challenge?return=" + url.QueryEscape(returnTo)
}

func (g *Gate) fresh(at time.Time) bool {
	return !at.IsZero() && time.Since(at) < g.o.ClearanceTTL
}

// The clearance cookie is "<payload>.<mac>": payload = base64url(check time | random), mac =
// base64url(first 16 bytes of HMAC-SHA256(key, payload | host | network)). The host (vocab.HostName of
// the request's Host) and the visitor's network (clearanceNetwork) are bound inside the MAC and not
// written in the cookie: a cookie copied to another host or used from another network fails the MAC,
// and its bearer is simply challenged again. Checking it is a MAC, no store call.
func (g *Gate) clearanceValue(r *http.Request, at time.Time) string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[0:8], uint64(at.Unix())) //nolint:gosec // the bits of the int64, read back as such
	rand.Read(raw[8:])
	payload := base64.RawURLEncoding.EncodeToString(raw[:])
	return payload + "." + g.clearanceMAC(r, payload)
}

func (g *Gate) clearanceMAC(r *http.Request, payload string) string {
	host, network := vocab.HostName(r.Host), clearanceNetwork(web.RequestFrom(r.Context()).ClientIP)
	// v2 binds host and network; a v1 cookie (bound to nothing) no longer matches any request.
	sum := g.mac.Sum(func(msg []byte) []byte {
		msg = append(append(append(msg, "edgeq clearance v2\x00"...), payload...), 0)
		return append(append(append(msg, host...), 0), network...)
	})
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// clearanceNetwork is the network a clearance is bound to: the client address (after
// trusted_proxies) cut to its /24 for IPv4 and its /48 for IPv6. Not the address itself: a visitor's
// address moves within its network during a visit (carrier-grade NAT pools hand out neighbouring
// addresses, IPv6 privacy addresses rotate within a /64, and a home or office gets a /48 or /56 whose
// subnets a laptop may move between), and a clearance that broke at every move would send shoppers
// back to the challenge in the middle of a checkout. A copied cookie still fails from any other
// network. The price: everybody behind one /24 (an office NAT, a CGNAT pool) could share a copied
// clearance, and a visitor who changes networks (Wi-Fi to mobile) solves the challenge again.
func clearanceNetwork(a netip.Addr) string {
	a = a.Unmap()
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return "" // no address known: bound to the host alone
	}
	return p.String()
}

func (g *Gate) cleared(r *http.Request) bool {
	value, ok := web.CookieValue(r.Header, clearanceCookie)
	if !ok {
		return false
	}
	payload, mac, ok := strings.Cut(value, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(g.clearanceMAC(r, payload))) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || len(raw) != 16 {
		return false
	}
	return g.fresh(time.Unix(int64(binary.BigEndian.Uint64(raw[0:8])), 0)) //nolint:gosec // the bits written above, under the MAC
}

func (g *Gate) setClearance(w http.ResponseWriter, r *http.Request, at time.Time) {
	g.o.Cookies.Set(w, r, clearanceCookie, g.clearanceValue(r, at), g.o.ClearanceTTL-time.Since(at))
}

// ChallengePage is the data of challenge.html.
type ChallengePage struct {
	web.PageBase
	Check  Widget
	Self   string
	Failed bool
}

// Register adds the challenge page: GET shows the widget, POST checks it and, on success, sets the
// clearance cookie and answers 303 to return.
func (g *Gate) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+g.o.Prefix+"/challenge", g.challenge)
	mux.HandleFunc("POST "+g.o.Prefix+"/challenge", g.challenge)
}

func (g *Gate) challenge(w http.ResponseWriter, r *http.Request) {
	returnTo := web.SafeReturn(r.URL.Query().Get("return"))
	failed := false
	if r.Method == http.MethodPost {
		if web.CrossSite(r) {
			// The form is posted from this page; another site has no business setting a clearance.
			g.o.Responder.Error(w, r, web.ErrCrossSiteCheck)
			return
		}
		sol, e := g.o.Check.ReadBody(r, 16<<10)
		if e == nil && !sol.Empty() {
			e = g.allow(r)
		}
		if e != nil {
			g.o.Responder.Error(w, r, e)
			return
		}
		v := g.o.Check.Verify(r.Context(), Submission{Solution: sol, Scope: challengeScope, Request: r, Action: challengeAction})
		if v.OK {
			g.setClearance(w, r, v.At)
			//nolint:gosec // returnTo went through web.SafeReturn: a path on this site
			http.Redirect(w, r, returnTo, http.StatusSeeOther)
			return
		}
		if v.refusal != nil {
			g.o.Responder.Error(w, r, v.Refusal())
			return
		}
		failed = true
	}
	status := http.StatusOK
	if failed {
		status = http.StatusForbidden
	}
	base := g.o.Responder.Base(r)
	widget := g.o.Check.Widget(Page{Request: r, Text: base.Text, Scope: challengeScope, Action: challengeAction})
	g.o.Responder.PageCSP(w, r, status, "challenge.html", ChallengePage{
		PageBase: base, Check: widget, Self: g.ChallengeURL(returnTo), Failed: failed,
	}, widget.CSP)
}

// challengeScope is the challenge page's: its clearance is good for every checked route.
var challengeScope = Scope{Kind: "route", Name: "*"}

// PageCSP is the Content-Security-Policy of pages that show the widget: edgeq's own assets, plus the
// widget script's origin for scripts, frames and requests.
func PageCSP(scriptURL string) string {
	return widgetCSP(scriptOrigin(scriptURL), "")
}

// widgetCSP is the policy of a page with a widget: edgeq's own assets, plus sources (space-separated,
// "" for none) for scripts, frames and requests, and styles for style sheets.
func widgetCSP(sources, styles string) string {
	return "default-src 'none'; style-src 'self'" + spaced(styles) + "; script-src 'self'" + spaced(sources) +
		"; frame-src" + nonEmpty(spaced(sources)) + "; img-src 'self' data:; connect-src 'self'" + spaced(sources) +
		"; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
}

// scriptOrigin is the origin of a widget script's URL, "" for a relative one.
func scriptOrigin(scriptURL string) string {
	if u, err := url.Parse(scriptURL); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return ""
}

func spaced(sources string) string {
	if sources == "" {
		return ""
	}
	return " " + sources
}

func nonEmpty(origin string) string {
	if origin == "" {
		return " 'none'"
	}
	return origin
}
