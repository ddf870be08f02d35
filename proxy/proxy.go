// Package proxy is edgeq's public handler: it gives every request a correlation id and a trusted client
// address, strips what clients must not send, matches the route table (first match wins, no match
// passes through), runs the gate chain of the matched route and forwards to the origin with
// httputil.ReverseProxy.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/inflight"
	"github.com/edgeq/edgeq/internal/accesslog"
	"github.com/edgeq/edgeq/internal/graphql"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
)

// Options configures a Proxy.
type Options struct {
	Origin         *url.URL
	OriginTimeout  time.Duration  // until the origin's response headers
	Prefix         string         // server.prefix: requests below it go to Endpoints
	TrustedProxies []netip.Prefix // peers whose X-Forwarded-* headers are believed
	Endpoints      http.Handler   // edgeq's own public endpoints under Prefix
	Steps          []Step         // the gate chain, outermost first
	Responder      *web.Responder
	Metrics        *metrics.Metrics
	Logger         *slog.Logger
	Transport      http.RoundTripper // nil: NewTransport(OriginTimeout)
	// BodyTimeout bounds the time from a request's arrival to the end of its body (server.body_timeout);
	// 0: no bound.
	BodyTimeout time.Duration
	// Degraded reports whether the store counts as unavailable (store health); nil: never. While it
	// does, routes with on_store_error: open go to the origin without their gate chain.
	Degraded func() bool
	// InFlight enforces routes' max_in_flight (the last stage before forwarding); nil: routes that set
	// it are closed (503 GATE_UNAVAILABLE).
	InFlight *inflight.Limiter
	// MaxBodyBytes is server.max_body_bytes: the in-flight stage reads bodies up to it before taking a
	// slot.
	MaxBodyBytes int64
	// WriteTimeout is server.write_timeout: a client that takes nothing of an answer for this long is
	// cut off (writetimeout.go); 0: never.
	WriteTimeout time.Duration
	// SpoolBytes is server.spool_bytes: the longest answer of a max_in_flight route held in memory so
	// that its slot is free before the client has taken it (spool.go); 0: none is.
	SpoolBytes int64
	// Visitors gives out visitor ids while a route uses them (visitor.go); nil: never.
	Visitors *Visitors
	// Tracer makes the spans of requests and shop calls (tracing.go); nil: tracing is off, and
	// traceparent headers pass through untouched.
	Tracer trace.Tracer
}

// Proxy is the public http.Handler.
type Proxy struct {
	origin      *url.URL
	prefix      string
	trusted     trustedSet
	endpoints   http.Handler
	steps       []Step
	responder   *web.Responder
	metrics     *metrics.Metrics
	logger      *slog.Logger
	reverse     *httputil.ReverseProxy
	table       atomic.Pointer[Table]
	degraded    func() bool
	bodyTimeout time.Duration
	inflight    *inflight.Limiter
	visitors    *Visitors // nil: no visitor ids
	// maxBodyBytes: bodies up to this size are read before an in-flight slot is taken.
	maxBodyBytes int64
	writeTimeout time.Duration
	spool        *spooler
	// seen remembers the GraphQL documents clients sent with their hash, across reloads.
	seen *graphql.Seen
	// defaultPool is origin:'s; poolsInstalled wakes RunHealth when Use installs a table (pool.go).
	defaultPool    *pool
	poolsInstalled chan struct{}
	tracer         trace.Tracer // nil: tracing off

	passDuration, edgeqDuration prometheus.Observer
}

// New builds a proxy with an empty route table; Use installs one.
func New(opts Options) *Proxy {
	p := &Proxy{
		origin:       opts.Origin,
		prefix:       opts.Prefix,
		trusted:      trustedSet(opts.TrustedProxies),
		endpoints:    opts.Endpoints,
		steps:        opts.Steps,
		responder:    opts.Responder,
		metrics:      opts.Metrics,
		logger:       opts.Logger,
		degraded:     opts.Degraded,
		bodyTimeout:  opts.BodyTimeout,
		inflight:     opts.InFlight,
		visitors:     opts.Visitors,
		maxBodyBytes: opts.MaxBodyBytes,
		writeTimeout: opts.WriteTimeout,
		seen:         graphql.NewSeen(),
		tracer:       opts.Tracer,
	}
	buffers := NewBufferPool()
	p.spool = newSpooler(opts.SpoolBytes, buffers)
	if p.degraded == nil {
		p.degraded = func() bool { return false }
	}
	transport := opts.Transport
	if transport == nil {
		transport = NewTransport(opts.OriginTimeout)
	}
	p.reverse = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      transport,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.originError,
		// FlushInterval 0: ReverseProxy flushes responses without a Content-Length (chunked, SSE) after
		// every write, so streams reach the visitor as they arrive, and buffers the rest.
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
		// Reuse copy buffers: ReverseProxy otherwise allocates 32 KiB per request. Spooled answers
		// are held in the same buffers.
		BufferPool: buffers,
	}
	p.passDuration = opts.Metrics.HTTPDuration.WithLabelValues(metrics.RoutePassThrough)
	p.edgeqDuration = opts.Metrics.HTTPDuration.WithLabelValues(metrics.RouteEdgeq)
	p.table.Store(&Table{Missing: map[string][]string{}, pools: p.initPools(opts.Origin)})
	return p
}

