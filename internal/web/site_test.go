package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/vocab"
)

func TestCrossSite(t *testing.T) {
	cases := []struct {
		name         string
		host         string
		site, origin string
		cross        bool
	}{
		{"API client: neither header", "shop.example", "", "", false},
		{"fetch metadata: same-origin", "shop.example", "same-origin", "https://shop.example", false},
		{"fetch metadata: same-site", "shop.example", "same-site", "https://www.shop.example", false},
		{"fetch metadata: none (address bar)", "shop.example", "none", "", false},
		{"fetch metadata: cross-site", "shop.example", "cross-site", "https://evil.example", true},
		{"fetch metadata wins over a matching Origin", "shop.example", "cross-site", "https://shop.example", true},
		{"fetch metadata: a value no browser sends", "shop.example", "cross-origin", "", true},
		{"Origin: same host", "shop.example", "", "https://shop.example", false},
		{"Origin: same host, other case and trailing dot", "Shop.Example.", "", "https://shop.EXAMPLE", false},
		{"Origin: explicit default port", "shop.example:443", "", "https://shop.example", false},
		{"Origin: same explicit port", "shop.example:8080", "", "http://shop.example:8080", false},
		{"Origin: other port", "shop.example:8443", "", "https://shop.example", true},
		{"Origin: other port in the Origin", "shop.example", "", "https://shop.example:8443", true},
		{"Origin: other host", "shop.example", "", "https://evil.example", true},
		{"Origin: a subdomain is another host", "shop.example", "", "https://www.shop.example", true},
		{"Origin: suffix trick", "shop.example", "", "https://shop.example.evil.example", true},
		{"Origin: null (sandboxed frame)", "shop.example", "", "null", true},
		{"Origin: malformed", "shop.example", "", "shop.example", true},
		{"Origin: not http", "shop.example", "", "ftp://shop.example", true},
		{"Origin: with user info", "shop.example", "", "https://shop.example@evil.example", true},
		{"Origin: IPv6", "[2001:db8::1]:8080", "", "http://[2001:DB8::1]:8080", false},
		{"Origin: other IPv6", "[2001:db8::1]:8080", "", "http://[2001:db8::2]:8080", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &http.Request{Method: http.MethodPost, Host: c.host, Header: http.Header{}}
			if c.site != "" {
				r.Header.Set("Sec-Fetch-Site", c.site)
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if got := CrossSite(r); got != c.cross {
				t.Fatalf("CrossSite = %v, want %v", got, c.cross)
			}
		})
	}
}

// FuzzCrossSite: reading Origin and Host never panics, and an Origin is taken for the request's own
// site only when it names the same host name as the Host header.
func FuzzCrossSite(f *testing.F) {
	f.Add("shop.example", "https://shop.example")
	f.Add("shop.example:8080", "http://shop.example:8080")
	f.Add("[::1]:80", "http://[::1]")
	f.Add("shop.example", "null")
	f.Add("[", "http://[")
	f.Add("a:b:c", "https://a:b:c")
	f.Fuzz(func(t *testing.T, host, origin string) {
		r := &http.Request{Method: http.MethodPost, Host: host, Header: http.Header{"Origin": {origin}}}
		if origin == "" || CrossSite(r) {
			return
		}
		u, err := url.Parse(origin)
		if err != nil {
			t.Fatalf("Origin %q does not parse, yet counts as Host %q's own site", origin, host)
		}
		if vocab.HostName(u.Host) != vocab.HostName(host) || vocab.HostName(host) == "" || strings.ContainsAny(vocab.HostName(host), "/@") {
			t.Fatalf("Origin %q counts as Host %q's own site", origin, host)
		}
	})
}
