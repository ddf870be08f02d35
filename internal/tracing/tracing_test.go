package tracing

import (
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store/luascript"
)

// A new trace is recorded by the ratio; a caller's decision is followed both ways; a span linked to a
// recorded one is recorded even at ratio 0, so the event worker's pass of a traced admission is there.
func TestSampler_FollowsTheParentAndRecordsWhatLinksToARecordedSpan(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}})
	for _, c := range []struct {
		name   string
		ratio  float64
		parent trace.SpanContext
		links  []trace.Link
		want   bool
	}{
		{"a new trace at ratio 0", 0, trace.SpanContext{}, nil, false},
		{"a new trace at ratio 1", 1, trace.SpanContext{}, nil, true},
		{"a sampled caller at ratio 0", 0, sampled, nil, true},
		{"an unsampled caller at ratio 1", 1, unsampled, nil, false},
		{"a pass linked to a recorded admission at ratio 0", 0, trace.SpanContext{}, []trace.Link{{SpanContext: unsampled}, {SpanContext: sampled}}, true},
		{"a pass linked to unrecorded admissions at ratio 0", 0, trace.SpanContext{}, []trace.Link{{SpanContext: unsampled}}, false},
	} {
		ctx := context.Background()
		if c.parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, c.parent)
		}
		provider := sdktrace.NewTracerProvider(sdktrace.WithSampler(Sampler(c.ratio)), sdktrace.WithIDGenerator(IDs{}))
		_, span := provider.Tracer("t").Start(ctx, "span", trace.WithLinks(c.links...))
		if got := span.SpanContext().IsSampled(); got != c.want {
			t.Errorf("%s: sampled %v, want %v", c.name, got, c.want)
		}
		if !span.SpanContext().TraceID().IsValid() || !span.SpanContext().SpanID().IsValid() {
			t.Errorf("%s: ids %v", c.name, span.SpanContext())
		}
		span.End()
	}
}

// Off, New makes nothing: no provider, no exporter, a nil tracer.
func TestNew_OffMakesNothing(t *testing.T) {
	tr, err := New(config.Tracing{SampleRatio: 1, Endpoint: "http://127.0.0.1:1"}, "v1", nil)
	if tr != nil || err != nil || tr.Tracer() != nil || tr.Shutdown(context.Background()) != nil {
		t.Fatalf("tracing off: %v %v", tr, err)
	}
}

// Store calls inside a recorded span are its children, named by command and by script file, with
// neither keys nor arguments; calls outside one (a request not sampled, background work) make none.
func TestRedisHook_NamesScriptsAndCommandsWithoutKeys(t *testing.T) {
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { client.Close() })
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	tracer := provider.Tracer("t")
	client.AddHook(RedisHook(tracer))
	script := luascript.Named("probe.lua", redis.NewScript(`return redis.call('GET', KEYS[1])`))

	const key, secret = "edgeq:{p:sneaker}:buyers", "pseudonym-4d6e1ae2"
	client.Set(context.Background(), key, secret, 0) // no span: nothing recorded around it
	ctx, parent := tracer.Start(context.Background(), "admission")
	client.HGet(ctx, key+"x", secret)
	script.Run(ctx, client, []string{key})
	pipe := client.Pipeline()
	pipe.Get(ctx, key)
	pipe.Incr(ctx, key+"n")
	pipe.Exec(ctx)
	parent.End()

	var names []string
	for _, s := range recorder.Ended() {
		if s.Name() == "admission" {
			continue
		}
		names = append(names, s.Name())
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%q is not a child of the span that made the call", s.Name())
		}
		for _, a := range s.Attributes() {
			if v := a.Value.String(); strings.Contains(v, "sneaker") || strings.Contains(v, secret) {
				t.Errorf("%q: %s = %q holds a key or an argument", s.Name(), a.Key, v)
			}
		}
	}
	got := strings.Join(names, ", ")
	for _, want := range []string{"HGET", "EVALSHA probe.lua", "EVAL probe.lua", "pipeline"} {
		if !strings.Contains(got, want) {
			t.Errorf("spans %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "SET") {
		t.Errorf("a call outside any recorded span was traced: %q", got)
	}
}