// Use installs a compiled route table; requests already in flight finish on the old one.
func (p *Proxy) Use(t *Table) {
	p.table.Store(t)
	p.installed() // RunHealth checks the new table's pools
}

// CurrentTable returns the installed route table.
func (p *Proxy) CurrentTable() *Table { return p.table.Load() }

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	bodyDeadline(w, r, start, p.bodyTimeout)
	client, peerTrusted := p.trusted.clientAddress(r.RemoteAddr, r.Header.Values("X-Forwarded-For"))
	claimed := r.Header["Edgeq-Request-Id"] // an API client's place in line, read before it is stripped
	claimedToken := r.Header[tokenHeader]   // an app's edgeq token (beside the shop's Authorization), likewise
	claimedVisitor := r.Header[visitorHeader]
	stripClientHeaders(r.Header, peerTrusted)
	id := web.CorrelationID(r.Header)
	// One value slice for both maps (Header.Set allocates one per call); a full slice (cap 1) means an
	// Add to either copies it first.
	ids := []string{id}
	r.Header[correlationKey] = ids
	w.Header()[correlationKey] = ids
	info := web.NewRequest(p.logger, id)
	info.ClientIP, info.Secure = client, isHTTPS(r, peerTrusted)
	if len(claimed) == 1 && len(claimed[0]) <= 64 {
		info.ClaimedRequestID = claimed[0]
	}
	if len(claimedToken) == 1 && len(claimedToken[0]) <= maxTokenBytes {
		info.ClaimedToken = claimedToken[0]
	}
	info.Store.Degraded = p.degraded()
	ctx, span := r.Context(), trace.Span(nil) // span: nil while tracing is off
	if p.tracer != nil {
		ctx, span = p.startTrace(ctx, r, info) // the request's span, in the visitor's trace if it sent one
	}
	ctx = web.WithRequest(ctx, info)
	rec := &recorder{ResponseWriter: w, info: info, writeTimeout: p.writeTimeout}
	var duration prometheus.Observer
	defer func() {
		rec.finishDeadline()
		p.finish(rec, r, info, start, duration, span)
	}()

	// Before anything routes on the request, edgeq's own endpoints included.
	table := p.table.Load()
	p.identifyVisitor(rec, r, claimedVisitor, table)
	if e := checkRequest(r, table); e != nil {
		info.Route, duration = metrics.RouteEdgeq, p.edgeqDuration
		p.responder.Error(rec, r.WithContext(ctx), e)
		return
	}
	if r.URL.Path == p.prefix || strings.HasPrefix(r.URL.Path, p.prefix+"/") {
		info.Route, duration = metrics.RouteEdgeq, p.edgeqDuration
		p.endpoints.ServeHTTP(rec, r.WithContext(ctx))
		return
	}
	info.TrackOutcome()
	r = r.WithContext(ctx)
	route, routed, redirect, refused := table.lookup(r)
	if route == nil {
		info.Route, duration = p.passThrough(rec, r, table) // forwarded, or 421 for a host no route names
		return
	}
	// The route's store-outage policy, decided once here; every step reads it (web.StorePolicy).
	info.Route, duration = route.name, route.duration
	info.Store.Open, info.Store.Bypassed = route.open, route.bypass
	info.Refusal, info.RefusalStatus, info.GraphQL = route.refusal, route.refusalStatus, route.gql != nil
	if routed != nil {
		if m := graphql.MatchFrom(routed.Context()); m != nil {
			o := web.OutcomeFrom(ctx)
			a := o.KeepAnswer()
			a.FieldKey, a.Batch = m.ResponseKey(), m.Batch()
		}
	}
	switch {
	case refused != nil:
		// A graphql: route that cannot tell what the shop would execute: nothing reaches the shop.
		p.responder.Error(rec, routed, refused)
	case redirect != "":
		http.Redirect(rec, r, redirect, http.StatusTemporaryRedirect)
	case info.Store.Degraded && route.open:
		// on_store_error: open — availability over the gate while the store is down: no step could
		// use the store, so none runs.
		_ = info.StoreFailed("route", web.ErrDegraded) // counts the bypass; the route is open, so no error
		route.forward(rec, routed)
	default:
		// The route's mux sets r.Pattern and the path wildcards, then runs the gate chain.
		route.mux.ServeHTTP(rec, routed)
	}
}

