package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/brand"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/turnstiletest"
	"github.com/edgeq/edgeq/templates"
)

// pagesConfig has a queue, route or auction for every state of the shopper pages (browser.mjs,
// states). The browsers come from loopback, which is trusted, and each state gives its browser an
// address of its own (X-Forwarded-For): the rate-limited state exhausts its own allowance of 20 page
// loads a minute and no other state's. pages is the pages section.
func pagesConfig(t *testing.T, keyPrefix, pages string) func(origin, ts string) string {
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	return func(origin, ts string) string {
		return fmt.Sprintf(`
server: {listen: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q, timeout: 10m}
redis: {addr: %q, key_prefix: %q}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 20}
log: {level: warn}
turnstile:
  site_key: %q
  secret_key: %q
  verify_url: "%s/turnstile/v0/siteverify"
  script_url: "%s/turnstile/v0/api.js"
queues:
  - {id: line, title: "Sneaker drop", capacity: 0}
  - {id: draw, title: "Sneaker raffle", capacity: 0, method: random}
  - {id: club, title: "Auction room", capacity: 0, turnstile: true}
  - {id: later, title: "Next week's drop", capacity: 5, opens_at: %q, prequeue: 10m}
  - {id: soon, title: "Midnight drop", capacity: 5, opens_at: %q, prequeue: 3h, shuffle: true}
  - {id: pause, title: "Paused drop", capacity: 0}
  - {id: gone, title: "Last pairs", capacity: 0, sold_out_with: ["sneaker-b"]}
  - {id: shut, title: "Yesterday's drop", capacity: 5, opens_at: %q, closes_at: %q}
  - {id: vip, title: "Members' presale", capacity: 0, invite_only: true}
products:
  - {id: "sneaker-b", stock: 0, per_user_limit: 1, name: "Limited sneaker B"}
routes:
  - {name: products, match: "GET /products/{id}", queue: line}
  - {name: held, match: "GET /e2e/hold", max_in_flight: 1, hold: 0s}
  - {name: checked, match: "GET /auctions/42", turnstile: true}
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "cookie:shop_session"}
auctions:
  - {id: "7", starting_price: "20.00", ends_at: %q}
pages:
%s
`, adminKey, origin, storetest.RedisAddr(t), keyPrefix, turnstiletest.SiteKey, turnstiletest.Secret, ts, ts,
			at(7*24*time.Hour), at(2*time.Hour), at(-48*time.Hour), at(-24*time.Hour), at(2*time.Hour), pages)
	}
}

// preparePages puts the stack's queues in their states: a line that has moved (so the waiting page
// shows an estimated wait), a lottery with people in it, a paused line, a slot of the held route taken
// until the test ends, and a first bid on auction 7 (so a lower one is refused).
func preparePages(t *testing.T, s *stack) {
	t.Helper()
	for range 41 {
		s.join(t, "line", nil)
	}
	for range 3 {
		s.adminPost(t, "/api/queue/increment_serving_position", url.Values{"queue_id": {"line"}, "increment_by": {"3"}})
		time.Sleep(700 * time.Millisecond)
	}
	for range 30 {
		s.join(t, "draw", nil)
	}
	s.adminJSON(t, "PUT", "/api/queue", map[string]any{"queue_id": "pause", "paused": true})

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.edgeq+"/e2e/hold", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-s.holds:
	case <-time.After(10 * time.Second):
		t.Fatal("the held request never reached the shop")
	}

	form := url.Values{"amount": {"25.00"}}
	req, _ := http.NewRequest("POST", s.edgeq+"/auctions/7/bid", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", "shop_session=e2e-first-bidder")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the first bid: %d", resp.StatusCode)
	}
}

func (s *stack) adminJSON(t *testing.T, method, path string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.admin+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("admin %s %s: %d", method, path, resp.StatusCode)
	}
}

