package proxy

// The short path's connections to the origin: an idle pool per origin address (a connection is
// reused only if nothing arrived on it while idle, and closes after the idle timeout), one exchange
// on a connection (the request written, the answer's header read within its size limit and the
// response-header timeout, informational answers passed on), and the answer's body, which returns
// the connection to the pool once read to the end.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/web"
)

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
		_ = c.conn.Close()
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.ConnectStart != nil {
		trace.ConnectStart("tcp", addr)
	}
	conn, err := t.dial(ctx, "tcp", addr)
	if trace != nil && trace.ConnectDone != nil {
		trace.ConnectDone("tcp", addr, err)
	}
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
		_ = c.conn.Close()
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
	_ = c.conn.Close()
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

// roundTrip writes req on c and reads the answer's header, telling trace (nil: none) as net/http's
// Transport tells a ClientTrace. early reports a failure before any byte of an answer arrived (a stale
// pooled connection, when c was reused).
func (c *originConn) roundTrip(req *http.Request, t *Transport, o *web.Outcome, trace *httptrace.ClientTrace) (resp *http.Response, early bool, err error) {
	stop := context.AfterFunc(req.Context(), func() { _ = c.conn.Close() })
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
	if o != nil {
		o.MarkSent()
	}
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	if t.headerTimeout > 0 {
		_ = c.conn.SetReadDeadline(time.Now().Add(t.headerTimeout))
	}
	c.limit.n = maxResponseHeaderBytes
	if _, err := c.br.Peek(1); err != nil {
		err = timeoutError(err)
		var timeout headerTimeoutError
		if !errors.As(err, &timeout) {
			return nil, true, err
		}
		// The timer fired. After a pause of this process (a stop, a frozen VM) the timer and the
		// answer are ready at once, and the poller reports the timer: look at the socket once more
		// before calling it a timeout, so an answer already there is read (docs/reference.md
		// "Admission outcomes").
		_ = c.conn.SetReadDeadline(time.Now().Add(lateAnswerWait))
		if _, err := c.br.Peek(1); err != nil {
			return nil, false, timeout
		}
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
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
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, false, err
			}
		}
	}
	c.limit.n = -1
	if t.headerTimeout > 0 {
		_ = c.conn.SetReadDeadline(time.Time{})
	}
	keep := !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		if stop() && keep && c.br.Buffered() == 0 {
			t.put(c)
		} else {
			_ = c.conn.Close()
		}
		return resp, false, nil
	}
	resp.Body = &originBody{body: resp.Body, c: c, t: t, ctx: req.Context(), stop: stop, keep: keep}
	return resp, false, nil
}

// lateAnswerWait is how long a timed-out request's connection is read once more: long enough for a
// read of what the kernel already holds, short enough to add nothing to a real timeout.
const lateAnswerWait = 5 * time.Millisecond

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
	_ = b.c.conn.Close()
}
