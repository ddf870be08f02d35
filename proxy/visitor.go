package proxy

import (
	"net/http"

	"github.com/edgeq/edgeq/internal/visitor"
	"github.com/edgeq/edgeq/internal/web"
)

// visitorHeader carries an API client's visitor id, both ways (visitor.Header).
const visitorHeader = visitor.Header

// Visitors gives browsers and API clients their visitor ids (docs/reference.md "Visitor ids") while
// some route of the table identifies users by one (Table.visitors). Off, nothing is read and no cookie
// is set: a shop that does not use visitor ids keeps its answers as it sent them, cacheable ones
// included.
type Visitors struct {
	IDs     *visitor.IDs // signs and checks the ids
	Cookies web.Cookies  // sets their cookie (tokens.cookie_secure)
}

// identify sets info.VisitorID from the request's Edgeq-Visitor header (claimed: its values, read
// before client Edgeq-* headers are stripped) or its edgeq_vid cookie, the first that edgeq signed.
// It reports whether the request has one; a forged or tampered value counts as none, so the client
// gets a new id instead of an identity of its choosing.
func (v *Visitors) identify(h http.Header, claimed []string, info *web.Request) bool {
	if len(claimed) == 1 {
		if id, ok := v.IDs.Check(claimed[0]); ok {
			info.VisitorID = id
			return true
		}
	}
	if value, ok := web.CookieValue(h, visitor.Cookie); ok {
		if id, ok := v.IDs.Check(value); ok {
			info.VisitorID = id
			return true
		}
	}
	return false
}

// issue adds a new visitor id to an answer about to be written: the cookie, beside the shop's own
// Set-Cookie headers, and the Edgeq-Visitor header for clients that keep no cookies. The answer then
// carries a credential (no cache in front may keep it: it would give every visitor the same id).
func (v *Visitors) issue(h http.Header, info *web.Request) {
	_, signed := v.IDs.Mint()
	v.Cookies.Add(h, info, visitor.Cookie, signed, visitor.Life)
	h.Set(visitorHeader, signed)
}

// identifyVisitor reads the request's visitor id when the table's routes use them, and arranges for
// the answer to bring a new one when the request has none (recorder.final).
func (p *Proxy) identifyVisitor(rec *recorder, r *http.Request, claimed []string, t *Table) {
	if p.visitors == nil || !t.visitors {
		return
	}
	if !p.visitors.identify(r.Header, claimed, rec.info) {
		rec.visitors = p.visitors
	}
}

// allowVisitorHeader lets a shop's scripts on other origins read and send Edgeq-Visitor, as they may
// Edgeq-Token (allowClientHeader), while visitor ids are given out.
func (p *Proxy) allowVisitorHeader(resp *http.Response) {
	if p.visitors != nil && p.table.Load().visitors {
		allowClientHeader(resp, visitorHeader)
	}
}
