package proxy

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/edgeq/edgeq/internal/web"
)

// CorrelationHeader carries the id that ties a request's log lines on edgeq and the origin together.
const CorrelationHeader = web.CorrelationHeader

// edgeqHeaderPrefix starts the headers edgeq sends the origin; a client must never be able to send one.
const edgeqHeaderPrefix = "Edgeq-"

// edgeqCookiePrefix starts edgeq's own cookies, which the origin never sees.
const edgeqCookiePrefix = "edgeq_"

// tokenHeader carries edgeq's access token: an app sends it in this header (beside the shop's own
// Authorization, which then reaches the shop untouched), and edgeq hands issued and renewed tokens
// over in it (waitroom.HeaderToken).
const tokenHeader = "Edgeq-Token"

// maxTokenBytes bounds an Edgeq-Token request header worth reading: edgeq's tokens are a few hundred
// bytes, and token.Verifier refuses anything longer.
const maxTokenBytes = 4096

// allowClientHeader lets a shop's scripts on other origins use name, a header edgeq reads and writes
// for clients (Edgeq-Token, Edgeq-Visitor), under the shop's own CORS policy, which cannot know the
// header: the shop never sees it. It changes only answers the shop allowed for another origin (they
// carry Access-Control-Allow-Origin); edgeq never widens a refusal.
//   - Access-Control-Expose-Headers gets name, so the script can read a token edgeq issued or renewed
//     (a visitor id it gave out). It is appended to a "*" too: the wildcard does not cover requests
//     with credentials (cookies), for which "*" is just a header's name, and for the others
//     "*, Edgeq-Token" means what "*" does.
//   - The answer to a preflight (OPTIONS with Access-Control-Request-Method) that asks for name in
//     Access-Control-Request-Headers gets name in Access-Control-Allow-Headers, appended as above, or
//     as the header's only value when the shop sent none (it allowed the origin, and knows nothing of
//     edgeq's header).
//
// A name already listed (in any letter case, in any of the header's lines) is not added again.
func allowClientHeader(resp *http.Response, name string) {
	if len(resp.Header.Values("Access-Control-Allow-Origin")) == 0 {
		return
	}
	appendToList(resp.Header, "Access-Control-Expose-Headers", name)
	req := resp.Request
	if req != nil && req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != "" &&
		listed(req.Header.Values("Access-Control-Request-Headers"), name) {
		appendToList(resp.Header, "Access-Control-Allow-Headers", name)
	}
}

// appendToList adds name to the comma-separated list in header key unless it is listed there: to
// the last line of the header, or as a line of its own when there is none.
func appendToList(h http.Header, key, name string) {
	values := h.Values(key)
	switch {
	case listed(values, name):
	case len(values) == 0 || strings.TrimSpace(values[len(values)-1]) == "":
		h.Set(key, name)
	default:
		kept := slices.Clone(values) // the map's own slice may be shared
		kept[len(kept)-1] += ", " + name
		h[http.CanonicalHeaderKey(key)] = kept
	}
}

// listed reports whether a comma-separated list, over header lines, names name in any letter case.
func listed(values []string, name string) bool {
	for _, line := range values {
		for item := range strings.SplitSeq(line, ",") {
			if strings.EqualFold(strings.TrimSpace(item), name) {
				return true
			}
		}
	}
	return false
}

// stripClientHeaders removes, as a request arrives, the headers a client must not be able to send
// the origin, whatever the spelling. Servers that hand headers to the application as CGI-style
// variables (Puma and Rack, Gunicorn and WSGI, PHP-FPM and CGI) turn "Edgeq_Admission_Id" and
// "EDGEQ-ADMISSION-ID" alike into HTTP_EDGEQ_ADMISSION_ID, so names are compared without regard to
// letter case and with "_" and "-" alike. It removes:
//   - every edgeq header (a name starting with "edgeq" and a separator): only edgeq tells the origin
//     about queues, requests and admissions; the gates set their own after this;
//   - rewriteHeaders, always: frameworks take the method or the path from them, so a request the
//     gate saw as one thing would reach the shop's handler as another;
//   - from a peer not in server.trusted_proxies, addressHeaders: such a client's word for its own
//     address, scheme, host or port, which shops and their frameworks believe because edgeq is the
//     proxy they trust. A trusted proxy's are kept, as its X-Forwarded-For is.
//
// It walks the header map once and allocates nothing: it runs on every request. Most names are
// passed over on their first letter.
func stripClientHeaders(h http.Header, peerTrusted bool) {
	for name := range h {
		if name == "" || !listedFirst[name[0]|0x20] { // | 0x20: lower case for letters, never a letter otherwise
			continue
		}
		if isEdgeqHeader(name) || nameIn(name, rewriteHeaders) || !peerTrusted && nameIn(name, addressHeaders) {
			delete(h, name)
		}
	}
}

