package proxy

// The transport to the origin: Transport, which sends a request that may take the short path
// (shortPath) itself and every other through net/http's Transport with the same settings. The short
// path's connections, their pool and their answers are in originconn.go.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/web"
)

// Transport is the round tripper to the origin. Requests to a plain-HTTP origin without a body or
// with a small one of known length — most of a shop's traffic: every gated page view, and the form
// and JSON posts of add-to-cart, checkout and bids — take a short path: the calling goroutine writes
// the request on a pooled keep-alive connection and reads the answer itself. net/http's Transport
// hands each request to two goroutines per connection (a writer and a reader) and back through
// channels; on the proxy's hot path those hand-offs cost more than the HTTP work. Everything else —
// larger or chunked bodies, Expect: 100-continue, upgrades, HTTPS origins, HTTP/2 — goes through
// net/http's Transport unchanged, with the same timeouts.
//
// The short path keeps net/http's rules where they matter: requests are written by Request.Write and
// answers read by http.ReadResponse, headers at most 10 MiB; a connection is reused only after its
// answer was read to the end with nothing left over and neither side asked to close, and only if
// nothing arrived on it while it was idle (net/http's reader goroutine watches idle connections; here
// one non-blocking peek before use does); idle connections close after the idle timeout; a pooled
// connection the origin closes as the request goes out is noticed before any byte of an answer and a
// GET or HEAD (idempotent) is sent once more, any other method is not (net/http's Transport does not
// send a POST twice either); a body, at most maxShortBody bytes, is read from the visitor first and
// goes out with the header in one write (readShortBody), which the connection's send buffer takes
// whole, so an origin that answers before reading it (a 413) cannot block the write, and its answer
// is read as usual; informational answers (103 Early Hints)
// reach the visitor through the ClientTrace ReverseProxy installs; the response-header timeout
// (origin.timeout) and the visitor's hang-up (the request's context) close the connection.
type Transport struct {
	std           *http.Transport
	dial          func(ctx context.Context, network, addr string) (net.Conn, error) // the short path's
	headerTimeout time.Duration
	idleTimeout   time.Duration
	maxIdle       int // per origin address

	mu   sync.Mutex
	idle map[string][]*originConn // by "host:port"; most recently used last
}

// NewTransport is the transport to the origin. Every timeout is explicit: a gateway in front of a shop
// under a traffic spike must not pile up connections to an origin that stopped answering.
func NewTransport(responseHeaderTimeout time.Duration) *Transport {
	std := NewHTTPTransport(responseHeaderTimeout)
	// A failed dial is the proof that nothing of a request reached a server of a pool (retry.go).
	std.DialContext = markDialErrors(std.DialContext)
	return &Transport{
		std: std, dial: markDialErrors(originDialer().DialContext), headerTimeout: responseHeaderTimeout,
		idleTimeout: std.IdleConnTimeout, maxIdle: std.MaxIdleConnsPerHost,
		idle: map[string][]*originConn{},
	}
}

func originDialer() *net.Dialer {
	return &net.Dialer{
		Timeout:   5 * time.Second,  // a reachable origin accepts in milliseconds; more is an outage
		KeepAlive: 30 * time.Second, // notice dead peers on idle pooled connections
	}
}

// NewHTTPTransport is net/http's Transport with edgeq's settings: what Transport uses for every
// request off its short path (and what benchmarks compare a bare ReverseProxy with).
func NewHTTPTransport(responseHeaderTimeout time.Duration) *http.Transport {
	return &http.Transport{
		// Never route origin traffic through an HTTP_PROXY from the environment.
		Proxy:                 nil,
		DialContext:           originDialer().DialContext,
		TLSHandshakeTimeout:   10 * time.Second,      // a stuck handshake otherwise holds a connection forever
		ResponseHeaderTimeout: responseHeaderTimeout, // origin.timeout: 504 ORIGIN_TIMEOUT after it
		ExpectContinueTimeout: time.Second,           // send the body anyway if the origin ignores Expect
		IdleConnTimeout:       90 * time.Second,      // below common origin keep-alive limits
		// Spikes are the point: keep many warm connections instead of Go's default of 2 per host.
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		ForceAttemptHTTP2:   true,
		// Pass Accept-Encoding and compressed bodies through untouched instead of decompressing.
		DisableCompression: true,
	}
}

// CloseIdleConnections closes every idle connection of both paths.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*originConn{}
	for _, conns := range idle {
		for _, c := range conns {
			c.pooled = false
		}
	}
	t.mu.Unlock()
	for _, conns := range idle {
		for _, c := range conns {
			c.idle.Stop()
			_ = c.conn.Close()
		}
	}
	t.std.CloseIdleConnections()
}

