package botcheck_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/hcaptchatest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/templates"
)

// hcCheck is one hCaptcha response to verify, the visitor's address and the Host it asked for.
type hcCheck struct{ Response, RemoteIP, Host string }

// hcProvider is challenge.provider hcaptcha, built as the server builds it.
type hcProvider struct {
	*botcheck.Check
	reg *prometheus.Registry
}

// newHC builds the hcaptcha provider on st (nil: no single-use record), its settings those of
// challenge.hcaptcha at their defaults with the stand-in's keys, then edit.
func newHC(t *testing.T, st *store.Store, verifyURL string, edit func(*botcheck.HCaptchaSettings)) hcProvider {
	t.Helper()
	cfg := config.Default()
	cfg.Challenge.Provider = "hcaptcha"
	s := cfg.Challenge.Settings["hcaptcha"].(*botcheck.HCaptchaSettings)
	s.SiteKey, s.Secret, s.VerifyURL = hcaptchatest.SiteKey, hcaptchatest.Secret, verifyURL
	s.Timeout = 300 * time.Millisecond
	if edit != nil {
		edit(s)
	}
	reg := prometheus.NewRegistry()
	c, err := botcheck.New(botcheck.Env{Config: cfg, Store: st}, reg)
	if err != nil || c == nil {
		t.Fatalf("hcaptcha provider: %v %v", c, err)
	}
	if c.Name() != "hcaptcha" {
		t.Fatalf("provider %q", c.Name())
	}
	return hcProvider{c, reg}
}

func (p hcProvider) verify(chk hcCheck) botcheck.Verdict {
	info := web.NewRequest(nil, "test")
	if chk.RemoteIP != "" {
		info.ClientIP = netip.MustParseAddr(chk.RemoteIP)
	}
	ctx := web.WithRequest(context.Background(), info)
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://"+chk.Host+"/", nil)
	req.Host = chk.Host
	return p.Verify(ctx, botcheck.Submission{
		Solution: botcheck.Solution{"h-captcha-response": chk.Response}, Scope: botcheck.Scope{Kind: "queue", Name: "drop"}, Request: req,
	})
}

// counted is edgeq_challenge_verifications_total{provider="hcaptcha",result}.
func (p hcProvider) counted(result string) float64 {
	return testutil.ToFloat64(p.Counter().WithLabelValues("hcaptcha", result))
}

func standIn(t *testing.T) (*hcaptchatest.Server, string) {
	t.Helper()
	fake := hcaptchatest.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL + "/siteverify"
}

func wantVerdict(t *testing.T, v botcheck.Verdict, ok bool, result string, detail ...string) {
	t.Helper()
	if v.OK != ok || v.Result != result {
		t.Fatalf("verdict %+v, want ok=%v result=%s", v, ok, result)
	}
	for _, d := range detail {
		if !slices.Contains(v.Detail, d) {
			t.Fatalf("verdict %+v, want %q among its details", v, d)
		}
	}
}

