package proxy

// Tracing of requests and shop calls (docs/reference.md "Tracing"). Every function here runs only
// while tracing is on (Proxy.tracer set): with tracing off the proxy neither reads nor writes a
// traceparent header, and a visitor's passes to the shop untouched, as any other header does.

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/tracing"
	"github.com/edgeq/edgeq/internal/web"
)

// traceContext reads and writes W3C traceparent and tracestate headers.
var traceContext = propagation.TraceContext{}

// startTrace starts the request's server span: a child of the visitor's span when the request
// carries a valid traceparent (the visitor's trace continues through edgeq, as through any gateway),
// else the root of a new trace. Its name, route and status are set when the request ends (endTrace).
func (p *Proxy) startTrace(ctx context.Context, r *http.Request, info *web.Request) (context.Context, trace.Span) {
	ctx = traceContext.Extract(ctx, traceHeaders(r.Header))
	ctx, span := p.tracer.Start(ctx, "request", serverSpan...)
	if sc := span.SpanContext(); sc.IsSampled() {
		info.TraceID = sc.TraceID().String()
	}
	return ctx, span
}

// serverSpan are the request span's options, made once: most requests are not sampled, and their
// spans should cost as little as can be.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// endTrace names the request's span by its method and route, notes the answer and ends it. An answer
// of 5xx marks it failed; a refusal (4xx) is the gate working, not a failure.
func endTrace(span trace.Span, r *http.Request, info *web.Request, status int) {
	if !span.IsRecording() {
		span.End()
		return
	}
	method := spanMethod(r.Method)
	span.SetName(method + " " + info.Route)
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method), semconv.HTTPRoute(info.Route), tracing.Route.String(info.Route),
		semconv.HTTPResponseStatusCode(status), semconv.URLScheme(scheme(info.Secure)),
	}
	if info.Code != "" {
		attrs = append(attrs, tracing.Code.String(info.Code))
	}
	span.SetAttributes(attrs...)
	if status >= 500 && status != StatusClientClosed {
		span.SetStatus(codes.Error, strconv.Itoa(status))
	}
	span.End()
}

// spanMethod is a request's method as spans show it: one of HTTP's, or _OTHER (the semantic
// conventions' name for the rest: a method is the client's text).
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

func scheme(secure bool) string {
	if secure {
		return "https"
	}
	return "http"
}

// forwardTraced forwards r in a client span of the shop call, with the connection's steps (connect,
// TLS handshake, the request written, the first byte of the answer) as its events. A request whose
// trace is not recorded makes no span: the shop gets the request span's context, marked not sampled.
func (p *Proxy) forwardTraced(w http.ResponseWriter, r *http.Request, o *web.Outcome) {
	if !trace.SpanFromContext(r.Context()).IsRecording() {
		p.reverse.ServeHTTP(w, r)
		return
	}
	method := spanMethod(r.Method)
	ctx, span := p.tracer.Start(r.Context(), "shop "+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method),
			tracing.Route.String(web.RequestFrom(r.Context()).Route)))
	defer span.End()
	ctx = httptrace.WithClientTrace(ctx, shopCallTrace(span))
	p.reverse.ServeHTTP(w, r.WithContext(ctx))
	switch {
	case o == nil:
	case o.Status != 0:
		span.SetAttributes(semconv.HTTPResponseStatusCode(o.Status))
		if o.Status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(o.Status))
		}
	case o.Fenced:
		span.SetAttributes(semconv.ErrorTypeKey.String("fenced"))
		span.SetStatus(codes.Error, "not sent: the replica's lease lapsed")
	case o.TransportError:
		span.SetAttributes(semconv.ErrorTypeKey.String("no_answer"))
		span.SetStatus(codes.Error, "no answer from the shop")
	}
}

// propagate gives the shop's request the trace context of the shop call's span, so the shop's own
// spans are its children: traceparent (and tracestate) replace whatever the visitor sent, which is
// the server span's parent, not the shop's.
func propagate(pr *httputil.ProxyRequest) {
	ctx := pr.Out.Context()
	delete(pr.Out.Header, "Traceparent")
	delete(pr.Out.Header, "Tracestate")
	traceContext.Inject(ctx, traceHeaders(pr.Out.Header))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := []attribute.KeyValue{semconv.ServerAddress(pr.Out.URL.Hostname())}
		if port, err := strconv.Atoi(pr.Out.URL.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(port))
		}
		span.SetAttributes(attrs...)
	}
}

// traceHeaders carries W3C trace context in a header map, by the headers' canonical keys: what
// propagation.HeaderCarrier does, without canonicalizing the name on every call.
type traceHeaders http.Header

func (h traceHeaders) Get(key string) string {
	if v := h[canonicalTraceKey(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h traceHeaders) Set(key, value string) { h[canonicalTraceKey(key)] = []string{value} }

func (h traceHeaders) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

func canonicalTraceKey(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	}
	return http.CanonicalHeaderKey(key)
}

// traceID is the trace id of r's request for an exemplar: "" with tracing off.
func (p *Proxy) traceID(r *http.Request) string {
	if p.tracer == nil {
		return ""
	}
	return web.RequestFrom(r.Context()).TraceID
}

// shopCallTrace records the connection's steps as events of span. Addresses are left out.
func shopCallTrace(span trace.Span) *httptrace.ClientTrace {
	failed := func(event string, err error) {
		span.AddEvent(event, trace.WithAttributes(semconv.ErrorTypeKey.String(errorKind(err))))
	}
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			span.AddEvent("connection", trace.WithAttributes(attribute.Bool("reused", info.Reused)))
		},
		ConnectStart: func(string, string) { span.AddEvent("connect") },
		ConnectDone: func(_, _ string, err error) {
			if err != nil {
				failed("connect failed", err)
				return
			}
			span.AddEvent("connected")
		},
		TLSHandshakeStart: func() { span.AddEvent("tls handshake") },
		TLSHandshakeDone: func(state tls.ConnectionState, err error) {
			if err != nil {
				failed("tls handshake failed", err)
				return
			}
			span.AddEvent("tls handshake done", trace.WithAttributes(semconv.TLSProtocolVersion(tlsVersion(state.Version))))
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				failed("request not written", info.Err)
				return
			}
			span.AddEvent("request written")
		},
		GotFirstResponseByte: func() { span.AddEvent("first byte") },
	}
}

func errorKind(err error) string {
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "timeout"
	}
	return "error"
}

func tlsVersion(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "1.3"
	case tls.VersionTLS12:
		return "1.2"
	}
	return "other"
}
