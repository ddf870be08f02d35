package botcheck_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/pow"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/templates"
)

// powKey is the provider's MAC key in these tests; every replica of a deployment derives the same one.
var powKey = []byte("0123456789abcdef0123456789abcdef")

// powStack is the pow provider as the server builds it, with its endpoints on a mux.
type powStack struct {
	check *botcheck.Check
	mux   *http.ServeMux
	reg   *prometheus.Registry
}

// newPow builds the pow provider on st; edit changes its settings (challenge.pow) before it is built,
// joinRate is the waiting room's join rate (nil: none).
func newPow(t *testing.T, st *store.Store, edit func(*botcheck.PowSettings), joinRate func(string) float64) powStack {
	t.Helper()
	cfg := config.Default()
	cfg.Challenge.Provider = "pow"
	settings := cfg.Challenge.Settings["pow"].(*botcheck.PowSettings)
	settings.Difficulty = 10 // quick to solve here; the default (16) is for people's browsers
	if edit != nil {
		edit(settings)
	}
	reg := prometheus.NewRegistry()
	check, err := botcheck.New(botcheck.Env{
		Config: cfg, Store: st, Key: powKey, Prefix: "/_edgeq", JoinRate: joinRate,
		Responder: &web.Responder{Brand: "edgeq", Lang: "en"},
	}, reg)
	if err != nil || check == nil {
		t.Fatalf("pow provider: %v %v", check, err)
	}
	mux := http.NewServeMux()
	check.Register(mux)
	return powStack{check: check, mux: mux, reg: reg}
}

// visitor is a request from client address ip to host, carrying the request information in its
// context as the proxy puts it there (web.WithRequest) before any handler or check runs.
func visitor(method, target, host, ip string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.Host = host
	r.Header.Set("Accept", "application/json")
	info := web.NewRequest(slog.New(slog.DiscardHandler), "pow-test")
	info.ClientIP = netip.MustParseAddr(ip)
	return r.WithContext(web.WithRequest(r.Context(), info))
}

// issued is the pow_challenge endpoint's answer.
type issued struct {
	Challenge  string `json:"challenge"`
	Difficulty int    `json:"difficulty"`
	ExpiresIn  int64  `json:"expires_in"`
}

// get asks the endpoint for a challenge with query (queue_id=ID or route=NAME) from host and ip.
func (s powStack) get(t *testing.T, query, host, ip string) (int, issued, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.mux.ServeHTTP(rec, visitor(http.MethodGet, "/_edgeq/pow_challenge?"+query, host, ip))
	var c issued
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v: %s", query, err, rec.Body)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: a challenge may be cached: %v", query, rec.Header())
		}
	}
	return rec.Code, c, rec.Body.String()
}

// challenge asks for one and insists on getting it.
func (s powStack) challenge(t *testing.T, query, host, ip string) issued {
	t.Helper()
	code, c, body := s.get(t, query, host, ip)
	if code != http.StatusOK || len(c.Challenge) != 64 {
		t.Fatalf("GET pow_challenge?%s: %d %s", query, code, body)
	}
	return c
}

func solve(t *testing.T, c issued) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nonce, ok := pow.Solve(ctx, c.Challenge, c.Difficulty)
	if !ok {
		t.Fatalf("no nonce found for difficulty %d", c.Difficulty)
	}
	return strconv.FormatUint(nonce, 10)
}

// weakNonce is a nonce whose hash has at least `has` leading zero bits but fewer than `lacks`.
func weakNonce(t *testing.T, challenge string, has, lacks int) string {
	t.Helper()
	for n := uint64(0); n < 1<<24; n++ {
		nonce := strconv.FormatUint(n, 10)
		if bits := pow.LeadingZeroBits(pow.Hash(challenge, nonce)); bits >= has && bits < lacks {
			return nonce
		}
	}
	t.Fatal("no weak nonce found")
	return ""
}