// RoundTrip implements http.RoundTripper. A request with a fence (web.Fence: an admitted one) is
// written only if its fence holds immediately before: on the short path the check is the last thing
// before the write, in the writing goroutine; through net/http's Transport it is made when the
// connection is handed over (GotConn), and a connection whose request may not be written is closed
// before net/http's writer takes it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !shortPath(req) {
		return t.roundTripStd(req)
	}
	addr := shortAddr(req.URL)
	if req.Body != nil && req.Body != http.NoBody {
		buf := shortBodies.Get().(*[maxShortBody]byte)
		defer shortBodies.Put(buf)
		var err error
		if req, err = readShortBody(req, buf); err != nil {
			return nil, err
		}
	}
	ctx := req.Context()
	o := web.OutcomeFrom(ctx)
	// The ClientTrace of a traced shop call, and ReverseProxy's own (1xx answers): the short path
	// calls their hooks as net/http's Transport does.
	trace := httptrace.ContextClientTrace(ctx)
	var fence web.Fence
	if o != nil {
		fence = o.Fence
	}
	for {
		c, reused, err := t.get(ctx, addr)
		if err != nil {
			if next := redial(o, req, err); next != nil {
				req, addr = next, shortAddr(next.URL) // refused at connect: the next server of its pool
				continue
			}
			if req.Body != nil {
				_ = req.Body.Close() // a RoundTripper closes the body, even on errors
			}
			return nil, err
		}
		connected(o)
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: c.conn, Reused: reused})
		}
		if fence != nil && !fence.Holds() {
			t.put(c) // nothing was written on it
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, web.ErrFenced
		}
		resp, early, err := c.roundTrip(req, t, o, trace)
		if err == nil {
			return resp, nil
		}
		_ = c.conn.Close()
		if ctx.Err() != nil {
			// The visitor left: say so the way net/http does, for the error handler.
			return nil, fmt.Errorf("origin request: %w", ctx.Err())
		}
		if !(reused && early && (req.Method == http.MethodGet || req.Method == http.MethodHead)) {
			return nil, err
		}
		// A pooled connection the origin had closed while idle: nothing reached it that it answered.
		// Try again; a new connection cannot be stale, and the next attempt may use one.
	}
}

// roundTripStd sends a request through net/http's Transport, telling its outcome when it has one
// (web.Outcome: whether the whole request was written) and checking its fence when it has one.
func (t *Transport) roundTripStd(req *http.Request) (*http.Response, error) {
	o, fence := web.OutcomeFrom(req.Context()), web.FenceFrom(req.Context())
	pk := pickOf(o)
	several := pk != nil && len(pk.pool.servers) > 1 // a refused request may go to another server
	if fence == nil && (o == nil || !o.Settles) && !several {
		return t.std.RoundTrip(req)
	}
	if fence != nil && !fence.Holds() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, web.ErrFenced
	}
	var fenced atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			connected(o)
			if fence != nil && !fence.Holds() {
				// Closed before the writer has the request: nothing of it is sent. A pooled
				// connection is retried on another by net/http, which comes back here.
				fenced.Store(true)
				_ = info.Conn.Close()
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil && o != nil {
				o.MarkSent()
			}
		},
	}
	traced := httptrace.WithClientTrace(req.Context(), trace)
	var body *heldBody
	if several && req.Body != nil && req.Body != http.NoBody {
		body = &heldBody{ReadCloser: req.Body}
		req = req.WithContext(req.Context())
		req.Body = body
	}
	for {
		resp, err := t.std.RoundTrip(req.WithContext(traced))
		if err != nil && !fenced.Load() && (body == nil || !body.read.Load()) {
			if next := redial(o, req, err); next != nil {
				req = next // refused at connect: the next server of its pool
				body.reopen()
				continue
			}
		}
		body.finish()
		if err != nil && fenced.Load() {
			return nil, web.ErrFenced
		}
		return resp, err
	}
}

// shortAddr is the host:port the short path dials for a request URL.
func shortAddr(u *url.URL) string {
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "80")
	}
	return u.Host
}

// maxShortBody is the largest request body the short path sends: far below any socket send buffer,
// so writing it never waits for the origin to read.
const maxShortBody = 4 << 10

var shortBodies = sync.Pool{New: func() any { return new([maxShortBody]byte) }}

// readShortBody reads a short-path request's body (ContentLength bytes, at most maxShortBody) into
// buf, closes it, and returns a copy of req whose body is buf: net/http writes a body it knows to be
// in memory together with the header, in one write to the origin, where it flushes the header first
// for any other (one more system call per request). The visitor's body is read before the origin
// sees anything; a body that breaks off fails the round trip as it would have while being copied.
func readShortBody(req *http.Request, buf *[maxShortBody]byte) (*http.Request, error) {
	n, err := io.ReadFull(req.Body, buf[:req.ContentLength])
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	out := new(http.Request)
	*out = *req
	out.Body = io.NopCloser(bytes.NewReader(buf[:n]))
	return out, nil
}

// shortPath says whether req goes the short way: a plain-HTTP request without a body, or with one of
// a known length up to maxShortBody, without an upgrade or Expect, with header fields net/http's
// Transport would also accept.
func shortPath(req *http.Request) bool {
	if !shortPathAvailable || req.URL.Scheme != "http" || req.Method == http.MethodConnect || len(req.TransferEncoding) > 0 {
		return false
	}
	noBody := req.Body == nil || req.Body == http.NoBody
	switch {
	case noBody && req.ContentLength == 0:
	case !noBody && req.ContentLength > 0 && req.ContentLength <= maxShortBody &&
		req.Method != http.MethodGet && req.Method != http.MethodHead:
	default:
		return false
	}
	if _, up := req.Header["Upgrade"]; up {
		return false
	}
	if _, expect := req.Header["Expect"]; expect {
		return false
	}
	for k, vs := range req.Header {
		if !validFieldName(k) {
			return false
		}
		for _, v := range vs {
			if !validFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// validFieldName: an RFC 9110 token.
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			continue
		}
		return false
	}
	return true
}

// validFieldValue: no control characters other than horizontal tab (so no CR, LF or NUL).
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
