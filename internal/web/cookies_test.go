package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestSafeReturn(t *testing.T) {
	cases := map[string]string{
		"/p/item?a=1":                   "/p/item?a=1",
		"/":                             "/",
		"":                              "/",
		"//evil.example":                "/",
		"/\\evil.example":               "/",
		"https://evil.example/":         "/",
		"javascript:alert(1)":           "/",
		"evil.example":                  "/",
		"/ok/../../x":                   "/ok/../../x",
		"/a\nb":                         "/",
		"/a\\b":                         "/",
		"/%2F%2Fevil.example":           "/%2F%2Fevil.example",
		"/" + strings.Repeat("a", 3000): "/",
	}
	for in, want := range cases {
		if got := SafeReturn(in); got != want {
			t.Errorf("SafeReturn(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSafeReturn(f *testing.F) {
	for _, s := range []string{"/", "//x", "/\\x", "https://x", "/a?b#c", "\t//x", "/%09/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := SafeReturn(in)
		u, err := url.Parse(out)
		if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(out, "/") ||
			strings.HasPrefix(out, "//") || strings.ContainsAny(out, "\\\t\r\n") {
			t.Fatalf("SafeReturn(%q) = %q leads off-site", in, out)
		}
		// Resolved against a page of the site, it stays on the site.
		base, _ := url.Parse("https://shop.example/_edgeq/wait/q")
		if got := base.ResolveReference(u); got.Host != "shop.example" {
			t.Fatalf("SafeReturn(%q) = %q resolves to host %q", in, out, got.Host)
		}
	})
}

func TestCookieValue(t *testing.T) {
	h := http.Header{"Cookie": {"a=1; edgeq_tk_drop=abc.def; b=2", "edgeq_tk_other=zzz"}}
	if v, ok := CookieValue(h, "edgeq_tk_drop"); !ok || v != "abc.def" {
		t.Fatalf("%q %v", v, ok)
	}
	if v, ok := CookieValue(h, "edgeq_tk_other"); !ok || v != "zzz" {
		t.Fatalf("second line: %q %v", v, ok)
	}
	for _, name := range []string{"edgeq_tk", "edgeq_tk_dro", "c"} {
		if _, ok := CookieValue(h, name); ok {
			t.Errorf("%s found", name)
		}
	}
}