// listedFirst marks the first letters (lower case) of the names stripClientHeaders removes.
var listedFirst = func() (first [256]bool) {
	first['e'] = true // edgeq
	for _, name := range append(append([]string(nil), rewriteHeaders...), addressHeaders...) {
		first[name[0]] = true
	}
	return first
}()

// rewriteHeaders make frameworks route a request by another method or path than its own: Symfony,
// Laravel, Rails (Rack::MethodOverride), Express method-override and ASP.NET Core's
// HttpMethodOverride take the method of a POST from X-HTTP-Method-Override; OData and SharePoint use
// X-HTTP-Method; X-Method-Override is the same in other middleware; IIS URL Rewrite, and Symfony and
// Zend Framework before CVE-2018-14773, take the path from X-Original-URL or X-Rewrite-URL.
// Lower case, with "-".
var rewriteHeaders = []string{
	"x-http-method-override", "x-http-method", "x-method-override", "x-original-url", "x-rewrite-url",
}

// addressHeaders name the client, or the URL it used, as a proxy in front saw it (RFC 7239's
// Forwarded, the X-Forwarded-* family and the client-IP headers of CDNs and load balancers).
// X-Forwarded-For, -Host and -Proto are also rebuilt by the proxy for the origin (rewrite); their
// other spellings only ever come from the client. Lower case, with "-".
var addressHeaders = []string{
	"forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port",
	"x-forwarded-prefix", "x-forwarded-server", "x-forwarded-ssl", "x-forwarded-scheme", "x-url-scheme",
	"front-end-https", "x-real-ip", "true-client-ip", "cf-connecting-ip", "x-client-ip",
	"x-cluster-client-ip", "fastly-client-ip", "x-original-forwarded-for",
}

// isEdgeqHeader reports whether name starts with "edgeq" in any case and then a separator ("-", "_",
// any character that is not a letter or digit).
func isEdgeqHeader(name string) bool {
	const edgeq = "edgeq"
	if len(name) <= len(edgeq) || !strings.EqualFold(name[:len(edgeq)], edgeq) {
		return false
	}
	c := name[len(edgeq)]
	return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9')
}

// nameIn reports whether name is one of names (lower case, with "-") as a CGI-style server sees it:
// in any letter case and with "_" for "-".
func nameIn(name string, names []string) bool {
	for _, want := range names {
		if len(name) == len(want) && sameCGIName(name, want) {
			return true
		}
	}
	return false
}

func sameCGIName(name, want string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '_':
			c = '-'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}

// stripEdgeqCookies removes edgeq's cookies (edgeq_*) from the Cookie headers of a request bound for the
// origin, leaving every other cookie exactly as the client sent it. It allocates only for a line that
// mixes edgeq's cookies with others (a gated visitor's Cookie line often holds the token alone).
func stripEdgeqCookies(h http.Header) {
	values := h["Cookie"]
	i := slices.IndexFunc(values, hasEdgeqCookie)
	if i < 0 {
		return
	}
	var kept []string // a new slice: the header's own may be shared with the incoming request
	kept = append(kept, values[:i]...)
	for _, line := range values[i:] {
		if !hasEdgeqCookie(line) {
			kept = append(kept, line)
		} else if rest := withoutEdgeqCookies(line); rest != "" {
			kept = append(kept, rest)
		}
	}
	if len(kept) == 0 {
		delete(h, "Cookie")
		return
	}
	h["Cookie"] = kept
}