// TestBrowserPages looks at every state of the pages a shopper can see (docs/reference.md "Pages"):
// axe-core's WCAG 2.1 A and AA rules at two sizes, in light and dark, in English and Arabic; the
// keyboard; the live region; motion; overflow in every built-in language; and the screenshots of
// docs/screenshots.
func TestBrowserPages(t *testing.T) {
	node := requireBrowser(t)
	s := launch(t, pagesConfig(t, "pages", `  brand: "Sneaker Shop"`))
	run := func(t *testing.T, scenario string, extra ...string) {
		runScenario(t, node, s, scenario, append(extra, "SERVER_LANGS="+strings.Join(templates.Languages, ","))...)
	}
	preparePages(t, s)
	shots := t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		shots, _ = filepath.Abs("../docs/screenshots")
	}
	t.Run("axe: every page state, desktop and phone, light and dark, en and ar", func(t *testing.T) {
		run(t, "axe", "LANGS=en,ar")
	})
	t.Run("keyboard: focus visible and in order on the waiting, challenge and expired pages", func(t *testing.T) {
		run(t, "keyboard")
	})
	t.Run("live region: polls with the same place say nothing, a real move is announced once", func(t *testing.T) {
		run(t, "liveregion")
	})
	t.Run("reduced motion: no transition on the progress bar", func(t *testing.T) {
		run(t, "motion")
	})
	t.Run("no text overflows its box at 320 and 1280 px in any built-in language", func(t *testing.T) {
		run(t, "overflow", "LANGS="+strings.Join(templates.Languages, ","))
	})
	// The same states as above, only pictured: taken for make screenshots, not at every test run.
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	t.Run("screenshots of every state in en, ja and ar", func(t *testing.T) {
		run(t, "states", "SCREENSHOT_DIR="+shots)
		for _, name := range []string{"state-waiting-desktop-en", "state-waiting-phone-ja", "state-waiting-phone-ar", "state-waiting-desktop-en-dark"} {
			if info, err := os.Stat(filepath.Join(shots, "states", name+".png")); err != nil || info.Size() < 5000 {
				t.Fatalf("screenshot %s: %v", name, err)
			}
		}
	})
}

// TestBrowserBranding waits in a browser on a page with the shop's logo and accent colour: the shop
// is never asked (counted at the shop), the logo is edgeq's URL and shows, the accent is what the
// buttons and the progress bar are painted with, in light and dark, and the page still passes axe.
func TestBrowserBranding(t *testing.T) {
	node := requireBrowser(t)
	logo := filepath.Join(t.TempDir(), "sneaker-shop.svg")
	if err := os.WriteFile(logo, []byte(shopLogo), 0o644); err != nil {
		t.Fatal(err)
	}
	const color = "#0a7c42"
	accent, err := brand.NewAccent(color)
	if err != nil {
		t.Fatal(err)
	}
	s := launch(t, pagesConfig(t, "brand", fmt.Sprintf("  brand: \"Sneaker Shop\"\n  logo_file: %q\n  accent_color: %q", logo, color)))
	// Half the line ahead of the browsers is served, so their progress bars have a fill to look at.
	for range 12 {
		s.join(t, "line", nil)
	}
	s.adminPost(t, "/api/queue/increment_serving_position", url.Values{"queue_id": {"line"}, "increment_by": {"6"}})
	shots := t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		shots, _ = filepath.Abs("../docs/screenshots")
	}
	before := s.originHits.Load()
	runScenario(t, node, s, "branding", "SERVER_LANGS="+strings.Join(templates.Languages, ","), "SCREENSHOT_DIR="+shots, "ACCENT="+rgb(accent.Light), "ACCENT_FG="+rgb(accent.LightText),
		"ACCENT_DARK="+rgb(accent.Dark), "ACCENT_DARK_FG="+rgb(accent.DarkText))
	if n := s.originHits.Load() - before; n != 0 {
		t.Fatalf("browsers waiting on the branded page made %d requests to the shop", n)
	}
}

// rgb is a colour as getComputedStyle writes it.
func rgb(c brand.RGB) string { return fmt.Sprintf("rgb(%d, %d, %d)", c.R, c.G, c.B) }

// shopLogo is the demo shop's logo: a mark and the name, sized by its viewBox, its name light in
// dark mode (an SVG in an <img> follows the page's colour scheme).
const shopLogo = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 236 40">
<style>text { font: 700 23px system-ui, sans-serif; fill: #14301f; } @media (prefers-color-scheme: dark) { text { fill: #e8f3ec; } }</style>
<rect x="2" y="4" width="32" height="32" rx="8" fill="#0a7c42"/>
<path d="M9 26 L18 14 L22 20 L27 16 L27 26 Z" fill="#ffffff"/>
<text x="44" y="28">Sneaker Shop</text>
</svg>`
