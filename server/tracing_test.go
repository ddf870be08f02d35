package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/testutil/otlptest"
)

// tracedShop is a shop that traces itself as a real one would: its own tracer provider (service
// "shop") exporting to the same receiver, and a span for every request, a child of the traceparent
// the request carries. It keeps the trace headers each request came with.
type tracedShop struct {
	*httptest.Server
	provider *sdktrace.TracerProvider
	mu       sync.Mutex
	seen     []http.Header // traceparent and tracestate of each request, by path
	paths    []string
}

func newTracedShop(t *testing.T, receiver *otlptest.Receiver) *tracedShop {
	t.Helper()
	exporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(receiver.HTTPEndpoint()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	s := &tracedShop{provider: sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("shop"))),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)}
	tracer := s.provider.Tracer("shop")
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, http.Header{"Traceparent": r.Header.Values("Traceparent"), "Tracestate": r.Header.Values("Tracestate")})
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		_, span := tracer.Start(ctx, "shop "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		fmt.Fprint(w, "order placed")
	}))
	t.Cleanup(s.Close)
	return s
}

// headersOf is what the shop saw of the request to path (the last one).
func (s *tracedShop) headersOf(t *testing.T, path string) http.Header {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.paths) - 1; i >= 0; i-- {
		if s.paths[i] == path {
			return s.seen[i]
		}
	}
	t.Fatalf("the shop saw no request to %s (it saw %v)", path, s.paths)
	return nil
}

