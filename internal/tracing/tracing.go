// Package tracing is edgeq's OpenTelemetry tracing (docs/reference.md "Tracing"): the tracer provider
// built from tracing:, its OTLP exporter and sampler, the names of the attributes every span uses, and
// the go-redis hook that traces store calls. Nothing here runs while tracing is off: New returns nil,
// and the packages that trace hold a nil trace.Tracer and check it before doing anything.
package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/config"
)

// ServiceName is the service.name of edgeq's spans.
const ServiceName = "edgeq"

// Tracing is a running tracer provider and its exporter.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// New builds the tracer provider of cfg, or returns nil when tracing is off. version is the build's
// (service.version). Exports run in the background, in batches; a receiver that is down costs spans,
// never a request's time.
func New(cfg config.Tracing, version string, logger *slog.Logger) (*Tracing, error) {
	if !cfg.On() {
		return nil, nil
	}
	exporter, err := newExporter(cfg)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.New(context.Background(),
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, as every SDK reads them
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(Sampler(cfg.SampleRatio)),
		sdktrace.WithIDGenerator(IDs{}),
		sdktrace.WithBatcher(exporter),
	)
	routeErrors(logger)
	return &Tracing{provider: provider, tracer: provider.Tracer("github.com/edgeq/edgeq")}, nil
}

// newExporter is the OTLP exporter of cfg. The headers go to the exporter and nowhere else.
func newExporter(cfg config.Tracing) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing.endpoint does not parse") // validated: not reached
	}
	ctx := context.Background()
	switch cfg.Exporter {
	case config.TracingOTLPHTTP:
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces" // the OTLP/HTTP path of traces
		}
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()),
			otlptracehttp.WithHeaders(cfg.Headers), otlptracehttp.WithTimeout(exportTimeout))
	case config.TracingOTLPGRPC:
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u.String()),
			otlptracegrpc.WithHeaders(cfg.Headers), otlptracegrpc.WithTimeout(exportTimeout))
	}
	return nil, fmt.Errorf("tracing.exporter %q", cfg.Exporter)
}

// exportTimeout bounds one export: a receiver that hangs holds one batch, not the process.
const exportTimeout = 10 * time.Second

// Tracer is the tracer of edgeq's spans; nil when t is (tracing off).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.tracer
}

// Shutdown ends spans' export: what is queued is sent, within ctx. A nil t has nothing to send.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Sampler is edgeq's sampler: a request that arrives with a trace context follows its caller's
// decision (parent-based); a new trace is recorded with probability ratio, except that a span linked
// to a recorded one (the event worker's pass applying a traced admission) is recorded too, so the link
// leads somewhere.
func Sampler(ratio float64) sdktrace.Sampler {
	return sdktrace.ParentBased(linkedOrRatio{ratio: sdktrace.TraceIDRatioBased(ratio)})
}

type linkedOrRatio struct{ ratio sdktrace.Sampler }

func (s linkedOrRatio) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, l := range p.Links {
		if l.SpanContext.IsSampled() {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
		}
	}
	return s.ratio.ShouldSample(p)
}

func (s linkedOrRatio) Description() string {
	return "LinkedOrRatio{" + s.ratio.Description() + "}"
}

// IDs makes trace and span ids from math/rand/v2's generator (ChaCha8, one state per thread, no
// lock). The SDK's default shares one math/rand source behind a mutex, which every request's span,
// sampled or not, waits on under load.
type IDs struct{}

// NewIDs is a new trace id and span id.
func (IDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	for !t.IsValid() {
		//nolint:gosec // trace ids must be unique, not unpredictable (as the SDK's own math/rand ids)
		binary.NativeEndian.PutUint64(t[:8], rand.Uint64())
		//nolint:gosec // trace ids must be unique, not unpredictable (as the SDK's own math/rand ids)
		binary.NativeEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, newSpanID()
}

// NewSpanID is a new span id of a trace.
func (IDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		//nolint:gosec // span ids must be unique, not unpredictable (as the SDK's own math/rand ids)
		binary.NativeEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// routeErrors sends the SDK's own errors (an export that failed) to edgeq's log at warn level, once
// per process: the SDK keeps one handler per process. They name the endpoint, never the headers.
func routeErrors(logger *slog.Logger) {
	routeOnce.Do(func() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("tracing: "+err.Error(), "hint", "spans are being lost; check tracing.endpoint and the receiver")
		}))
	})
}

var routeOnce sync.Once

// SampledTraceID is the trace id of ctx's span, as 32 hex digits, when that span is recorded and
// exported; "" otherwise (tracing off, or a trace not sampled).
func SampledTraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
