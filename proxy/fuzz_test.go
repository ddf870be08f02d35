package proxy

import (
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/web"
)

// FuzzClientAddress: whatever X-Forwarded-For says, an untrusted peer is the client; a trusted peer's
// chain can only name an address that appears in it (or the peer itself), and the walk never ends on
// a trusted address while an untrusted one stands to its right.
func FuzzClientAddress(f *testing.F) {
	f.Add("198.51.100.7:1234", "1.2.3.4")
	f.Add("10.0.0.2:1234", "6.6.6.6, 203.0.113.5, 10.1.1.1")
	f.Add("10.0.0.2:1", "6.6.6.6, not-an-ip, 10.1.1.1")
	f.Add("[2001:db8::1]:443", "[2001:db8::2], 2001:db9::5")
	f.Add("[::ffff:10.0.0.2]:1", "::ffff:203.0.113.5")
	f.Add("garbage", ",,,")
	trusted := trustedSet{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		client, peerTrusted := trusted.clientAddress(remote, []string{xff})
		peer := parsePeer(remote)
		if peerTrusted != (peer.IsValid() && trusted.contains(peer)) {
			t.Fatalf("peer %q trusted=%v", remote, peerTrusted)
		}
		if !peerTrusted {
			if client != peer {
				t.Fatalf("untrusted peer %q: client %s taken from X-Forwarded-For %q", remote, client, xff)
			}
			return
		}
		if client == peer {
			return
		}
		found := false
		for entry := range strings.SplitSeq(xff, ",") {
			if a, err := netip.ParseAddr(strings.Trim(strings.TrimSpace(entry), "[]")); err == nil && a.Unmap() == client {
				found = true
			}
		}
		if !found {
			t.Fatalf("client %s is not in X-Forwarded-For %q", client, xff)
		}
	})
}

// FuzzStripEdgeqCookies: after stripping, net/http's parser sees no edgeq_* cookie in what the origin
// receives, and every other cookie it saw before is still there with the same value, in order.
func FuzzStripEdgeqCookies(f *testing.F) {
	f.Add("a=1; edgeq_tk_drop=abc; b=2", "edgeq_rq_drop=x")
	f.Add("edgeq_tk_drop=abc", "")
	f.Add(" edgeq_x=1 ;; c=3", "Edgeq_tk=upper; d=4")
	f.Add(`q="v;w"; edgeq_a=1`, "=;=")
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		h := http.Header{"Cookie": {line1, line2}}
		before := (&http.Request{Header: h.Clone()}).Cookies()
		stripEdgeqCookies(h)
		// Byte for byte what the first implementation (split, filter, join) sent the origin.
		if want := stripEdgeqCookiesSplitJoin([]string{line1, line2}); !slices.Equal(h["Cookie"], want) {
			t.Fatalf("Cookie lines %q, want %q (lines %q, %q)", h["Cookie"], want, line1, line2)
		}
		after := (&http.Request{Header: h}).Cookies()
		var want []string
		for _, c := range before {
			if !strings.HasPrefix(c.Name, edgeqCookiePrefix) {
				want = append(want, c.Name+"="+c.Value)
			}
		}
		var got []string
		for _, c := range after {
			if strings.HasPrefix(c.Name, edgeqCookiePrefix) {
				t.Fatalf("cookie %s reached the origin (%q, %q)", c.Name, line1, line2)
			}
			got = append(got, c.Name+"="+c.Value)
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("other cookies changed: %q -> %q (lines %q, %q)", want, got, line1, line2)
		}
	})
}