func tracingConfig(shopURL, tracing string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 10s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
log: {level: info}
queues:
  - {id: drop, capacity: 1000, token_ttl: 10m}
products:
  - {id: sneaker, stock: 100, per_user_limit: 1, name: "Sneaker"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    queue: drop
    admission: {type: stock, product: "path:product", user: "header:X-User"}
%s
`, shopURL, tracing)
}

// A visitor's trace context, as a traced browser or an upstream gateway sends it.
const (
	visitorTrace  = "0af7651916cd43dd8448eb211c80319c"
	visitorParent = "b7ad6b7169203331"
	traceparent   = "00-" + visitorTrace + "-" + visitorParent + "-01"
	tracestate    = "vendor=abc"
)

// With tracing on, a purchase through a queued, stock-admitted route is one trace from the visitor's
// request to the shop's own span: the request's server span; the queue gate's span (passed) and the
// admission's (stock, the product, admitted) beside each other under it; the reserve call and the
// settlement under the admission; the shop call (a client span with the connection's steps as events)
// under the admission; the shop's span under the shop call, in the same trace, because the shop got
// the shop call's traceparent. A visitor's traceparent is continued (same trace id, its span the
// parent) and its tracestate reaches the shop. The event worker's pass that applied the admission is
// a trace of its own linked to it, with its Redis calls named by script. The access log line and the
// latency histograms' exemplars carry the trace id; no span holds the user id, the token, the place
// in line, the exporter's credential or an address of the visitor. Over both exporters; the spans
// reach the receiver because stopping edgeq sends them.
func TestTracing_APurchaseIsOneTraceFromTheVisitorToTheShopsOwnSpan(t *testing.T) {
	for _, exporter := range []string{"otlp_http", "otlp_grpc"} {
		t.Run(exporter, func(t *testing.T) {
			receiver := otlptest.Start(t) // a receiver of its own: the spans it holds are this case's
			endpoint := receiver.HTTPEndpoint()
			if exporter == "otlp_grpc" {
				endpoint = receiver.GRPCEndpoint()
			}
			purchaseTrace(t, receiver, exporter, endpoint)
		})
	}
}

func purchaseTrace(t *testing.T, receiver *otlptest.Receiver, exporter, endpoint string) {
	// Spans are sent once a minute, or when the exporter shuts down: what arrives below was sent by
	// edgeq's drain.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	shop := newTracedShop(t, receiver)
	in := start(t, tracingConfig(shop.URL, fmt.Sprintf(`tracing:
  exporter: %s
  endpoint: %q
  sample_ratio: 1
  headers: {authorization: "Bearer collector-s3cret"}
`, exporter, endpoint)))
	placeID, token := joinAndToken(t, in, "drop")
	// Two buyers: one whose request starts a trace, one whose request continues the visitor's.
	users := []string{"buyer-7f3a9c-" + exporter, "buyer-5e1d2b-" + exporter}
	for i, user := range users {
		header := http.Header{"X-User": {user}, "Cookie": {"edgeq_tk_drop=" + token}}
		if i == 1 {
			header.Set("Traceparent", traceparent)
			header.Set("Tracestate", tracestate)
		}
		r, err := send("POST", in.public+"/checkout/sneaker", header)
		if err != nil || r.status != http.StatusOK || r.body != "order placed" {
			t.Fatalf("purchase %d: %v %d %q", i, err, r.status, r.body)
		}
	}
	// The continued trace's exemplar, while edgeq still runs: the OpenMetrics format carries them.
	req, _ := http.NewRequest("GET", in.admin+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`edgeq_http_request_duration_seconds_bucket\{route="checkout",le="[^"]+"\} \d+ # \{trace_id="` + visitorTrace + `"\}`).Match(metricsText) {
		t.Errorf("no exemplar with the trace id on edgeq_http_request_duration_seconds:\n%s", grepLines(string(metricsText), "duration_seconds_bucket"))
	}
	// The event worker applies both admissions (their buyers' lists are its writing) before edgeq
	// stops.
	for _, user := range users {
		eventually(t, user+"'s admission applied", func() bool {
			r, err := send("GET", in.admin+"/api/users/"+user+"/admissions", http.Header{"Authorization": {"Bearer test-key"}})
			return err == nil && r.status == http.StatusOK && strings.Contains(r.body, `"product_id":"sneaker"`)
		})
	}
	in.cancel()
	if err := <-in.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	in.done <- nil // for the cleanup
	shop.provider.Shutdown(context.Background())

	// The shop got the shop call's context, never the visitor's span as its parent.
	second := shop.headersOf(t, "/checkout/sneaker") // the last one: the visitor's trace
	spans := receiver.WaitFor(t, "the shop's span of the continued trace", func(spans []otlptest.Span) bool {
		return slices.ContainsFunc(spans, func(s otlptest.Span) bool { return s.Service == "shop" && s.TraceID == visitorTrace }) &&
			slices.ContainsFunc(spans, func(s otlptest.Span) bool { return s.Name == "admission worker pass" && len(s.Links) > 0 })
	})
	if got := second.Get("Traceparent"); !strings.HasPrefix(got, "00-"+visitorTrace+"-") || strings.Contains(got, visitorParent) {
		t.Errorf("the shop got traceparent %q: want the visitor's trace with the shop call's span", got)
	}
	if got := second.Get("Tracestate"); got != tracestate {
		t.Errorf("the shop got tracestate %q, want the visitor's %q", got, tracestate)
	}

	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	child := func(parent otlptest.Span, name string) otlptest.Span {
		t.Helper()
		for _, s := range spans {
			if s.ParentID == parent.SpanID && s.TraceID == parent.TraceID && s.Name == name {
				return s
			}
		}
		t.Fatalf("%q has no child %q; spans:\n%s", parent.Name, name, otlptest.Describe(spans))
		return otlptest.Span{}
	}
	attr := func(s otlptest.Span, key, want string) {
		t.Helper()
		if got := s.Attributes[key]; got != want {
			t.Errorf("%q: %s = %q, want %q (%v)", s.Name, key, got, want, s.Attributes)
		}
	}
	var servers []otlptest.Span
	for _, s := range spans {
		if s.Service == "edgeq" && s.Name == "POST checkout" && s.Kind == "Server" {
			servers = append(servers, s)
		}
	}
	if len(servers) != 2 {
		t.Fatalf("%d server spans of the checkout route, want 2:\n%s", len(servers), otlptest.Describe(spans))
	}
	for _, request := range servers {
		attr(request, "http.route", "checkout")
		attr(request, "edgeq.route", "checkout")
		attr(request, "http.request.method", "POST")
		attr(request, "http.response.status_code", "200")
		gate := child(request, "queue gate")
		attr(gate, "edgeq.queue", "drop")
		attr(gate, "edgeq.result", "passed")
		adm := child(request, "admission stock")
		attr(adm, "edgeq.admission.kind", "stock")
		attr(adm, "edgeq.product", "sneaker")
		attr(adm, "edgeq.result", "admitted")
		reserve := child(adm, "admission reserve")
		attr(reserve, "edgeq.result", "admitted")
		attr(child(adm, "admission settle"), "edgeq.result", "committed")
		call := child(adm, "shop POST")
		if call.Kind != "Client" {
			t.Errorf("the shop call is a %s span", call.Kind)
		}
		attr(call, "http.response.status_code", "200")
		var events []string
		for _, e := range call.Events {
			events = append(events, e.Name)
		}
		for _, want := range []string{"connection", "request written", "first byte"} {
			if !slices.Contains(events, want) {
				t.Errorf("the shop call's events %v lack %q", events, want)
			}
		}
		own := child(call, "shop /checkout/sneaker")
		if own.Service != "shop" {
			t.Errorf("the shop call's child is %s's", own.Service)
		}
		if request.TraceID == visitorTrace {
			if request.ParentID != visitorParent {
				t.Errorf("the continued trace's request span has parent %s, want the visitor's %s", request.ParentID, visitorParent)
			}
		} else if request.ParentID != "" {
			t.Errorf("a request without a traceparent starts a trace; its span has parent %s", request.ParentID)
		}
		if !strings.Contains(in.logs.String(), `"trace_id":"`+request.TraceID+`"`) {
			t.Errorf("no access log line with trace_id %s:\n%s", request.TraceID, in.logs)
		}
		// The worker's pass is a trace of its own, linked to the admission's reserve call.
		linked := false
		for _, s := range spans {
			if s.Name == "admission worker pass" && s.TraceID != request.TraceID &&
				slices.Contains(s.Links, otlptest.Link{TraceID: reserve.TraceID, SpanID: reserve.SpanID}) {
				linked = true
				if s.ParentID != "" {
					t.Errorf("the worker's pass has a parent %s", s.ParentID)
				}
			}
		}
		if !linked {
			t.Errorf("no worker pass links to the admission of trace %s", request.TraceID)
		}
	}
	if !slices.ContainsFunc(spans, func(s otlptest.Span) bool {
		return s.Attributes["db.system.name"] == "redis" && (s.Attributes["edgeq.redis.script"] == "apply.lua" ||
			strings.Contains(s.Attributes["edgeq.redis.commands"], "apply.lua")) // alone, or in a pipeline
	}) {
		t.Errorf("no Redis span names the worker's script apply.lua:\n%s", otlptest.Describe(spans))
	}
	if !slices.ContainsFunc(spans, func(s otlptest.Span) bool { return s.Name == "queue join" && s.Attributes["edgeq.queue"] == "drop" }) {
		t.Errorf("no span of the queue join")
	}

	// Nothing the visitor holds, nothing secret, no visitor address.
	secrets := append([]string{token, placeID, "collector-s3cret", "edgeq_tk_drop"}, users...)
	for _, s := range spans {
		if s.Service != "edgeq" {
			continue
		}
		values := map[string]string{}
		for k, v := range s.Attributes {
			values[k] = v
		}
		for k, v := range s.Resource {
			values["resource "+k] = v
		}
		for _, e := range s.Events {
			for k, v := range e.Attributes {
				values[e.Name+" "+k] = v
			}
		}
		for k, v := range values {
			for _, secret := range secrets {
				if strings.Contains(v, secret) {
					t.Errorf("span %q: %s = %q holds %q", s.Name, k, v, secret)
				}
			}
			for _, forbidden := range []string{"client.address", "network.peer.address", "user_agent.original", "url.full",
				"url.path", "url.query", "http.request.header", "enduser.id", "user.id", "session.id"} {
				if strings.HasPrefix(k, forbidden) {
					t.Errorf("span %q has %s", s.Name, k)
				}
			}
		}
	}
	if strings.Contains(in.logs.String(), "collector-s3cret") {
		t.Error("the exporter's credential is in the log")
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// With tracing off, edgeq neither reads nor writes trace headers: the visitor's traceparent and
// tracestate reach the shop exactly as sent, nothing is exported (an endpoint set without an
// exporter is warned about, and is not used), and the access log has no trace_id.
func TestTracing_OffPassesTheVisitorsTraceparentUntouchedAndExportsNothing(t *testing.T) {
	receiver := otlptest.Start(t)
	shop := newTracedShop(t, receiver)
	in := start(t, tracingConfig(shop.URL, fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1}\n", receiver.HTTPEndpoint())))
	_, token := joinAndToken(t, in, "drop")
	header := http.Header{"X-User": {"buyer-1"}, "Cookie": {"edgeq_tk_drop=" + token},
		"Traceparent": {traceparent}, "Tracestate": {tracestate}}
	if r, err := send("POST", in.public+"/checkout/sneaker", header); err != nil || r.status != http.StatusOK {
		t.Fatalf("purchase: %v %d", err, r.status)
	}
	// Not through the gate either: a request matching no route.
	if r, err := send("GET", in.public+"/products", http.Header{"Traceparent": {traceparent}}); err != nil || r.status != http.StatusOK {
		t.Fatalf("page: %v %d", err, r.status)
	}
	in.cancel()
	<-in.done
	in.done <- nil
	for _, path := range []string{"/checkout/sneaker", "/products"} {
		if got := shop.headersOf(t, path).Get("Traceparent"); got != traceparent {
			t.Errorf("%s: the shop got traceparent %q, want the visitor's %q untouched", path, got, traceparent)
		}
	}
	if got := shop.headersOf(t, "/checkout/sneaker").Get("Tracestate"); got != tracestate {
		t.Errorf("the shop got tracestate %q, want %q", got, tracestate)
	}
	shop.provider.Shutdown(context.Background())
	// The shop's own spans arrive (the receiver works); none of edgeq's.
	spans := receiver.WaitFor(t, "the shop's spans", func(spans []otlptest.Span) bool {
		return slices.ContainsFunc(spans, func(s otlptest.Span) bool { return s.Service == "shop" && s.Name == "shop /products" })
	})
	for _, s := range spans {
		if s.Service != "shop" {
			t.Errorf("a span of %s arrived with tracing off: %q", s.Service, s.Name)
		}
	}
	logs := in.logs.String()
	if strings.Contains(logs, "trace_id") || strings.Contains(logs, "tracing on") {
		t.Errorf("tracing off, yet the log speaks of traces:\n%s", logs)
	}
	if !strings.Contains(logs, "tracing.exporter is empty: tracing is off") {
		t.Errorf("no warning about an endpoint without an exporter:\n%s", logs)
	}
}