// A response from the stand-in's widget passes once, for the host it was solved on, and is counted
// under provider="hcaptcha"; a replay is refused by edgeq's own single-use record before hCaptcha is
// asked, and a response already spent at hCaptcha (by another deployment) by hCaptcha itself.
func TestHCaptcha_Verify(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		fake, verifyURL := standIn(t)
		p := newHC(t, st, verifyURL, nil)
		good := fake.Mint("shop.example")

		wantVerdict(t, p.verify(hcCheck{Host: "shop.example"}), false, botcheck.ResultMissing)
		if n := fake.Calls.Load(); n != 0 {
			t.Fatalf("siteverify asked %d times about no response", n)
		}
		wantVerdict(t, p.verify(hcCheck{Response: "not-a-response", Host: "shop.example"}), false, botcheck.ResultInvalid, "invalid-input-response")

		v := p.verify(hcCheck{Response: good, Host: "shop.example:8443", RemoteIP: "203.0.113.9"})
		wantVerdict(t, v, true, botcheck.ResultSuccess)
		if v.At.IsZero() || time.Since(v.At) > time.Minute {
			t.Fatalf("challenge time %s", v.At)
		}
		calls := fake.Calls.Load()
		wantVerdict(t, p.verify(hcCheck{Response: good, Host: "shop.example"}), false, botcheck.ResultReplayed)
		if fake.Calls.Load() != calls {
			t.Fatal("a replay edgeq had seen was sent to siteverify")
		}

		wantVerdict(t, p.verify(hcCheck{Response: fake.Mint("evil.example"), Host: "shop.example"}), false, botcheck.ResultHostname)
		wantVerdict(t, p.verify(hcCheck{Response: fake.MintAt("shop.example", time.Now().Add(-3*time.Minute)), Host: "shop.example"}),
			false, botcheck.ResultInvalid, "expired-input-response")

		// Spent at hCaptcha by another deployment (no store, so no record here): hCaptcha refuses it.
		spent := fake.Mint("shop.example")
		wantVerdict(t, newHC(t, nil, verifyURL, nil).verify(hcCheck{Response: spent, Host: "shop.example"}), true, botcheck.ResultSuccess)
		wantVerdict(t, p.verify(hcCheck{Response: spent, Host: "shop.example"}), false, botcheck.ResultInvalid, "already-seen-response")

		for result, want := range map[string]float64{
			botcheck.ResultSuccess: 1, botcheck.ResultMissing: 1, botcheck.ResultInvalid: 3,
			botcheck.ResultReplayed: 1, botcheck.ResultHostname: 1, botcheck.ResultUnavailableClosed: 0,
		} {
			if got := p.counted(result); got != want {
				t.Errorf(`edgeq_challenge_verifications_total{provider="hcaptcha",result=%q} = %v, want %v`, result, got, want)
			}
		}
		// Every result is there from the start, at zero, on the registry the server exposes.
		if n, err := testutil.GatherAndCount(p.reg, "edgeq_challenge_verifications_total"); err != nil || n != len(p.Provider().Results()) {
			t.Fatalf("series %d (%v), want %d", n, err, len(p.Provider().Results()))
		}
	})
}

// With hostnames listed, siteverify's hostname must be one of them, whatever Host the request names.
func TestHCaptcha_Hostnames(t *testing.T) {
	fake, verifyURL := standIn(t)
	p := newHC(t, storetest.Embedded(t), verifyURL, func(s *botcheck.HCaptchaSettings) { s.Hostnames = []string{"shop.example"} })
	wantVerdict(t, p.verify(hcCheck{Response: fake.Mint("shop.example"), Host: "10.0.0.7:8080"}), true, botcheck.ResultSuccess)
	wantVerdict(t, p.verify(hcCheck{Response: fake.Mint("evil.example"), Host: "evil.example"}), false, botcheck.ResultHostname)
}

// siteverify gets the secret, the response, the site key (so that a response of another site key is
// refused by hCaptcha) and the visitor's address; remoteip is left out when the address is unknown.
func TestHCaptcha_SendsSitekeyAndRemoteIP(t *testing.T) {
	fake, verifyURL := standIn(t)
	p := newHC(t, storetest.Embedded(t), verifyURL, nil)
	response := fake.Mint("shop.example")
	wantVerdict(t, p.verify(hcCheck{Response: response, Host: "shop.example", RemoteIP: "2001:db8::7"}), true, botcheck.ResultSuccess)
	form := fake.LastForm()
	for key, want := range map[string]string{
		"secret": hcaptchatest.Secret, "response": response, "sitekey": hcaptchatest.SiteKey, "remoteip": "2001:db8::7",
	} {
		if got := form.Get(key); got != want {
			t.Errorf("siteverify got %s=%q, want %q", key, got, want)
		}
	}
	if form.Has("idempotency_key") {
		t.Error("an idempotency_key (Turnstile's) was sent to hCaptcha")
	}

	fake.RequireRemoteIP.Store(true)
	wantVerdict(t, p.verify(hcCheck{Response: fake.Mint("shop.example"), Host: "shop.example"}), false, botcheck.ResultInvalid, "missing-remoteip")
	if fake.LastForm().Has("remoteip") {
		t.Error("remoteip sent for a visitor whose address is unknown")
	}

	// A site key that is not the secret's: hCaptcha refuses every response.
	mismatched := newHC(t, nil, verifyURL, func(s *botcheck.HCaptchaSettings) { s.SiteKey = hcaptchatest.TestSiteKey })
	wantVerdict(t, mismatched.verify(hcCheck{Response: fake.Mint("shop.example"), Host: "shop.example", RemoteIP: "203.0.113.9"}),
		false, botcheck.ResultInvalid, "sitekey-secret-mismatch")
}