// FuzzStripEdgeqHeaders: whatever header names a client sends, none that a CGI-style server (Puma,
// Gunicorn, PHP-FPM: upper case, "-" as "_") would read as an edgeq header, a method override or a URL
// rewrite survives stripClientHeaders, nor, from an untrusted peer, one naming the client's address;
// every other header is untouched.
func FuzzStripEdgeqHeaders(f *testing.F) {
	f.Add("Edgeq-Request-Id", "X-Other")
	f.Add("edgeq-admission-id", "EDGEQ-")
	f.Add("Edgeq", "Edgeqx-A")
	f.Add("Edgeq_Admission_Id", "eDgEq_")
	f.Add("X_HTTP_Method_Override", "x-original-url")
	f.Add("X-Real-Ip", "Cf_Connecting_IP")
	f.Add("Forwarded", "X-Forwarded-Fo")
	f.Add("Edgeq.Queue", "Edgeq9-X")
	// The CGI variables (without HTTP_) of the headers a client must not send, spelled out here
	// rather than derived from the lists under test.
	always := []string{"X_HTTP_METHOD_OVERRIDE", "X_HTTP_METHOD", "X_METHOD_OVERRIDE", "X_ORIGINAL_URL", "X_REWRITE_URL"}
	untrusted := []string{"FORWARDED", "X_FORWARDED_FOR", "X_FORWARDED_HOST", "X_FORWARDED_PROTO",
		"X_FORWARDED_PORT", "X_FORWARDED_PREFIX", "X_FORWARDED_SERVER", "X_FORWARDED_SSL", "X_FORWARDED_SCHEME",
		"X_URL_SCHEME", "FRONT_END_HTTPS", "X_REAL_IP", "TRUE_CLIENT_IP", "CF_CONNECTING_IP", "X_CLIENT_IP",
		"X_CLUSTER_CLIENT_IP", "FASTLY_CLIENT_IP", "X_ORIGINAL_FORWARDED_FOR"}
	cgi := func(name string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case 'a' <= r && r <= 'z':
				return r - 'a' + 'A'
			case r == '-':
				return '_'
			}
			return r
		}, name)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, trusted := range []bool{false, true} {
			h := http.Header{a: {"1"}, b: {"2"}, "Keep": {"3"}}
			stripClientHeaders(h, trusted)
			for _, name := range []string{a, b, "Keep"} {
				v := cgi(name)
				edgeq := len(v) > 5 && v[:5] == "EDGEQ" && !strings.ContainsAny(v[5:6], "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
				strip := edgeq || slices.Contains(always, v) || !trusted && slices.Contains(untrusted, v)
				if _, present := h[name]; present == strip {
					t.Fatalf("header %q (trusted peer %v): present=%v after stripping", name, trusted, present)
				}
			}
		}
	})
}

// FuzzCheckHost: web.ValidHost agrees with a reference written with regular expressions, and a Host it
// accepts is one net/url reads as the same host and port, whose canonical form (what routes match)
// is accepted too, in lower case, and canonical already.
func FuzzCheckHost(f *testing.F) {
	for _, seed := range []string{"shop.example", "SHOP.Example.:8080", "shop.example..", "[shop.example]",
		"shop.example:80:", "[2001:db8::1]:443", "[fe80::1%25eth0]", "[::ffff:1.2.3.4]", "192.0.2.1", "",
		"a-.b", "shop_example", strings.Repeat("a", 64), "x:", "[::1]x", ".", "a..", "::1"} {
		f.Add(seed)
	}
	label := `[A-Za-z0-9-]{1,63}`
	name := regexp.MustCompile(`^(?:` + label + `\.)*` + label + `\.?$`)
	bracketed := regexp.MustCompile(`^\[([^\]]*)\]$`)
	port := regexp.MustCompile(`^:[0-9]{0,5}$`)
	reference := func(host string) bool {
		hostPart, portPart := host, ""
		if i := strings.LastIndex(host, ":"); i >= 0 && !strings.Contains(host[i:], "]") {
			hostPart, portPart = host[:i], host[i:]
		}
		if portPart != "" && !port.MatchString(portPart) {
			return false
		}
		if m := bracketed.FindStringSubmatch(hostPart); m != nil {
			a, err := netip.ParseAddr(m[1])
			return err == nil && a.Is6() && a.Zone() == ""
		}
		return name.MatchString(hostPart) && len(strings.TrimSuffix(hostPart, ".")) <= 253
	}
	f.Fuzz(func(t *testing.T, host string) {
		valid := web.ValidHost(host)
		if host != "" && valid != reference(host) {
			t.Fatalf("web.ValidHost(%q) = %v, the reference says %v", host, valid, !valid)
		}
		if !valid {
			return
		}
		u, err := url.Parse("http://" + host + "/")
		if err != nil || u.Host != host {
			t.Fatalf("net/url cannot read the valid Host %q: %v", host, err)
		}
		canonical := canonicalHost(host)
		if !web.ValidHost(canonical) || canonical != strings.ToLower(canonical) || canonicalHost(canonical) != canonical {
			t.Fatalf("canonicalHost(%q) = %q: not a valid, lower-case, canonical Host", host, canonical)
		}
		if c, _ := url.Parse("http://" + canonical + "/"); !strings.EqualFold(strings.TrimSuffix(c.Hostname(), "."), strings.TrimSuffix(u.Hostname(), ".")) || c.Port() != u.Port() {
			t.Fatalf("canonicalHost(%q) = %q names another host or port", host, canonical)
		}
	})
}

// stripEdgeqCookiesSplitJoin is stripEdgeqCookies as first written (split each line on ";", drop
// edgeq's, join the rest): FuzzStripEdgeqCookies holds the allocation-free version to its output.
func stripEdgeqCookiesSplitJoin(values []string) []string {
	var kept []string
	for _, line := range values {
		var parts []string
		changed := false
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if strings.HasPrefix(name, edgeqCookiePrefix) {
				changed = true
				continue
			}
			parts = append(parts, part)
		}
		if !changed {
			kept = append(kept, line)
		} else if joined := strings.Trim(strings.Join(parts, ";"), " \t"); joined != "" {
			kept = append(kept, joined)
		}
	}
	return kept
}
