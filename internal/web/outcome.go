package web

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/config"
)

// CommandHeader is the response header an origin may send to end a visitor's session
// ("complete" or "abandon"; docs/reference.md "The queue gate"). edgeq acts on it and never
// forwards it.
const CommandHeader = "Edgeq-Command"

// Outcome is what happened when a request was forwarded. Steps that act after the origin answered
// (admission commit/release, origin commands) read it once next.ServeHTTP has returned.
type Outcome struct {
	Forwarded      bool   // the request was sent to the origin
	Status         int    // the origin's status, 0 if it never answered
	TransportError bool   // no answer: refused, reset, timed out
	Command        string // the origin's Edgeq-Command header, removed from the response
	// Settles: a step settles on the outcome (admission), so the transport says whether the whole
	// request was sent even where that costs something (net/http's Transport: a ClientTrace).
	Settles bool
	// Fence, when set, must hold when the request is written to the shop (web.Fence).
	Fence Fence
	// Fenced: the request's fence did not hold just before it was to be written (Fence): nothing
	// reached the shop, and the request was answered 503.
	Fenced bool
	// sent: the whole request was written to the shop's connection (the transport says so, MarkSent):
	// a failure after it is a timeout, the shop may have acted on the request.
	sent atomic.Bool

	// Server is the proxy's record of the shop server of a pool the request goes to (proxy/pool.go);
	// nil for origin:'s.
	Server any

	Started time.Time  // when forwarding began, for edgeq_origin_duration_seconds
	Body    *BodyWatch // the visitor's body as the origin transport reads it, nil without a body

	// Answer is what edgeq keeps of the shop's answer for steps that settle on it (answer: outcomes),
	// nil on every other request: a request pays for it only on routes that read answers.
	Answer *Answer

	answered chan struct{} // closed when the origin answered or failed (WatchAnswer)
}

// Answer is the shop's answer as a step that settles on it reads it.
type Answer struct {
	// Want: a step settles on the answer (an answer: outcome), so the proxy keeps its body (up to
	// server.max_body_bytes) in Body, as the shop sent it (Encoding), before passing it on; Whole is
	// false when it was larger or broke off.
	Want     bool
	Body     []byte
	Encoding string
	Whole    bool
	// FieldKey and Batch are what "$field" in an answer: path stands for on a graphql: route: the
	// matched field's response key, and its operation's index in a batched request (-1: not a batch).
	FieldKey string
	Batch    int

	doc    any
	parsed bool
}

// KeepAnswer returns the request's Answer, made on first use.
func (o *Outcome) KeepAnswer() *Answer {
	if o.Answer == nil {
		o.Answer = &Answer{Batch: -1}
	}
	return o.Answer
}

// WantsAnswer reports whether a step asked for the shop's answer.
func (o *Outcome) WantsAnswer() bool { return o.Answer != nil && o.Answer.Want }

// Matches reports whether the origin's outcome is want (a release_on or complete_on entry). An
// answer: entry reads the shop's JSON answer (decompressed): answer:PATH matches when the answer has a
// value at the path that is not null, false, 0, "", [] or {}; answer:!PATH when the answer is JSON and
// has no value there (absent or null). An answer edgeq did not keep whole, or cannot read, matches no
// answer: entry of either form.
func (o *Outcome) Matches(want config.ReleaseOutcome) bool {
	if want.Answer == nil {
		return want.Matches(o.Status, o.Failure())
	}
	if o.TransportError || !o.Forwarded || o.Answer == nil {
		return false
	}
	v, readable := o.Answer.at(want.Answer)
	if want.Absent {
		return readable && v == nil
	}
	return truthy(v)
}

// at returns the value of the kept answer at path (nil when it has none: absent or null), and whether
// the answer could be read as JSON at all.
func (a *Answer) at(path []string) (any, bool) {
	if !a.parsed {
		a.parsed = true
		a.doc = a.decode()
	}
	if a.doc == nil {
		return nil, false // not kept whole, another encoding, not JSON (a JSON null answers nothing either)
	}
	cur := a.doc
	if a.Batch >= 0 && a.FieldKey != "" {
		list, ok := cur.([]any)
		if !ok || a.Batch >= len(list) {
			return nil, true
		}
		cur = list[a.Batch]
	}
	for _, step := range path {
		if step == "$field" {
			step = a.FieldKey
		}
		switch node := cur.(type) {
		case map[string]any:
			cur = node[step]
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(node) {
				return nil, true
			}
			cur = node[i]
		default:
			return nil, true
		}
	}
	return cur, true
}

// truthy reports whether an answer's value counts as "has a value" for answer:PATH: not null, false,
// 0, "", [] or {}.
func truthy(cur any) bool {
	switch v := cur.(type) {
	case nil:
		return false
	case bool:
		return v
	case json.Number:
		f, err := v.Float64()
		return err != nil || f != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// decode reads the kept answer: nil when there is none, it is not whole, its encoding is not one edgeq
// reads (the proxy asks the shop for gzip or nothing), or it is not JSON.
func (a *Answer) decode() any {
	if !a.Whole || len(a.Body) == 0 {
		return nil
	}
	var r io.Reader = bytes.NewReader(a.Body)
	switch strings.ToLower(strings.TrimSpace(a.Encoding)) {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil
		}
		r = zr
	case "deflate":
		zr, err := zlib.NewReader(r)
		if err != nil {
			return nil
		}
		r = zr
	default:
		return nil
	}
	dec := json.NewDecoder(io.LimitReader(r, 16<<20))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil
	}
	return doc
}

// MarkSent records that the whole request was written to the shop's connection; the transport calls
// it, from whichever goroutine writes.
func (o *Outcome) MarkSent() { o.sent.Store(true) }

// Failure says how a forwarded request failed to get an answer: config.Answered when it did not fail,
// config.NotSent when the shop never got the whole request (a fenced request among them),
// config.NoAnswer when it did and no complete answer came (docs/reference.md "Admission outcomes").
func (o *Outcome) Failure() config.Failure {
	switch {
	case !o.TransportError:
		return config.Answered
	case o.sent.Load() && !o.Fenced:
		return config.NoAnswer
	}
	return config.NotSent
}

// Ambiguous reports whether the shop may have acted on a forwarded request whose answer never came.
func (o *Outcome) Ambiguous() bool { return o.Forwarded && o.Failure() == config.NoAnswer }

// Fence is a condition an admitted request must meet when it is written to the shop: the transport
// asks Holds immediately before the request's first byte goes out, after any hold line, and does not
// write it when it does not hold (ErrFenced). Admission fences its requests with the replica's
// liveness lease (docs/reference.md "Failover").
type Fence interface{ Holds() bool }

// ErrFenced is what a transport returns for a request whose fence did not hold: nothing was written.
var ErrFenced = errors.New("the replica's liveness lease lapsed since the admission: the request was not sent")

// FenceFrom returns the fence of the request's outcome, nil when it has none.
func FenceFrom(ctx context.Context) Fence {
	if o := OutcomeFrom(ctx); o != nil {
		return o.Fence
	}
	return nil
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
