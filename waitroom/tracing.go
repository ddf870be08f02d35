package waitroom

// Spans of the waiting room (docs/reference.md "Tracing"): the queue gate's own work on a gated
// request, and the joins, status polls and token requests of the public API. Nothing here runs while
// tracing is off (Options.Tracer nil): traced, traceGate and passOn hand back the handlers they are
// given.

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/tracing"
	"github.com/edgeq/edgeq/internal/web"
)

// Span names of the waiting room's endpoints.
const (
	spanJoin   = "queue join"   // POST {prefix}/assign_queue_pos
	spanWait   = "queue wait"   // the waiting page: a join, or a poll of a place held
	spanStatus = "queue status" // status and queue_pos polls
	spanToken  = "queue token"  // generate_token
	spanGate   = "queue gate"
)

// traced runs h in a span named name. Its queue is set once the request names a known queue
// (noteQueue), its result is the error code answered, or "ok".
func (r *Room) traced(name string, h http.HandlerFunc) http.HandlerFunc {
	tracer := r.opts.Tracer
	if tracer == nil {
		return h
	}
	return func(w http.ResponseWriter, req *http.Request) {
		if !trace.SpanFromContext(req.Context()).IsRecording() {
			h(w, req) // a trace not recorded: no span
			return
		}
		ctx, span := tracer.Start(req.Context(), name)
		defer span.End()
		h(w, req.WithContext(ctx))
		result := web.RequestFrom(ctx).Code
		if result == "" {
			result = "ok"
		}
		span.SetAttributes(tracing.Result.String(result))
	}
}

// noteQueue puts the queue id on the current span once the request has named a queue the room knows
// (ids that name none are the visitor's text, and stay out of traces).
func (r *Room) noteQueue(ctx context.Context, queueID string) {
	if r.opts.Tracer == nil {
		return
	}
	trace.SpanFromContext(ctx).SetAttributes(tracing.Queue.String(queueID))
}

// gateSpan is a gated request's span of the queue gate, from the gate's start to where the request
// moves on (passOn) or the gate answers it.
type gateSpan struct {
	span   trace.Span
	parent trace.Span          // the request's span: what the steps after the gate continue
	w      http.ResponseWriter // the writer the gate was given, for the steps after it
	status int                 // what the gate answered, if it did
	passed bool
}

type gateSpanKey struct{}

// traceGate runs a route's queue gate in a span of its own: the token check and, for a visitor
// without a valid token, the join or the answer that sends the visitor to wait. The span ends where
// the request moves on to the next step (result "passed"), so the steps after it are its siblings,
// or when the gate answers (result: the error code, or the status of a redirect to the waiting page).
func (r *Room) traceGate(queueID string, gate http.HandlerFunc) http.Handler {
	tracer := r.opts.Tracer
	if tracer == nil {
		return gate
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		parent := trace.SpanFromContext(req.Context())
		if !parent.IsRecording() {
			gate(w, req) // a trace not recorded: no span (passOn finds none either)
			return
		}
		ctx, span := tracer.Start(req.Context(), spanGate, trace.WithAttributes(tracing.Queue.String(queueID)))
		g := &gateSpan{span: span, parent: parent, w: w}
		defer func() {
			if g.passed {
				return
			}
			result := web.RequestFrom(ctx).Code
			if result == "" {
				result = "status " + strconv.Itoa(g.status)
			}
			span.SetAttributes(tracing.Result.String(result))
			span.End()
		}()
		gate(&gateWriter{ResponseWriter: w, g: g}, req.WithContext(context.WithValue(ctx, gateSpanKey{}, g)))
	})
}

// passOn is next, ending the gate's span as the request reaches it.
func (r *Room) passOn(next http.Handler) http.Handler {
	if r.opts.Tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		g, ok := req.Context().Value(gateSpanKey{}).(*gateSpan)
		if !ok || g.passed {
			next.ServeHTTP(w, req)
			return
		}
		g.passed = true
		g.span.SetAttributes(tracing.Result.String("passed"))
		g.span.End()
		// The steps after the gate write to the request's own writer, in the request's span.
		next.ServeHTTP(g.w, req.WithContext(trace.ContextWithSpan(req.Context(), g.parent)))
	})
}

// gateWriter notes the status of the gate's own answer.
type gateWriter struct {
	http.ResponseWriter
	g *gateSpan
}

func (w *gateWriter) WriteHeader(code int) {
	if w.g.status == 0 && code >= 200 {
		w.g.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *gateWriter) Write(b []byte) (int, error) {
	if w.g.status == 0 {
		w.g.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *gateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