// hCaptcha's test keys pass the test response for any host (their answer names no real site), and
// nothing else; the stand-in knows the same keys as the provider.
func TestHCaptcha_TestKeys(t *testing.T) {
	if botcheck.HCaptchaTestSiteKey != hcaptchatest.TestSiteKey || botcheck.HCaptchaTestSecret != hcaptchatest.TestSecret {
		t.Fatal("the provider's and the stand-in's test keys differ")
	}
	fake, verifyURL := standIn(t)
	p := newHC(t, storetest.Embedded(t), verifyURL, func(s *botcheck.HCaptchaSettings) {
		s.SiteKey, s.Secret = botcheck.HCaptchaTestSiteKey, botcheck.HCaptchaTestSecret
		s.Hostnames = []string{"shop.example"}
	})
	wantVerdict(t, p.verify(hcCheck{Response: hcaptchatest.TestResponse, Host: "localhost:8080"}), true, botcheck.ResultSuccess)
	wantVerdict(t, p.verify(hcCheck{Response: fake.Mint("shop.example"), Host: "shop.example"}), false, botcheck.ResultInvalid, "not-using-dummy-passcode")
}

// siteverify unreachable, slow or answering 500: on_error closed refuses, open lets the visitor
// through, each counted under its own result. A 500 is not retried (hCaptcha has no internal-error).
func TestHCaptcha_SiteverifyDown(t *testing.T) {
	fake, verifyURL := standIn(t)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, target := range []struct {
		name, url string
		set       func()
	}{
		{"unreachable", down.URL + "/siteverify", func() {}},
		{"timeout", verifyURL, func() { fake.Delay.Store(int64(2 * time.Second)) }},
		{"HTTP 500", verifyURL, func() { fake.Failures.Store(1) }},
	} {
		for _, policy := range []struct {
			onError string
			ok      bool
			result  string
		}{{"closed", false, botcheck.ResultUnavailableClosed}, {"open", true, botcheck.ResultUnavailableOpen}} {
			t.Run(target.name+" "+policy.onError, func(t *testing.T) {
				fake.Delay.Store(0)
				fake.Failures.Store(0)
				target.set()
				p := newHC(t, storetest.Embedded(t), target.url, func(s *botcheck.HCaptchaSettings) { s.OnError = policy.onError })
				calls := fake.Calls.Load()
				v := p.verify(hcCheck{Response: fake.Mint("shop.example"), Host: "shop.example"})
				wantVerdict(t, v, policy.ok, policy.result)
				if policy.ok && v.At.IsZero() {
					t.Fatal("let through without a check time")
				}
				if e := v.Refusal(); !policy.ok && e.Code != "INVALID_TURNSTILE_TOKEN" {
					t.Fatalf("refusal %v", e)
				}
				if got := p.counted(policy.result); got != 1 {
					t.Fatalf("counter %s = %v", policy.result, got)
				}
				if target.name == "HTTP 500" && fake.Calls.Load()-calls != 1 {
					t.Fatalf("siteverify called %d times after a 500", fake.Calls.Load()-calls)
				}
			})
		}
	}
	fake.Delay.Store(0)
}

// Without both keys the provider is not configured: New returns no check and no error, so that queues
// and routes asking for one are refused.
func TestHCaptcha_UnconfiguredIsNoCheck(t *testing.T) {
	for _, keys := range [][2]string{{"", ""}, {hcaptchatest.SiteKey, ""}, {"", hcaptchatest.Secret}} {
		cfg := config.Default()
		cfg.Challenge.Provider = "hcaptcha"
		s := cfg.Challenge.Settings["hcaptcha"].(*botcheck.HCaptchaSettings)
		s.SiteKey, s.Secret = keys[0], keys[1]
		c, err := botcheck.New(botcheck.Env{Config: cfg}, prometheus.NewRegistry())
		if c != nil || err != nil {
			t.Fatalf("keys %q: %v %v", keys, c, err)
		}
	}
}

