package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
	return &Transport{
		std: std, dial: originDialer().DialContext, headerTimeout: responseHeaderTimeout,
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
			c.conn.Close()
		}
	}
	t.std.CloseIdleConnections()
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !shortPath(req) {
		return t.std.RoundTrip(req)
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	if req.Body != nil && req.Body != http.NoBody {
		buf := shortBodies.Get().(*[maxShortBody]byte)
		defer shortBodies.Put(buf)
		var err error
		if req, err = readShortBody(req, buf); err != nil {
			return nil, err
		}
	}
	ctx := req.Context()
	for {
		c, reused, err := t.get(ctx, addr)
		if err != nil {
			if req.Body != nil {
				req.Body.Close() // a RoundTripper closes the body, even on errors
			}
			return nil, err
		}
		resp, early, err := c.roundTrip(req, t)
		if err == nil {
			return resp, nil
		}
		c.conn.Close()
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
	req.Body.Close()
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

// originConn is one keep-alive connection of the short path, used by one request at a time.
type originConn struct {
	addr   string
	conn   net.Conn
	limit  headerLimit // between conn and br: bounds the size of an answer's header
	br     *bufio.Reader
	bw     *bufio.Writer
	probe  *idleProbe  // has anything arrived while it was idle?
	idle   *time.Timer // closes the connection when it stays idle for the idle timeout
	pooled bool        // in the idle pool (guarded by Transport.mu)
}

// get returns an idle connection to addr (reused true) or a new one. A pooled connection is used only
// if nothing arrived on it while it was idle: neither the origin's close nor bytes nobody asked for
// (a late or unsolicited answer, a 408 before a close) may be read as the next request's answer.
func (t *Transport) get(ctx context.Context, addr string) (*originConn, bool, error) {
	for {
		t.mu.Lock()
		conns := t.idle[addr]
		if len(conns) == 0 {
			t.mu.Unlock()
			break
		}
		c := conns[len(conns)-1]
		conns[len(conns)-1] = nil
		t.idle[addr] = conns[:len(conns)-1]
		c.pooled = false
		// A timer that fired meanwhile finds c out of the pool and leaves it; one that fired so long
		// ago that c is back in the pool by the time it runs only closes c early.
		c.idle.Stop()
		t.mu.Unlock()
		if c.probe.isQuiet() {
			return c, true, nil
		}
		c.conn.Close()
	}
	conn, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c := &originConn{addr: addr, conn: conn, probe: newIdleProbe(conn)}
	c.limit.r = conn
	c.br, c.bw = bufio.NewReaderSize(&c.limit, 4<<10), bufio.NewWriterSize(conn, 4<<10)
	c.idle = time.AfterFunc(time.Hour, func() { t.expire(c) })
	c.idle.Stop()
	return c, false, nil
}

// put returns c to the pool, or closes it when the pool is full.
func (t *Transport) put(c *originConn) {
	t.mu.Lock()
	if len(t.idle[c.addr]) >= t.maxIdle {
		t.mu.Unlock()
		c.conn.Close()
		return
	}
	t.idle[c.addr] = append(t.idle[c.addr], c)
	c.pooled = true
	c.idle.Reset(t.idleTimeout)
	t.mu.Unlock()
}

// expire closes c, idle for the idle timeout, unless a request took it meanwhile.
func (t *Transport) expire(c *originConn) {
	t.mu.Lock()
	if !c.pooled {
		t.mu.Unlock()
		return
	}
	conns := t.idle[c.addr]
	if i := slices.Index(conns, c); i >= 0 {
		t.idle[c.addr] = slices.Delete(conns, i, i+1)
	}
	c.pooled = false
	t.mu.Unlock()
	c.conn.Close()
}

// headerLimit bounds what is read from the connection while an answer's header is read (net/http's
// Transport stops at MaxResponseHeaderBytes too): an origin that sends an endless header gets 502
// instead of the proxy's memory. n < 0: no limit (the body is read).
type headerLimit struct {
	r io.Reader
	n int64
}

var errHeaderTooLarge = fmt.Errorf("origin answered with more than %d bytes of header", maxResponseHeaderBytes)

// maxResponseHeaderBytes is net/http's default limit.
const maxResponseHeaderBytes = 10 << 20

func (l *headerLimit) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// maxInformational bounds the 1xx answers read before the real one.
const maxInformational = 8

// roundTrip writes req on c and reads the answer's header. early reports a failure before any byte of
// an answer arrived (a stale pooled connection, when c was reused).
func (c *originConn) roundTrip(req *http.Request, t *Transport) (resp *http.Response, early bool, err error) {
	stop := context.AfterFunc(req.Context(), func() { c.conn.Close() })
	defer func() {
		if err != nil {
			stop()
		}
	}()
	if err := req.Write(c.bw); err != nil {
		return nil, true, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, true, err
	}
	if t.headerTimeout > 0 {
		c.conn.SetReadDeadline(time.Now().Add(t.headerTimeout))
	}
	c.limit.n = maxResponseHeaderBytes
	if _, err := c.br.Peek(1); err != nil {
		err = timeoutError(err)
		var timeout headerTimeoutError
		return nil, !errors.As(err, &timeout), err
	}
	for n := 0; ; n++ {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return nil, false, timeoutError(err)
		}
		code := resp.StatusCode
		if code >= 200 {
			break
		}
		if code == http.StatusSwitchingProtocols || n == maxInformational {
			return nil, false, fmt.Errorf("origin answered %d to a request without an upgrade", code)
		}
		// 1xx informational (103 Early Hints): passed on through the trace ReverseProxy installs.
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, false, err
			}
		}
	}
	c.limit.n = -1
	if t.headerTimeout > 0 {
		c.conn.SetReadDeadline(time.Time{})
	}
	keep := !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		if stop() && keep && c.br.Buffered() == 0 {
			t.put(c)
		} else {
			c.conn.Close()
		}
		return resp, false, nil
	}
	resp.Body = &originBody{body: resp.Body, c: c, t: t, ctx: req.Context(), stop: stop, keep: keep}
	return resp, false, nil
}

// headerTimeoutError is what a response-header timeout returns, a net.Error whose Timeout is true (504).
type headerTimeoutError struct{ err error }

func (e headerTimeoutError) Error() string {
	return "timeout awaiting the origin's response headers: " + e.err.Error()
}
func (e headerTimeoutError) Unwrap() error { return e.err }
func (headerTimeoutError) Timeout() bool   { return true }
func (headerTimeoutError) Temporary() bool { return true }

func timeoutError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return headerTimeoutError{err}
	}
	return err
}

// originBody returns its connection to the pool once read to the end, and closes it otherwise.
type originBody struct {
	body io.ReadCloser
	c    *originConn
	t    *Transport
	ctx  context.Context
	stop func() bool
	keep bool
	done atomic.Bool
}

func (b *originBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
		if e := b.ctx.Err(); e != nil {
			// The visitor left and its hang-up closed the connection: say so as net/http does
			// (ReverseProxy does not log a copy that ends with context.Canceled).
			err = e
		}
	}
	return n, err
}

func (b *originBody) Close() error {
	b.finish(false) // closed before its end: what is left is unread, so the connection cannot be reused
	return nil
}

// finish runs once: the connection goes back to the pool or is closed.
func (b *originBody) finish(atEnd bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	// stop is false when the visitor's hang-up already closed the connection.
	if b.stop() && atEnd && b.keep && b.c.br.Buffered() == 0 {
		b.t.put(b.c)
		return
	}
	b.c.conn.Close()
}
