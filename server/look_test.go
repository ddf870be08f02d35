package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// An SVG logo that would run script if it were ever a document of its own.
const scriptedLogo = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 160 40"><script>alert(1)</script><rect width="160" height="40" fill="#0a7c42"/></svg>`

func fetchPage(t *testing.T, url, lang string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Accept-Language", lang)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// With pages.logo_file and pages.accent_color, edgeq serves both itself (content-hashed names, a year
// of cache, the SVG kept inert) and every page in every language shows them; the shop is never asked.
func TestLook_LogoAndAccentServedByEdgeq(t *testing.T) {
	var originHits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { originHits.Add(1) }))
	t.Cleanup(origin.Close)
	logo := filepath.Join(t.TempDir(), "shop-logo.svg")
	os.WriteFile(logo, []byte(scriptedLogo), 0o644)
	in := start(t, configText(origin.URL, routeA)+fmt.Sprintf(`queues:
  - { id: drop, capacity: 0 }
pages:
  brand: "Sneaker Shop"
  logo_file: %q
  accent_color: "#0a7c42"
`, logo))

	logoTag := regexp.MustCompile(`<img class="logo" src="(/_edgeq/static/logo\.[0-9a-f]{10}\.svg)" alt="Sneaker Shop">`)
	sheet := regexp.MustCompile(`<link rel="stylesheet" href="/_edgeq/static/edgeq\.[0-9a-f]{10}\.css">\s*<link rel="stylesheet" href="(/_edgeq/static/accent\.[0-9a-f]{10}\.css)">`)
	var logoURL, sheetURL string
	for _, lang := range []string{"en", "ar"} {
		for _, path := range []string{"/_edgeq/wait/drop?return=%2F", "/_edgeq/wait/nowhere", "/_edgeq/challenge?return=%2F"} {
			resp, body := fetchPage(t, in.public+path, lang)
			l, s := logoTag.FindStringSubmatch(body), sheet.FindStringSubmatch(body)
			if l == nil || s == nil {
				t.Fatalf("%s %s (%d): no logo or accent stylesheet:\n%s", lang, path, resp.StatusCode, body)
			}
			if strings.Contains(body, "<span>Sneaker Shop</span>") {
				t.Errorf("%s %s: the brand text is shown beside the logo", lang, path)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") {
				t.Errorf("%s %s: the page needs inline styles: %s", lang, path, csp)
			}
			logoURL, sheetURL = l[1], s[1]
		}
	}

	resp, err := http.Get(in.public + logoURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 200 || string(body) != scriptedLogo || h.Get("Content-Type") != "image/svg+xml" ||
		h.Get("Content-Security-Policy") != "default-src 'none'; style-src 'unsafe-inline'" || h.Get("X-Content-Type-Options") != "nosniff" ||
		h.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("logo: %d %v", resp.StatusCode, h)
	}
	resp, err = http.Get(in.public + sheetURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), ":root { --accent: #0a7c42; --accent-fg: #ffffff; }") ||
		!strings.Contains(string(body), "prefers-color-scheme: dark") || resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("accent stylesheet: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	if n := originHits.Load(); n != 0 {
		t.Fatalf("the shop was asked %d times", n)
	}

	// Pages keys are read at start: a reload with another colour keeps the running one (and says so).
	in.rewrite(t, configText(origin.URL, routeA)+fmt.Sprintf(`queues:
  - { id: drop, capacity: 0 }
pages:
  brand: "Sneaker Shop"
  logo_file: %q
  accent_color: "#8b1a1a"
`, logo))
	eventually(t, "reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == 1 })
	if logs := in.logs.String(); !strings.Contains(logs, "pages.accent_color") || !strings.Contains(logs, "only take effect after a restart") {
		t.Fatalf("the ignored colour is not reported:\n%s", logs)
	}
	if _, body := fetchPage(t, in.public+"/_edgeq/wait/drop?return=%2F", "en"); !strings.Contains(body, sheetURL) {
		t.Fatalf("the accent changed without a restart:\n%s", body)
	}
}

// A colour that fails the contrast check, or a logo that is not an image, stops check and start-up
// with the field named.
func TestLook_BadLogoOrColourIsRefused(t *testing.T) {
	dir := t.TempDir()
	notImage := filepath.Join(dir, "logo.png")
	os.WriteFile(notImage, []byte("<html>not a logo</html>"), 0o644)
	cases := []struct{ pages, field, reason string }{
		{`{accent_color: "#ffcc00"}`, "pages.accent_color", "contrast of 1.39:1"},
		{`{accent_color: "#0a7c42;background:url(x)"}`, "pages.accent_color", "not a CSS hex colour"},
		{fmt.Sprintf(`{logo_file: %q}`, notImage), "pages.logo_file", "not a PNG, SVG or WebP image"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, "edgeq.yaml")
		os.WriteFile(path, []byte("pages: "+c.pages+"\n"), 0o644)
		problems, _, err := Check(path)
		if err != nil || len(problems) != 1 || problems[0].Path != c.field || !strings.Contains(problems[0].Reason, c.reason) {
			t.Errorf("%s: check said %v %v", c.pages, problems, err)
		}
		var startup *StartupError
		if err := Run(context.Background(), Options{ConfigPath: path, LogOutput: io.Discard}); !errors.As(err, &startup) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: start-up: %v", c.pages, err)
		}
	}
}
