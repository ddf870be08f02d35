package e2e

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeq/edgeq/internal/testutil/hcaptchatest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// TestBrowserHCaptcha is TestBrowser's Turnstile scenario with challenge.provider hcaptcha: the queue
// that asks for a check shows hCaptcha's widget (the stand-in's /1/api.js, under the page's
// Content-Security-Policy); ticking it fills in h-captcha-response, the join is verified at the
// stand-in's siteverify, and the visitor lands on the shop page when the slot frees. It runs beside
// the other browser tests, on an edgeq and keys of its own.
func TestBrowserHCaptcha(t *testing.T) {
	node := requireBrowser(t)
	t.Parallel()
	fake := hcaptchatest.New()
	hc := httptest.NewServer(fake)
	t.Cleanup(hc.Close)
	s := launch(t, func(origin, _ string) string {
		return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q}
redis: {addr: %q, key_prefix: "hcaptcha"}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
log: {level: warn}
challenge:
  provider: hcaptcha
  hcaptcha:
    site_key: %q
    secret: %q
    verify_url: "%s/siteverify"
    script_url: "%s/1/api.js"
    hostnames: ["127.0.0.1"]
queues:
  - {id: club, title: "Auction room", capacity: 1, turnstile: true}
routes:
  - {name: auctions, match: "GET /auctions/42", queue: club}
`, adminKey, origin, storetest.RedisAddr(t), hcaptchatest.SiteKey, hcaptchatest.Secret, hc.URL, hc.URL)
	})
	shots := t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		shots, _ = filepath.Abs("../docs/screenshots")
	}

	holder := s.hold(t, "club", url.Values{"h-captcha-response": {fake.Mint("127.0.0.1")}})
	before := fake.Calls.Load()
	runScenario(t, node, s, "turnstile", "WIDGET=hcaptcha", "HOLDER="+holder, "SCREENSHOT_DIR="+shots)
	// The browser's join was checked at siteverify, with the site key and the visitor's address.
	if fake.Calls.Load() <= before {
		t.Fatal("the browser joined without a siteverify call")
	}
	// The widget's style sheet comes from the stand-in's origin, which the page's CSP lets in (style-src).
	if fake.Styles.Load() == 0 {
		t.Fatal("the widget's style sheet was never fetched")
	}
	if form := fake.LastForm(); form.Get("sitekey") != hcaptchatest.SiteKey || form.Get("remoteip") != "127.0.0.1" {
		t.Fatalf("siteverify got %v", form)
	}
	if info, err := os.Stat(filepath.Join(shots, "hcaptcha-join-desktop-en.png")); err != nil || info.Size() < 5000 {
		t.Fatalf("screenshot: %v", err)
	}
}