// finish writes the access log line and the request metrics. It runs deferred, so it also covers a
// response aborted with http.ErrAbortHandler (the origin broke off mid-body).
func (p *Proxy) finish(rec *recorder, r *http.Request, info *web.Request, start time.Time, duration prometheus.Observer, span trace.Span) {
	elapsed := time.Since(start)
	status := rec.status
	if status == 0 {
		// Nothing was written: the handler panicked, or the client left before the answer.
		status = StatusClientClosed
		if r.Context().Err() == nil {
			status = http.StatusInternalServerError
		}
	}
	p.metrics.HTTPRequests.WithLabelValues(info.Route, metrics.StatusLabel(status)).Inc()
	if span != nil {
		endTrace(span, r, info, status)
	}
	metrics.Observe(duration, elapsed.Seconds(), info.TraceID)
	if !p.logger.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	accesslog.Log(r.Context(), p.logger, &accesslog.Line{
		Time:          start.Add(elapsed),
		CorrelationID: info.CorrelationID,
		Method:        web.ClipLog(r.Method),
		Path:          web.ClipLog(p.loggedPath(r.URL.Path)),
		Route:         info.Route,
		Status:        status,
		Bytes:         rec.bytes,
		DurationMS:    float64(elapsed.Microseconds()) / 1000,
		ClientIP:      info.ClientIP,
		TraceID:       info.TraceID,
	})
}

// correlationKey is CorrelationHeader as a key of a parsed header map.
var correlationKey = http.CanonicalHeaderKey(CorrelationHeader)

// loggedPath is a request's path as the access log shows it. A request id is a bearer credential
// (generate_token turns it into the visitor's token), so the one in {prefix}/status/{queue}/{id} and
// {prefix}/queue_pos/{queue}/{id} is logged as "{request_id}"; so is an invitation code, in
// {prefix}/invite/{queue}/{code}, logged as "{code}".
func (p *Proxy) loggedPath(path string) string {
	if strings.Contains(path, "//") || strings.Contains(path, "/.") {
		path = cleanPath(path) // the form ServeMux redirects "/_edgeq//status/..." to
	}
	rest, ok := strings.CutPrefix(path, p.prefix+"/")
	if !ok {
		return path
	}
	for _, endpoint := range []struct{ path, secret string }{
		{"status/", "{request_id}"}, {"queue_pos/", "{request_id}"}, {"invite/", "{code}"},
	} {
		if tail, ok := strings.CutPrefix(rest, endpoint.path); ok {
			if queue, _, found := strings.Cut(tail, "/"); found {
				return p.prefix + "/" + endpoint.path + queue + "/" + endpoint.secret
			}
		}
	}
	return path
}

// StatusClientClosed is logged (never sent: nobody is listening) when the visitor left before the
// origin answered, after nginx's convention. It is not an origin fault.
const StatusClientClosed = 499

