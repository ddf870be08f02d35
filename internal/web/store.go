package web

import "errors"

// errStoreFailed stands in for a missing cause.
var errStoreFailed = errors.New("store call failed")

// StorePolicy is what a request does when the store cannot be used, decided once by the proxy as
// the request arrives (store_health and the matched route's on_store_error) and carried on the
// request. Every step that needs the store (the queue, the Turnstile replay check, admission, the
// waiting-room endpoints) answers a failure through Request.StoreFailed, so "open" and "closed"
// mean the same everywhere (docs/reference.md, "Store outages").
type StorePolicy struct {
	// Degraded: the store counted as unavailable when the request arrived. Steps do not try it:
	// they go straight to StoreFailed(step, ErrDegraded).
	Degraded bool
	// Open: the matched route says on_store_error: open, so a step that cannot use the store lets
	// the request go on without its check. Requests that match no route (edgeq's own endpoints) are
	// always closed.
	Open bool
	// Bypassed counts requests that went on without a check (edgeq_store_bypass_total{route}); nil
	// counts nothing.
	Bypassed interface{ Inc() }
}

// StoreDegraded is the check every step makes before its first store call: degraded is false when
// store health counted the store as available as the request arrived, and the step goes on to use it.
// When it did not, the step tries no store call and e is its answer, StoreFailed(step, ErrDegraded):
// nil with on_store_error: open (the request goes on without the step's check), else 503
// STORE_UNAVAILABLE.
func (r *Request) StoreDegraded(step string) (e *Error, degraded bool) {
	if !r.Store.Degraded {
		return nil, false
	}
	return r.StoreFailed(step, ErrDegraded), true
}

// StoreFailed is the one answer of every step to "the store cannot be used" (cause says why; it is
// ErrDegraded when store health said so before any call). With on_store_error: open it counts and
// logs the bypass and returns nil: the step lets the request go on without its check. Closed, it
// returns 503 STORE_UNAVAILABLE (with Retry-After) for the step to answer, and the origin is not
// contacted.
func (r *Request) StoreFailed(step string, cause error) *Error {
	if cause == nil {
		cause = errStoreFailed
	}
	if !r.Store.Open {
		return ErrStoreUnavailable.Because(cause)
	}
	if r.Store.Bypassed != nil {
		r.Store.Bypassed.Inc()
	}
	if cause != ErrDegraded { // a degraded store is logged once, by store health, not per request
		r.Logger().Warn("store unavailable: request sent on without this check (on_store_error: open)",
			"step", step, "route", r.Route, "error", ClipErr(cause))
	}
	return nil
}