// isEdgeqCookie says whether part of a Cookie line (between semicolons) names one of edgeq's cookies.
func isEdgeqCookie(part string) bool {
	name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
	return strings.HasPrefix(name, edgeqCookiePrefix)
}

func hasEdgeqCookie(line string) bool {
	for {
		part, rest, more := strings.Cut(line, ";")
		if isEdgeqCookie(part) {
			return true
		}
		if !more {
			return false
		}
		line = rest
	}
}

// withoutEdgeqCookies is line with the parts naming edgeq's cookies left out, the others joined by ";"
// as they were, and only what HTTP calls whitespace trimmed at the ends: trimming more (a form feed,
// say) could turn a cookie the origin would have ignored into one it reads.
func withoutEdgeqCookies(line string) string {
	var b strings.Builder
	first := true
	for {
		part, rest, more := strings.Cut(line, ";")
		if !isEdgeqCookie(part) {
			if !first {
				b.WriteByte(';')
			}
			b.WriteString(part)
			first = false
		}
		if !more {
			return strings.Trim(b.String(), " \t")
		}
		line = rest
	}
}

// withHop returns a forwarding chain with hop appended: the chain so far only when it came from a
// trusted peer, else hop alone.
func withHop(trusted bool, prior []string, hop string) string {
	if !trusted || len(prior) == 0 {
		return hop
	}
	return strings.Join(prior, ", ") + ", " + hop
}

// forwardedNode writes an address as a Forwarded "for" value: IPv6 in brackets and quotes (RFC 7239
// section 6).
func forwardedNode(a netip.Addr) string {
	if a.Is6() {
		return `"[` + a.String() + `]"`
	}
	return a.String()
}

// trustedSet is the parsed server.trusted_proxies.
type trustedSet []netip.Prefix

func (t trustedSet) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddress returns the visitor's IP: the TCP peer, unless the peer is a trusted proxy, in which case
// X-Forwarded-For is walked from the right past trusted proxies to the first address that is not one.
// An unparsable entry stops the walk: everything left of it is client-controlled. peerTrusted reports
// whether the peer's forwarding headers are believed at all.
func (t trustedSet) clientAddress(remoteAddr string, forwardedFor []string) (client netip.Addr, peerTrusted bool) {
	peer := parsePeer(remoteAddr)
	if !peer.IsValid() || !t.contains(peer) {
		return peer, false
	}
	client = peer
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		entries := strings.Split(forwardedFor[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			a, err := parseHop(entries[j])
			if err != nil {
				return client, true
			}
			client = a.Unmap()
			if !t.contains(client) {
				return client, true
			}
		}
	}
	return client, true
}

// parseHop reads one X-Forwarded-For entry: an address, bracketed or not, with or without a port
// (load balancers such as Azure's and some ingress controllers write "203.0.113.7:5123" and
// "[2001:db8::7]:443").
func parseHop(entry string) (netip.Addr, error) {
	entry = strings.TrimSpace(entry)
	if ap, err := netip.ParseAddrPort(entry); err == nil {
		return ap.Addr(), nil
	}
	if len(entry) > 2 && entry[0] == '[' && entry[len(entry)-1] == ']' {
		entry = entry[1 : len(entry)-1]
	}
	return netip.ParseAddr(entry)
}

func parsePeer(remoteAddr string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remoteAddr)
	return a.Unmap()
}

// isHTTPS reports whether the visitor's connection is HTTPS: a TLS connection to edgeq, or a trusted
// proxy saying so in X-Forwarded-Proto (its last value: the one the nearest proxy wrote).
func isHTTPS(r *http.Request, peerTrusted bool) bool {
	if r.TLS != nil {
		return true
	}
	if !peerTrusted {
		return false
	}
	values := r.Header.Values("X-Forwarded-Proto")
	if len(values) == 0 {
		return false
	}
	parts := strings.Split(values[len(values)-1], ",")
	return strings.EqualFold(strings.TrimSpace(parts[len(parts)-1]), "https")
}
