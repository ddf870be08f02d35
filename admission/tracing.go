package admission

// Spans of admissions (docs/reference.md "Tracing"): the admission step of a request, its reserve
// call and its settlement, and the event worker's passes, each its own trace linked to the traced
// admissions it applies. Nothing here runs while tracing is off (Options.Tracer nil) but one check.

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/tracing"
	"github.com/edgeq/edgeq/internal/web"
)

// admissionSpan is what the admission step's span learns on the way: the reserve call's result.
type admissionSpan struct{ result string }

type admissionSpanKey struct{}

// traceAdmission runs a route's admission step in a span named for its kind ("admission <kind>"):
// the reserve call, the shop call and the settlement are its children. Its result is the reserve
// call's (admitted, or the refusal's code), else the code edgeq answered with (a request refused
// before any reservation), else "passed" (an unknown-owner pass, or the store down on a route that is
// open).
func (s *Service) traceAdmission(k Kind, route string, h http.HandlerFunc) http.Handler {
	tracer := s.o.Tracer
	if tracer == nil {
		return h
	}
	name := "admission " + k.Name()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !trace.SpanFromContext(r.Context()).IsRecording() {
			h(w, r) // a trace not recorded: no span
			return
		}
		st := &admissionSpan{}
		ctx, span := tracer.Start(r.Context(), name,
			trace.WithAttributes(tracing.Kind.String(k.Name()), tracing.Route.String(route)))
		defer span.End()
		h(w, r.WithContext(context.WithValue(ctx, admissionSpanKey{}, st)))
		result := st.result
		if result == "" {
			result = web.RequestFrom(ctx).Code
		}
		if result == "" {
			result = "passed"
		}
		span.SetAttributes(tracing.Result.String(result))
		if result == web.ErrStoreUnavailable.Code {
			span.SetStatus(codes.Error, result)
		}
	})
}

// reserveTraced is k.reserve in a span of its own ("admission reserve": the kind, the owner, the
// result). The store call itself may be a grouped one, sent for many requests at once
// (a grouped kind's batcher): its Redis span then belongs to none of them. An admission that is recorded is
// remembered, for the event worker's pass that applies it to link to it.
func (s *Service) reserveTraced(ctx context.Context, k Kind, c Claim) (*web.Error, error) {
	step := trace.SpanFromContext(ctx) // the admission's span
	if s.o.Tracer == nil || !step.IsRecording() {
		return k.Reserve(ctx, c)
	}
	owner := tracing.Owner(k.Owner()).String(c.Owner)
	ctx, span := s.o.Tracer.Start(ctx, "admission reserve", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(tracing.Kind.String(k.Name()), owner))
	defer span.End()
	// Remembered before the call: the event worker may read the admission's entry before the call's
	// answer is back here.
	sc := span.SpanContext()
	if sc.IsSampled() {
		s.traces.add(c.ID, sc)
	}
	e, err := k.Reserve(ctx, c)
	if sc.IsSampled() && (err != nil || e != nil) {
		s.traces.forget(c.ID) // nothing admitted (or not known to be): no pass will apply it
	}
	result := "admitted"
	switch {
	case err != nil:
		result = web.ErrStoreUnavailable.Code
		span.SetAttributes(semconv.ErrorTypeKey.String("store"))
		span.SetStatus(codes.Error, "the store did not answer")
	case e != nil:
		result = e.Code
	}
	span.SetAttributes(tracing.Result.String(result))
	if st, ok := ctx.Value(admissionSpanKey{}).(*admissionSpan); ok {
		st.result = result
		step.SetAttributes(owner) // the admission's span names it too
	}
	return e, err
}

