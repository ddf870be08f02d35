package proxy

// Moving a pool request to another server (docs/reference.md "Pools of shop servers"). A request
// that may have reached a shop server is never sent to another: not a checkout, not a GET, not a
// request of which a byte was written. The one proof that a server received nothing is that no
// connection to it was had: the dial failed (refused, unreachable, the connect timeout). Only then
// does the request go to the next server the pool gives it, and only while no connection to any
// server was had for it: a request that net/http or the short path sent again on a new connection
// after a kept-alive one broke may have reached the first server, and its second dial's failure
// proves nothing about the first.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/edgeq/edgeq/internal/web"
)

// dialError is a failure to connect to a server: nothing of the request was written.
type dialError struct{ err error }

func (e dialError) Error() string { return e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// markDialErrors makes a dial function's failures dialErrors.
func markDialErrors(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, dialError{err}
		}
		return conn, nil
	}
}

// redial returns req aimed at the next server of its pool when err says its server refused the
// connection and nothing of req may have reached any server; nil when req stays where it failed. The
// refusal counts against the server it leaves (passive check).
func redial(o *web.Outcome, req *http.Request, err error) *http.Request {
	pk := pickOf(o)
	var refused dialError
	if pk == nil || pk.connected.Load() || req.Context().Err() != nil || !errors.As(err, &refused) {
		return nil
	}
	from := pk.server
	from.inFlight.Add(-1)
	if !pk.choose() {
		// It ends at the server it failed at: pick.done and the error handler count it there.
		from.inFlight.Add(1)
		return nil
	}
	pk.pool.failed(from)
	out := new(http.Request)
	*out = *req
	u := *req.URL
	u.Host = pk.server.url.Host
	out.URL = &u
	return out
}

// connected records that req got a connection to its server: from now on it stays there.
func connected(o *web.Outcome) {
	if pk := pickOf(o); pk != nil && !pk.connected.Load() {
		pk.connected.Store(true)
	}
}

// heldBody keeps a request body open across attempts to connect. net/http closes a request's body
// when it cannot connect, and the next server needs it whole; it reads a body only once it has a
// connection, so a body that was never read is still whole.
type heldBody struct {
	io.ReadCloser
	read atomic.Bool

	mu          sync.Mutex
	closeWanted bool // net/http closed it before reading
	final       bool // no attempt follows: closes go through
}

func (b *heldBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

func (b *heldBody) Close() error {
	b.mu.Lock()
	if b.read.Load() || b.final {
		b.mu.Unlock()
		return b.ReadCloser.Close()
	}
	b.closeWanted = true
	b.mu.Unlock()
	return nil
}

// reopen readies a body no attempt read for the next attempt; nil is a request without one.
func (b *heldBody) reopen() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.closeWanted = false
	b.mu.Unlock()
}

// finish says no attempt follows, and closes the body if an attempt wanted it closed; nil is a
// request without one.
func (b *heldBody) finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.final = true
	wanted := b.closeWanted
	b.closeWanted = false
	b.mu.Unlock()
	if wanted {
		_ = b.ReadCloser.Close()
	}
}
