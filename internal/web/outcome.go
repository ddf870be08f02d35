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

// WithOutcome returns ctx carrying a fresh Outcome.
func WithOutcome(ctx context.Context) context.Context {
	return context.WithValue(ctx, outcomeKey{}, &Outcome{})
}

type outcomeKey struct{}

// OutcomeFrom returns the Outcome of the request carrying ctx, or nil outside a route.
func OutcomeFrom(ctx context.Context) *Outcome {
	o, _ := ctx.Value(outcomeKey{}).(*Outcome)
	return o
}
