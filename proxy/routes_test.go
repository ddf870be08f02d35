package proxy

import "testing"

func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"shop.example":      "shop.example",
		"shop.example:8080": "shop.example:8080",
		"SHOP.Example":      "shop.example",
		"shop.example.":     "shop.example",
		"Shop.Example.:443": "shop.example:443",
		"shop.example..":    "shop.example.", // not a spelling of shop.example (and refused as a Host: web.ValidHost)
		"[::1]:8080":        "[::1]:8080",
		"[FE80::1]":         "[fe80::1]",
		"[FE80::1]:80":      "[fe80::1]:80",
		"":                  "",
		"127.0.0.1:3000":    "127.0.0.1:3000",
		"shop.example:":     "shop.example:",
		// Ports ServeMux could not split: nginx reads the name before the first colon. (checkHost
		// refuses such a Host before routing; canonicalPattern may still meet them.)
		"shop.example:80:":   "shop.example",
		"Shop.Example:80:90": "shop.example",
		"shop.example:abc":   "shop.example",
		"[FE80::1]x":         "[fe80::1]",
	} {
		if got := canonicalHost(in); got != want {
			t.Errorf("canonicalHost(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { canonicalHost("shop.example:8080") }); n != 0 {
		t.Errorf("a canonical host costs %v allocations", n)
	}
}

func TestCanonicalPattern(t *testing.T) {
	for in, want := range map[string]string{
		"GET Shop.Example./up":        "GET shop.example/up",
		"  POST\tSHOP.example/c/{p} ": "POST\tshop.example/c/{p}",
		"shop.example/x":              "shop.example/x",
		"GET /checkout/{product}":     "GET /checkout/{product}",
		"/":                           "/",
		"GET shop.example:8080/x":     "GET shop.example:8080/x",
		"post /checkout/{p}":          "POST /checkout/{p}",
		"Patch\tShop.Example/c":       "PATCH\tshop.example/c",
	} {
		if got := canonicalPattern(in); got != want {
			t.Errorf("canonicalPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoggedPath_HidesRequestIDs(t *testing.T) {
	p := &Proxy{prefix: "/_edgeq"}
	for in, want := range map[string]string{
		"/_edgeq/status/drop/0190-secret":      "/_edgeq/status/drop/{request_id}",
		"/_edgeq/queue_pos/drop/0190-secret":   "/_edgeq/queue_pos/drop/{request_id}",
		"/_edgeq//status/drop/0190-secret":     "/_edgeq/status/drop/{request_id}",
		"/_edgeq/./queue_pos/drop/0190-secret": "/_edgeq/queue_pos/drop/{request_id}",
		"/_edgeq/status/drop":                  "/_edgeq/status/drop",
		"/_edgeq/serving_pos/drop":             "/_edgeq/serving_pos/drop",
		"/products/status/x/y":                 "/products/status/x/y",
	} {
		if got := p.loggedPath(in); got != want {
			t.Errorf("loggedPath(%q) = %q, want %q", in, got, want)
		}
	}
}
