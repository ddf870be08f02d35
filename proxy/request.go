package proxy

import (
	"errors"
	"fmt"
	"net/http"
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

// checkHost refuses a Host header that is not a host name or an IP literal with an optional port
// (web.ValidHost), and an empty Host while any route is scoped to a host. Matching a host-scoped route
// ("POST shop.example/checkout/{p}") works on the canonical host, but a Host that only an origin's
// leniency makes the same site ("shop.example..", "[shop.example]", "shop.example:80:") would match
// no host and pass through ungated. An empty Host (HTTP/1.0 without one, or "Host:" with no value)
// matches no host either; it stays allowed without host-scoped routes because old health checkers
// still send HTTP/1.0 requests without a Host. No allocation for a valid Host.
func checkHost(host string, hostRoutes bool) *web.Error {
	switch {
	case host == "" && hostRoutes:
		return web.ErrInvalidHost.Because(errors.New("no Host, and a route is scoped to a host"))
	case host != "" && !web.ValidHost(host):
		return web.ErrInvalidHost.Because(fmt.Errorf("the Host header %q", web.ClipLog(host)))
	}
	return nil
}