// verify submits a solution for scope from host and ip, the fields read as a join reads a form.
func (s powStack) verify(t *testing.T, challenge, nonce string, scope botcheck.Scope, host, ip string) botcheck.Verdict {
	t.Helper()
	r := visitor(http.MethodPost, "/_edgeq/assign_queue_pos", host, ip)
	sol := s.check.Pick(map[string]string{"pow_challenge": challenge, "pow_nonce": nonce}, r.Header)
	return s.check.Verify(r.Context(), botcheck.Submission{Solution: sol, Scope: scope, Request: r})
}

func (s powStack) count(result string) float64 {
	return testutil.ToFloat64(s.check.Counter().WithLabelValues("pow", result))
}

func expectVerdict(t *testing.T, what string, v botcheck.Verdict, ok bool, result string) {
	t.Helper()
	if v.OK != ok || v.Result != result {
		t.Fatalf("%s: ok=%v result=%q %v, want ok=%v result=%q", what, v.OK, v.Result, v.Detail, ok, result)
	}
	if !ok {
		if e := v.Refusal(); result != botcheck.ResultStoreUnavailable && (e.Status != http.StatusForbidden || e.Code != "INVALID_TURNSTILE_TOKEN") {
			t.Fatalf("%s: refused with %d %s, want 403 INVALID_TURNSTILE_TOKEN", what, e.Status, e.Code)
		}
	}
}

var (
	dropJoin  = botcheck.Scope{Kind: "queue", Name: "drop"}
	otherJoin = botcheck.Scope{Kind: "queue", Name: "other"}
)