// The solution travels in the h-captcha-response form field, or the H-Captcha-Response header.
func TestHCaptcha_Fields(t *testing.T) {
	p := newHC(t, nil, "http://127.0.0.1:1/siteverify", nil)
	if !p.HasField("h-captcha-response") || len(p.Fields()) != 1 {
		t.Fatalf("fields %+v", p.Fields())
	}
	h := http.Header{"H-Captcha-Response": {"from-header"}}
	if got := p.Pick(map[string]string{}, h)["h-captcha-response"]; got != "from-header" {
		t.Fatalf("header: %q", got)
	}
	if got := p.Pick(map[string]string{"h-captcha-response": "from-form"}, h)["h-captcha-response"]; got != "from-form" {
		t.Fatalf("form: %q", got)
	}
}

// A page with hCaptcha's widget allows what hCaptcha's docs ask for (https://hcaptcha.com and
// https://*.hcaptcha.com for scripts, frames, styles and requests); with a stand-in, its origin in their
// place. Turnstile's policy is not changed by it.
func TestHCaptcha_WidgetCSP(t *testing.T) {
	page := botcheck.Page{Text: templates.For("en"), Scope: botcheck.Scope{Kind: "queue", Name: "drop"}}
	directives := func(csp string) map[string]string {
		out := map[string]string{}
		for _, d := range strings.Split(csp, ";") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
			out[name] = value
		}
		return out
	}

	live := newHC(t, nil, "https://api.hcaptcha.com/siteverify", nil).Widget(page)
	if live.Script != "https://js.hcaptcha.com/1/api.js" {
		t.Fatalf("script %q", live.Script)
	}
	if !strings.Contains(string(live.Snippet), `<div class="h-captcha" data-sitekey="`+hcaptchatest.SiteKey+`">`) {
		t.Fatalf("snippet %s", live.Snippet)
	}
	d := directives(live.CSP)
	for _, name := range []string{"script-src", "style-src", "connect-src"} {
		if d[name] != "'self' https://hcaptcha.com https://*.hcaptcha.com" {
			t.Errorf("%s %q", name, d[name])
		}
	}
	if d["frame-src"] != "https://hcaptcha.com https://*.hcaptcha.com" {
		t.Errorf("frame-src %q", d["frame-src"])
	}
	for name, want := range map[string]string{"default-src": "'none'", "img-src": "'self' data:", "form-action": "'self'",
		"base-uri": "'none'", "frame-ancestors": "'none'"} {
		if d[name] != want {
			t.Errorf("%s %q, want %q", name, d[name], want)
		}
	}

	stand := newHC(t, nil, "http://127.0.0.1:9/siteverify", func(s *botcheck.HCaptchaSettings) {
		s.ScriptURL = "http://127.0.0.1:9/1/api.js"
	}).Widget(page)
	d = directives(stand.CSP)
	for _, name := range []string{"script-src", "style-src", "connect-src"} {
		if d[name] != "'self' http://127.0.0.1:9" {
			t.Errorf("stand-in %s %q", name, d[name])
		}
	}
	if d["frame-src"] != "http://127.0.0.1:9" || strings.Contains(stand.CSP, "hcaptcha.com") {
		t.Errorf("stand-in CSP %q", stand.CSP)
	}

	for script, want := range map[string]string{
		"https://challenges.cloudflare.com/turnstile/v0/api.js": "default-src 'none'; style-src 'self'; script-src 'self' https://challenges.cloudflare.com; " +
			"frame-src https://challenges.cloudflare.com; img-src 'self' data:; connect-src 'self' https://challenges.cloudflare.com; " +
			"form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
		"/turnstile/v0/api.js": "default-src 'none'; style-src 'self'; script-src 'self'; frame-src 'none'; img-src 'self' data:; " +
			"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
	} {
		if got := botcheck.PageCSP(script); got != want {
			t.Errorf("PageCSP(%q) =\n%s\nwant\n%s", script, got, want)
		}
	}
}
