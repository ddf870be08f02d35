package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/web"
)

// checkRequest refuses what edgeq cannot route the way an origin would: a method that is not made of
// letters (the others are upper-cased in place) and a Host that is not a host (checkHost).
func checkRequest(r *http.Request, t *Table) *web.Error {
	if e := canonicalizeMethod(r); e != nil {
		return e
	}
	return checkHost(r.Host, t.hostRoutes)
}

// errMethod refuses a method that is not made of ASCII letters (docs/reference.md "Routing").
var errMethod = web.ErrInvalidRequest.With("field", "method").
	With("problems", "a request method is made of ASCII letters only")

// canonicalizeMethod upper-cases r.Method when it is made of ASCII letters, and refuses any other
// method, before anything routes on it. Flask/Werkzeug, Django, Symfony and Laravel upper-case the
// method before routing, so "post /checkout/1" is a checkout to them; matched as written, it would
// match no "POST /checkout/{product}" route and pass through ungated. Browsers send lower-case
// methods too: fetch upper-cases only DELETE, GET, HEAD, OPTIONS, POST and PUT, so
// fetch(url, {method: "patch"}) arrives as "patch". Methods with digits, "-", "_" or other token
// characters are refused rather than guessed at: no shop needs them, and origins disagree on them.
//
// r.Method is changed in place, not on a copy: net/http's server reads it again to decide whether
// the answer has a body (HEAD), and that must agree with what edgeq and the origin did. The common
// case, already upper-case, is one pass over a few bytes and no allocation.
func canonicalizeMethod(r *http.Request) *web.Error {
	m := r.Method
	if m == "" {
		return errMethod.Because(errors.New("empty method"))
	}
	lower := false
	for i := 0; i < len(m); i++ {
		switch c := m[i]; {
		case 'A' <= c && c <= 'Z':
		case 'a' <= c && c <= 'z':
			lower = true
		default:
			return errMethod.Because(fmt.Errorf("method %q", web.ClipLog(m)))
		}
	}
	if lower {
		r.Method = strings.ToUpper(m)
	}
	return nil
}

// bodyDeadline bounds the time a visitor may take to send its body: reads of the connection fail
// after start+timeout, so a client that trickles a body (a byte every few seconds) cannot hold a
// request to the origin, or an admission step's read, open for longer. The transport's read then
// fails, the origin sees the body break off, the visitor gets 400 (web.BodyWatch, or the step's own
// refusal) and net/http closes the connection rather than read what is left of the body as a next
// request.
//
// It bounds the body only, never the answer: when the body has been read to its end, net/http starts
// watching the connection for a client that leaves and clears the read deadline as it does
// (connReader.startBackgroundRead), so a slow answer to a fast upload is not cut
// (TestBodyTimeout_ASlowAnswerToAFastBodyIsNotCut pins this). If the handler returns before the end
// of the body, the server's discard of the rest is bounded by it too; the next request on the
// connection gets its own deadlines from the server.
func bodyDeadline(w http.ResponseWriter, r *http.Request, start time.Time, timeout time.Duration) {
	if timeout > 0 && r.Body != nil && r.Body != http.NoBody {
		// An error means a writer without deadlines (tests' recorders): nothing to bound.
		_ = http.NewResponseController(w).SetReadDeadline(start.Add(timeout))
	}
}

// errHost refuses a Host header edgeq cannot match routes by.
var errHost = web.ErrInvalidRequest.With("field", "host").
	With("problems", "the Host header must be a host name (letters, digits, hyphens, dots) or an IP address, with an optional port")

// checkHost refuses a Host header that is not a host name or an IP literal with an optional port
// (validHost), and an empty Host while any route is scoped to a host. Matching a host-scoped route
// ("POST shop.example/checkout/{p}") works on the canonical host, but a Host that only an origin's
// leniency makes the same site ("shop.example..", "[shop.example]", "shop.example:80:") would match
// no host and pass through ungated. An empty Host (HTTP/1.0 without one, or "Host:" with no value)
// matches no host either; it stays allowed without host-scoped routes because old health checkers
// still send HTTP/1.0 requests without a Host. No allocation for a valid Host.
func checkHost(host string, hostRoutes bool) *web.Error {
	switch {
	case host == "" && hostRoutes:
		return errHost.Because(errors.New("no Host, and a route is scoped to a host"))
	case host != "" && !validHost(host):
		return errHost.Because(fmt.Errorf("the Host header %q", web.ClipLog(host)))
	}
	return nil
}

// validHost reports whether host is a host name or an IP literal, then optionally ":" and at most
// five digits. A name is labels of letters, digits and hyphens, 1-63 bytes each, joined by dots, at
// most 253 bytes, with one trailing dot allowed (RFC 1123 section 2.1; an IPv4 address is such a
// name); an IP literal is an IPv6 address without a zone in brackets (RFC 3986 section 3.2.2).
func validHost(host string) bool {
	name, port := web.SplitHost(host)
	if strings.HasPrefix(name, "[") {
		if len(name) < 2 || name[len(name)-1] != ']' {
			return false // no "]"
		}
		a, err := netip.ParseAddr(name[1 : len(name)-1])
		return err == nil && a.Is6() && a.Zone() == "" && validHostPort(port)
	}
	return validHostName(name) && validHostPort(port)
}

// validHostPort reports whether port is "" or ":" and at most five digits.
func validHostPort(port string) bool { return len(port) <= len(":65535") && validPort(port) }

// validHostName reports whether name is a host name: see validHost.
func validHostName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
			if label++; label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}