// forward sends r to the origin.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	o := web.OutcomeFrom(r.Context())
	if o != nil {
		o.Forwarded = true
		o.Started = time.Now()
		if r.Body != nil && r.Body != http.NoBody {
			// Remember a failure to read the visitor's body (a malformed chunk, a client that stops
			// mid-body), so it is answered as the visitor's error and not blamed on the origin.
			o.Body = &web.BodyWatch{ReadCloser: r.Body}
			r.Body = o.Body
		}
	}
	if p.tracer != nil {
		p.forwardTraced(w, r, o) // in a span of the shop call (tracing.go)
		return
	}
	p.reverse.ServeHTTP(w, r)
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	o := web.OutcomeFrom(pr.In.Context())
	pr.SetURL(p.targetOf(o)) // origin:, or the server of the route's pool (pool.go)
	// Keep the Host the visitor asked for, so the shop builds its own links as it would without edgeq;
	// X-Forwarded-Host says the same for shops that read it.
	pr.Out.Host = pr.In.Host
	info := web.RequestFrom(pr.In.Context())
	_, peerTrusted := p.trusted.clientAddress(pr.In.RemoteAddr, nil)

	// Rewrite starts with Forwarded and X-Forwarded-For/-Host/-Proto removed. Keep a trusted proxy's
	// chain and append the peer; from anyone else, start a new chain with the peer. Forwarded (RFC
	// 7239) is kept from a trusted proxy only, with the peer appended the same way; edgeq does not
	// start one.
	// One backing array for the three X-Forwarded-* values (each header gets its own one-value slice
	// of it): Header.Set allocates a slice per call, and this runs on every request.
	vals := make([]string, 3)
	peer := parsePeer(pr.In.RemoteAddr)
	if peer.IsValid() {
		vals[0] = withHop(peerTrusted, pr.In.Header.Values("X-Forwarded-For"), peer.String())
		pr.Out.Header["X-Forwarded-For"] = vals[0:1:1]
		if prior := pr.In.Header.Values("Forwarded"); peerTrusted && len(prior) > 0 {
			pr.Out.Header.Set("Forwarded", withHop(true, prior, "for="+forwardedNode(peer)))
		}
	}
	proto := "http"
	if info.Secure {
		proto = "https"
	}
	vals[1] = proto
	pr.Out.Header["X-Forwarded-Proto"] = vals[1:2:2]
	host := pr.In.Host
	if fh := pr.In.Header.Get("X-Forwarded-Host"); peerTrusted && fh != "" {
		host = fh
	}
	vals[2] = host
	pr.Out.Header["X-Forwarded-Host"] = vals[2:3:3]
	stripEdgeqCookies(pr.Out.Header)
	if o != nil && o.WantsAnswer() {
		acceptGzipOnly(pr.Out.Header)
	}
	// The Edgeq-* headers on In are the gates' own (the client's were stripped on arrival), and the
	// correlation id is edgeq's. Put them back: a client naming them in its Connection header had them
	// removed as hop-by-hop headers.
	for name, values := range pr.In.Header {
		if strings.HasPrefix(name, edgeqHeaderPrefix) || name == correlationKey {
			pr.Out.Header[name] = values
		}
	}
	if p.tracer != nil {
		propagate(pr) // the shop's request carries the trace context of the shop call's span
	}
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	if o := web.OutcomeFrom(resp.Request.Context()); o != nil {
		metrics.Observe(p.metrics.OriginDuration, time.Since(o.Started).Seconds(), p.traceID(resp.Request))
		o.Status = resp.StatusCode
		// Clipped: an unknown command is logged, and only "complete" and "abandon" mean anything.
		o.Command = web.ClipLog(resp.Header.Get(web.CommandHeader))
		o.MarkAnswered()
		p.serverAnswered(o, resp.StatusCode)
		if o.WantsAnswer() {
			p.keepAnswer(resp, o.Answer)
		}
	}
	resp.Header.Del(web.CommandHeader)
	allowClientHeader(resp, tokenHeader)
	p.allowVisitorHeader(resp)
	if s := slotFrom(resp.Request.Context()); s != nil {
		p.spoolAnswer(resp, s) // a max_in_flight route's slot is free once the shop's answer is in
	}
	return nil
}

// originError maps a failed round trip to an answer: 504 when the origin was too slow, 499 (logged
// only) when the visitor left, 502 otherwise.
func (p *Proxy) originError(w http.ResponseWriter, r *http.Request, err error) {
	var bodyErr error
	if o := web.OutcomeFrom(r.Context()); o != nil {
		metrics.Observe(p.metrics.OriginDuration, time.Since(o.Started).Seconds(), p.traceID(r))
		o.TransportError = true
		o.MarkAnswered()
		if o.Body != nil {
			bodyErr = o.Body.Err()
		}
	}
	p.serverFailed(r, err, bodyErr)
	logger := web.RequestFrom(r.Context()).Logger()
	var netErr net.Error
	switch {
	case errors.Is(err, web.ErrFenced):
		// An admitted request whose replica may have been paused past its lease: the sweeper of another
		// replica may have given its units back, so it never reaches the shop (docs/reference.md
		// "Failover"). The admission gives the unit back if the sweeper has not.
		if o := web.OutcomeFrom(r.Context()); o != nil {
			o.Fenced = true
		}
		p.metrics.OriginErrors.WithLabelValues(metrics.OriginFenced).Inc()
		logger.Warn("an admitted request was not sent: the replica's lease lapsed since its admission (a pause?)")
		p.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
	case bodyErr != nil:
		// Not the origin's fault: the visitor's body could not be read to the end. A body over 4 KiB
		// was streaming to the origin, which sees a request whose body broke off and discards it; a
		// smaller one is read before the origin is contacted (transport.go), so it saw nothing.
		logger.Info("request body unreadable; the origin got a truncated request", "error", web.ClipErr(bodyErr))
		p.responder.Error(w, r, web.ErrMalformedBody.Because(bodyErr))
	case r.Context().Err() != nil && errors.Is(err, context.Canceled):
		p.metrics.OriginErrors.WithLabelValues(metrics.OriginClientGone).Inc()
		// The error names the origin URL, so the visitor's path: clipped.
		logger.Info("client left before the origin answered", "error", web.ClipErr(err))
		w.WriteHeader(StatusClientClosed)
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		p.metrics.OriginErrors.WithLabelValues(metrics.OriginTimeout).Inc()
		p.responder.Error(w, r, web.ErrOriginTimeout.Because(err))
	default:
		p.metrics.OriginErrors.WithLabelValues(metrics.OriginUnavailable).Inc()
		p.responder.Error(w, r, web.ErrOriginUnavailable.Because(err))
	}
}