// A challenge from the endpoint, solved, passes once for its queue, from the visitor's network and
// host; again, or at another replica (another Check on the same store), it is replayed. A solution
// sent for another queue, from another network or to another host is invalid, a nonce short of the
// difficulty is insufficient, and none of these refusals spends the challenge. Every result is
// counted in edgeq_challenge_verifications_total{provider="pow"}.
func TestPow_IssueSolveVerify(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		s := newPow(t, st, nil, nil)
		const host, ip = "shop.example", "198.51.100.7"
		c := s.challenge(t, "queue_id=drop", host, ip)
		if c.Difficulty != 10 || c.ExpiresIn != 120 {
			t.Fatalf("challenge %+v, want difficulty 10 and expires_in 120 (the default ttl, 2m)", c)
		}
		nonce := solve(t, c)

		expectVerdict(t, "for another queue", s.verify(t, c.Challenge, nonce, otherJoin, host, ip), false, pow.ResultInvalid)
		expectVerdict(t, "for a checked route", s.verify(t, c.Challenge, nonce, botcheck.Scope{Kind: "route", Name: "drop"}, host, ip), false, pow.ResultInvalid)
		expectVerdict(t, "from another network", s.verify(t, c.Challenge, nonce, dropJoin, host, "203.0.113.9"), false, pow.ResultInvalid)
		expectVerdict(t, "from the next /24", s.verify(t, c.Challenge, nonce, dropJoin, host, "198.51.101.7"), false, pow.ResultInvalid)
		expectVerdict(t, "to another host", s.verify(t, c.Challenge, nonce, dropJoin, "evil.example", ip), false, pow.ResultInvalid)
		weak := weakNonce(t, c.Challenge, 0, c.Difficulty)
		expectVerdict(t, "a nonce short of the difficulty", s.verify(t, c.Challenge, weak, dropJoin, host, ip), false, pow.ResultInsufficient)
		edited := c.Challenge[:20] + string(c.Challenge[20]^1) + c.Challenge[21:]
		expectVerdict(t, "an edited challenge", s.verify(t, edited, nonce, dropJoin, host, ip), false, pow.ResultInvalid)
		expectVerdict(t, "no nonce", s.verify(t, c.Challenge, "", dropJoin, host, ip), false, pow.ResultMissing)
		expectVerdict(t, "nothing at all", s.verify(t, "", "", dropJoin, host, ip), false, pow.ResultMissing)

		// The refusals above spent nothing: the solution passes, from another address of the same
		// network (an address moves within its /24 during a visit) and with the host's port.
		v := s.verify(t, c.Challenge, nonce, dropJoin, host+":443", "198.51.100.200")
		expectVerdict(t, "the solution", v, true, pow.ResultSuccess)
		if time.Since(v.At) > time.Minute {
			t.Errorf("passed at %v", v.At)
		}
		expectVerdict(t, "the same again", s.verify(t, c.Challenge, nonce, dropJoin, host, ip), false, pow.ResultReplayed)
		replica := newPow(t, st, nil, nil)
		expectVerdict(t, "the same at another replica", replica.verify(t, c.Challenge, nonce, dropJoin, host, ip), false, pow.ResultReplayed)

		// In the headers an API client may send instead of form fields (the provider names them).
		c2 := s.challenge(t, "queue_id=drop", host, ip)
		r := visitor(http.MethodPost, "/_edgeq/assign_queue_pos", host, ip)
		headers := map[string]string{}
		for _, f := range s.check.Fields() {
			headers[f.Name] = f.Header
		}
		if headers["pow_challenge"] == "" || headers["pow_nonce"] == "" {
			t.Fatalf("the provider's fields have no headers: %+v", s.check.Fields())
		}
		r.Header.Set(headers["pow_challenge"], c2.Challenge)
		r.Header.Set(headers["pow_nonce"], solve(t, c2))
		sol := s.check.Pick(map[string]string{}, r.Header)
		expectVerdict(t, "in headers", s.check.Verify(r.Context(), botcheck.Submission{Solution: sol, Scope: dropJoin, Request: r}), true, pow.ResultSuccess)

		want := map[string]float64{
			pow.ResultSuccess: 2, pow.ResultReplayed: 1, pow.ResultInvalid: 6, pow.ResultInsufficient: 1, pow.ResultMissing: 2,
			pow.ResultExpired: 0, pow.ResultStoreError: 0, botcheck.ResultStoreUnavailable: 0,
		}
		for result, n := range want {
			if got := s.count(result); got != n {
				t.Errorf(`edgeq_challenge_verifications_total{provider="pow",result=%q} = %v, want %v`, result, got, n)
			}
		}
		if got := replica.count(pow.ResultReplayed); got != 1 {
			t.Errorf("the replica counted %v replays", got)
		}
		// Every result is there from the start, at zero, on the registry the provider was built with.
		if n, err := testutil.GatherAndCount(replica.reg, "edgeq_challenge_verifications_total"); err != nil || n != len(want) {
			t.Errorf("the replica's counter has %d series (%v), want %d", n, err, len(want))
		}
	})
}

// The challenge page's challenge (route *) passes for route * only; a checked route's is good for that
// route and not for a queue of the same name.
func TestPow_RouteScopes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		s := newPow(t, st, nil, nil)
		const host, ip = "shop.example", "2001:db8:1:2::7"
		page := s.challenge(t, "route=*", host, ip)
		nonce := solve(t, page)
		expectVerdict(t, "the page's for a route", s.verify(t, page.Challenge, nonce, botcheck.Scope{Kind: "route", Name: "checkout"}, host, ip), false, pow.ResultInvalid)
		expectVerdict(t, "from another /48", s.verify(t, page.Challenge, nonce, botcheck.Scope{Kind: "route", Name: "*"}, host, "2001:db8:2::7"), false, pow.ResultInvalid)
		// Another address of the same /48: the same visitor.
		expectVerdict(t, "the page's", s.verify(t, page.Challenge, nonce, botcheck.Scope{Kind: "route", Name: "*"}, host, "2001:db8:1:ffff::1"), true, pow.ResultSuccess)

		route := s.challenge(t, "route=checkout", host, ip)
		nonce = solve(t, route)
		expectVerdict(t, "a route's for a queue", s.verify(t, route.Challenge, nonce, botcheck.Scope{Kind: "queue", Name: "checkout"}, host, ip), false, pow.ResultInvalid)
		expectVerdict(t, "a route's", s.verify(t, route.Challenge, nonce, botcheck.Scope{Kind: "route", Name: "checkout"}, host, ip), true, pow.ResultSuccess)
	})
}

