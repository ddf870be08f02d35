package web

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
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

	Started time.Time  // when forwarding began, for edgeq_origin_duration_seconds
	Body    *BodyWatch // the visitor's body as the origin transport reads it, nil without a body

	answered chan struct{} // closed when the origin answered or failed (WatchAnswer)
}

// WatchAnswer returns a channel closed as soon as the origin has answered (its response headers
// arrived) or failed: from then on the outcome is known. A step that must outlast the visitor
// (admission settles on the origin's answer) calls it before forwarding; the proxy marks it.
func (o *Outcome) WatchAnswer() <-chan struct{} {
	if o.answered == nil {
		o.answered = make(chan struct{})
	}
	return o.answered
}

// MarkAnswered closes the WatchAnswer channel, once; the proxy calls it when the origin's response
// headers arrive or the round trip fails.
func (o *Outcome) MarkAnswered() {
	if o.answered != nil {
		select {
		case <-o.answered:
		default:
			close(o.answered)
		}
	}
}

// BodyWatch wraps a request body and records the first error reading it other than its end, so a
// broken client body is not mistaken for an origin fault. The transport reads it on its own
// goroutine, hence the atomic.
type BodyWatch struct {
	io.ReadCloser
	err atomic.Pointer[error]
}

func (b *BodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// Err returns the first read error, nil if the body has read cleanly so far.
func (b *BodyWatch) Err() error {
	if e := b.err.Load(); e != nil {
		return *e
	}
	return nil
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

// OutlastVisitor returns r on a context that the visitor's leaving does not cancel until the origin
// has answered (or failed), for steps whose bookkeeping depends on the origin's own answer (admission
// settles on it; an in-flight slot is held until the origin is done). After the answer, a visitor
// who is gone stops the copy of the response to nobody. The origin's time to answer is bounded by
// origin.timeout. done must be called when the request is over.
func OutlastVisitor(r *http.Request) (*http.Request, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	var answered <-chan struct{} // nil (never) without an outcome to watch
	if o := OutcomeFrom(r.Context()); o != nil {
		answered = o.WatchAnswer()
	}
	stop := context.AfterFunc(r.Context(), func() {
		select {
		case <-answered:
		case <-ctx.Done(): // the request ended first
		}
		cancel()
	})
	return r.WithContext(ctx), func() { stop(); cancel() }
}