// settleTraced is settle in a span ("admission settle": released, committed or ambiguous, as the
// shop's answer decides).
func (s *Service) settleTraced(r *http.Request, k Kind, c Claim, releaseOn []config.ReleaseOutcome, st *settling) {
	if s.o.Tracer == nil || !trace.SpanFromContext(r.Context()).IsRecording() {
		s.settle(r, k, c, releaseOn, st)
		return
	}
	o := web.OutcomeFrom(r.Context())
	result := "committed"
	switch {
	case releases(o, releaseOn):
		result = "released"
	case o != nil && o.Ambiguous():
		result = resultAmbiguous
	}
	ctx, span := s.o.Tracer.Start(r.Context(), "admission settle", trace.WithAttributes(
		tracing.Kind.String(k.Name()), tracing.Owner(k.Owner()).String(c.Owner), tracing.Result.String(result)))
	defer span.End()
	s.settle(r.WithContext(ctx), k, c, releaseOn, st)
}

// observe records an admission's duration, with the request's trace id as an exemplar when it has
// one.
func (s *Service) observe(r *http.Request, k Kind, start time.Time) {
	traceID := ""
	if s.o.Tracer != nil {
		traceID = web.RequestFrom(r.Context()).TraceID
	}
	metrics.Observe(s.metrics.duration.WithLabelValues(k.Name()), time.Since(start).Seconds(), traceID)
}

// handleTraced is handleReads in a span of the pass, the root of a trace of its own, linked to the
// spans of the traced admissions it applies (their requests' traces). A pass that links to one is
// recorded whatever the sample ratio (tracing.Sampler); a pass that read nothing makes no span.
func (w *worker) handleTraced(ctx context.Context, reads []read) bool {
	s := w.s
	if s.o.Tracer == nil {
		return w.handleReads(ctx, reads)
	}
	entries, streams := 0, 0
	for _, r := range reads {
		if len(r.msgs) > 0 {
			entries += len(r.msgs)
			streams++
		}
	}
	if entries == 0 {
		return w.handleReads(ctx, reads)
	}
	links := s.traces.linksOf(reads)
	ctx, span := s.o.Tracer.Start(ctx, "admission worker pass", trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(tracing.Entries.Int(entries), tracing.Streams.Int(streams), tracing.Linked.Int(len(links))))
	defer span.End()
	return w.handleReads(ctx, reads)
}

// tracedAdmissions remembers the span contexts of recorded admissions until the event worker's
// pass that applies them links to them. It is this replica's memory: a pass of another replica's
// worker applying the admission has no link to it (the stream entries carry no trace context). It
// holds at most maxTraced admissions, each for traceLinkTTL at most.
type tracedAdmissions struct {
	mu   sync.Mutex
	byID map[string]tracedAdmission
}

type tracedAdmission struct {
	span trace.SpanContext
	at   time.Time
}

const (
	maxTraced    = 4096
	traceLinkTTL = time.Minute
)

func (t *tracedAdmissions) add(id string, sc trace.SpanContext) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID = map[string]tracedAdmission{}
	}
	if len(t.byID) >= maxTraced {
		for id, a := range t.byID {
			if now.Sub(a.at) > traceLinkTTL {
				delete(t.byID, id)
			}
		}
		if len(t.byID) >= maxTraced {
			return // a burst of recorded admissions: the rest go without links
		}
	}
	t.byID[id] = tracedAdmission{span: sc, at: now}
}

func (t *tracedAdmissions) forget(id string) {
	t.mu.Lock()
	delete(t.byID, id)
	t.mu.Unlock()
}

// linksOf takes the admissions of reads this replica traced, as links. The entries are parsed by
// their kinds, as the pass parses them, only while some admission waits for its link.
func (t *tracedAdmissions) linksOf(reads []read) []trace.Link {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID) == 0 {
		return nil
	}
	var links []trace.Link
	for _, r := range reads {
		for _, msg := range r.msgs {
			apps, err := r.src.kind.Parse(r.src.owner, msg)
			if err != nil {
				continue
			}
			for _, app := range apps {
				if a, ok := t.byID[app.ID]; ok {
					delete(t.byID, app.ID)
					links = append(links, trace.Link{SpanContext: a.span,
						Attributes: []attribute.KeyValue{tracing.Owner(r.src.kind.Owner()).String(app.Owner)}})
				}
			}
		}
	}
	return links
}
