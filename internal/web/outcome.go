package web

import (
	"context"
	"time"
)

// CommandHeader is the response header an origin may send to end a visitor's session
// ("complete" or "abandon", CONTRACT section 4). edgeq acts on it and never forwards it.
const CommandHeader = "Edgeq-Command"

// Outcome is what happened when a request was forwarded. Steps that act after the origin answered
// (admission commit/release, origin commands) read it once next.ServeHTTP has returned.
type Outcome struct {
	Forwarded      bool   // the request was sent to the origin
	Status         int    // the origin's status, 0 if it never answered
	TransportError bool   // no answer: refused, reset, timed out
	Command        string // the origin's Edgeq-Command header, removed from the response

	Started time.Time // when forwarding began, for edgeq_origin_duration_seconds
}

// TrackOutcome makes r record the outcome of forwarding (the proxy does this for every request bound
// for the origin). The Outcome lives inside the Request: no allocation of its own.
func (r *Request) TrackOutcome() { r.outcome = &r.outcomeValue }

// OutcomeFrom returns the Outcome of the request carrying ctx, or nil for requests that are not
// forwarded (edgeq's own endpoints).
func OutcomeFrom(ctx context.Context) *Outcome {
	if r, ok := ctx.Value(requestKey{}).(*Request); ok {
		return r.outcome
	}
	return nil
}
