package proxy

import "testing"

func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"shop.example":      "shop.example",
		"shop.example:8080": "shop.example:8080",
		"SHOP.Example":      "shop.example",
		"shop.example.":     "shop.example",
		"Shop.Example.:443": "shop.example:443",
		"shop.example..":    "shop.example.", // not a spelling of shop.example: still refused by the pattern
		"[::1]:8080":        "[::1]:8080",
		"[FE80::1]":         "[fe80::1]",
		"[FE80::1]:80":      "[fe80::1]:80",
		"":                  "",
		"127.0.0.1:3000":    "127.0.0.1:3000",
	} {
		if got := canonicalHost(in); got != want {
			t.Errorf("canonicalHost(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { canonicalHost("shop.example:8080") }); n != 0 {
		t.Errorf("a canonical host costs %v allocations", n)
	}
}