// A challenge solved after its ttl is expired, and counted so.
func TestPow_Expired(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		// Below the 10 s the configuration accepts: set on the settings directly, for a short test.
		s := newPow(t, st, func(p *botcheck.PowSettings) { p.TTL = time.Second }, nil)
		const host, ip = "shop.example", "198.51.100.7"
		c := s.challenge(t, "queue_id=drop", host, ip)
		if c.ExpiresIn != 1 {
			t.Fatalf("expires_in %d, want 1", c.ExpiresIn)
		}
		nonce := solve(t, c)
		time.Sleep(1100 * time.Millisecond)
		expectVerdict(t, "past its ttl", s.verify(t, c.Challenge, nonce, dropJoin, host, ip), false, pow.ResultExpired)
		if got := s.count(pow.ResultExpired); got != 1 {
			t.Errorf("expired counted %v times", got)
		}
	})
}

// With the store counted as down and on_store_error closed, a solution is refused with 503
// STORE_UNAVAILABLE (not the visitor's fault) without being spent: it passes once the store is back.
func TestPow_StoreDegraded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		s := newPow(t, st, nil, nil)
		const host, ip = "shop.example", "198.51.100.7"
		c := s.challenge(t, "queue_id=drop", host, ip)
		nonce := solve(t, c)
		r := visitor(http.MethodPost, "/_edgeq/assign_queue_pos", host, ip)
		web.RequestFrom(r.Context()).Store.Degraded = true
		sol := s.check.Pick(map[string]string{"pow_challenge": c.Challenge, "pow_nonce": nonce}, nil)
		v := s.check.Verify(r.Context(), botcheck.Submission{Solution: sol, Scope: dropJoin, Request: r})
		expectVerdict(t, "store down", v, false, botcheck.ResultStoreUnavailable)
		if e := v.Refusal(); e.Status != http.StatusServiceUnavailable || e.Code != "STORE_UNAVAILABLE" {
			t.Fatalf("refused with %d %s, want 503 STORE_UNAVAILABLE", e.Status, e.Code)
		}
		expectVerdict(t, "store back", s.verify(t, c.Challenge, nonce, dropJoin, host, ip), true, pow.ResultSuccess)
	})
}

// The endpoint takes exactly one of queue_id (a queue's id) and route (a route's name, or *); anything
// else is 400 INVALID_REQUEST.
func TestPow_EndpointRefusesBadScopes(t *testing.T) {
	s := newPow(t, storetest.Embedded(t), nil, nil)
	for _, query := range []string{"", "queue_id=", "queue_id=has%20space", "queue_id=..%2Fdrop", "queue_id=" + strings.Repeat("q", 200),
		"route=a%2Fb", "queue_id=drop&route=checkout", "other=drop"} {
		code, _, body := s.get(t, query, "shop.example", "198.51.100.7")
		if code != http.StatusBadRequest || !strings.Contains(body, "INVALID_REQUEST") {
			t.Errorf("pow_challenge?%s: %d %s, want 400 INVALID_REQUEST", query, code, body)
		}
	}
	rec := httptest.NewRecorder()
	s.mux.ServeHTTP(rec, visitor(http.MethodPost, "/_edgeq/pow_challenge?queue_id=drop", "shop.example", "198.51.100.7"))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST pow_challenge: %d, want 405", rec.Code)
	}
}

