package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/edgeq/edgeq/internal/web"
)

// errMethod refuses a method that is not made of ASCII letters (CONTRACT section 10.1).
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