// challenge.pow.adaptive: a queue's join difficulty rises a bit per doubling of its join rate beyond
// joins_per_second, up to max_difficulty, and falls back when the rush is over; the difficulty is in
// the challenge (a nonce good enough for the floor does not pass a raised one). Routes and the
// challenge page stay at the floor.
func TestPow_AdaptiveDifficulty(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		var rate atomic.Int64 // joins per second of queue drop
		joinRate := func(queue string) float64 {
			if queue == "drop" {
				return float64(rate.Load())
			}
			return 0
		}
		s := newPow(t, st, func(p *botcheck.PowSettings) {
			p.Difficulty = 8
			p.Adaptive = botcheck.PowAdaptive{MaxDifficulty: 12, JoinsPerSecond: 10}
		}, joinRate)
		const host, ip = "shop.example", "198.51.100.7"
		for _, step := range []struct {
			rate       int64
			drop, calm int
		}{
			{0, 8, 8}, {10, 8, 8}, {20, 9, 8}, {40, 10, 8}, {70, 11, 8}, {160, 12, 8}, {100000, 12, 8}, {5, 8, 8},
		} {
			rate.Store(step.rate)
			if got := s.challenge(t, "queue_id=drop", host, ip).Difficulty; got != step.drop {
				t.Errorf("at %d joins/s: drop's difficulty %d, want %d", step.rate, got, step.drop)
			}
			if got := s.challenge(t, "queue_id=calm", host, ip).Difficulty; got != step.calm {
				t.Errorf("at %d joins/s: a calm queue's difficulty %d, want %d", step.rate, got, step.calm)
			}
			for _, route := range []string{"route=*", "route=checkout"} {
				if got := s.challenge(t, route, host, ip).Difficulty; got != 8 {
					t.Errorf("at %d joins/s: %s has difficulty %d, want the floor 8", step.rate, route, got)
				}
			}
		}

		rate.Store(100000)
		c := s.challenge(t, "queue_id=drop", host, ip)
		expectVerdict(t, "a nonce for the floor", s.verify(t, c.Challenge, weakNonce(t, c.Challenge, 8, 12), dropJoin, host, ip), false, pow.ResultInsufficient)
		expectVerdict(t, "a nonce for the ceiling", s.verify(t, c.Challenge, solve(t, c), dropJoin, host, ip), true, pow.ResultSuccess)
	})
}

// The widget is the snippet pow.js drives: the challenge URL of its scope, the worker's URL, the
// texts of the page's language; it loads pow.js and needs no other origin.
func TestPow_Widget(t *testing.T) {
	s := newPow(t, storetest.Embedded(t), nil, nil)
	for _, c := range []struct {
		scope botcheck.Scope
		url   string
	}{
		{dropJoin, `data-pow-url="/_edgeq/pow_challenge?queue_id=drop"`},
		{botcheck.Scope{Kind: "route", Name: "*"}, `data-pow-url="/_edgeq/pow_challenge?route=%2a"`},
	} {
		for _, lang := range templates.Languages {
			text := templates.For(lang)
			w := s.check.Widget(botcheck.Page{Text: text, Scope: c.scope})
			snippet := string(w.Snippet)
			if w.Script != "/_edgeq/static/pow.js" || w.CSP != web.DefaultCSP {
				t.Fatalf("script %q, CSP %q", w.Script, w.CSP)
			}
			want := []string{c.url, `data-pow-worker="/_edgeq/static/pow-worker.js"`, `name="pow_challenge"`, `name="pow_nonce"`,
				`role="status"`, `aria-live="polite"`, `<progress class="pow-progress" max="100" value="0"`, "<noscript>"}
			for _, key := range []string{"pow.working", "pow.done", "pow.failed", "pow.progress", "pow.needs_js"} {
				if !text.Has(key) {
					t.Fatalf("%s lacks %s", lang, key)
				}
				want = append(want, templateEscape(text.T(key)))
			}
			for _, w := range want {
				if !strings.Contains(strings.ToLower(snippet), strings.ToLower(w)) {
					t.Errorf("%s %s: the snippet lacks %q:\n%s", lang, c.scope, w, snippet)
				}
			}
		}
	}
}

// templateEscape is s as html/template writes it in text and attributes.
func templateEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "'", "&#39;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace(s)
}
