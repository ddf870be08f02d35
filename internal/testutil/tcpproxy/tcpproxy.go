// Package tcpproxy is a TCP proxy on loopback for tests that inject network faults between two
// processes without touching either of them: latency (a replica in another zone) and partitions (Cut,
// then Restore).
//
// The proxy reads what each side sends as soon as it arrives and queues it with the time it was read;
// a writer per direction delivers the queue in order once each chunk is old enough and the link is not
// cut. Reading never waits for the delay, so the delay is latency, not a bandwidth cap, and a Cut holds
// bytes rather than losing them, as a network that drops packets holds them in the sender's
// retransmission queue until it heals.
package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// maxQueued is how many bytes one direction of one connection may hold before the proxy stops reading
// from the sender, so that a long Cut under a steady writer cannot eat the test's memory. It is far
// above what a test moves in one delay, so it never limits throughput in practice.
const maxQueued = 64 << 20

// readSize is the largest chunk one read takes from a socket.
const readSize = 64 << 10

// Proxy forwards every connection accepted on its loopback address to one target address.
type Proxy struct {
	target   string
	listener net.Listener
	// dialCtx is cancelled by Close, to end a dial to the target that is under way.
	dialCtx    context.Context
	cancelDial context.CancelFunc
	// wg counts every goroutine the proxy started; Close waits for it, so nothing outlives Close.
	wg sync.WaitGroup

	mu     sync.Mutex
	delay  time.Duration
	cut    bool
	closed bool
	links  map[*link]struct{}
	// changed is closed, and replaced, whenever delay, cut or closed changes, to wake every goroutine
	// that waits on one of them.
	changed chan struct{}
}

// Start listens on a free loopback port and forwards each connection accepted there to target, with
// no delay until SetDelay.
func Start(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen on loopback: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: target, listener: l, dialCtx: ctx, cancelDial: cancel,
		links: map[*link]struct{}{}, changed: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the host:port the proxy listens on; connect there instead of to the target.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// SetDelay makes every chunk read from either side, from now on and already queued, reach the other
// side d after it was read. Chunks keep their order whatever the delay, so lowering it releases what
// waited under the higher one at once rather than letting later bytes overtake it.
func (p *Proxy) SetDelay(d time.Duration) {
	p.update(func() { p.delay = max(d, 0) })
}

// Cut partitions the link: from now on no byte read from either side is delivered to the other, and
// connections accepted during the Cut are not forwarded to the target yet. Nothing is closed or reset;
// what is read is held. A write the proxy had already begun when Cut was called still completes.
func (p *Proxy) Cut() {
	p.update(func() { p.cut = true })
}

// Restore ends a Cut: what was held is delivered in order (each chunk at once if it has waited longer
// than the delay), connections accepted during the Cut are forwarded, and new bytes flow again.
func (p *Proxy) Restore() {
	p.update(func() { p.cut = false })
}

// Conns is the number of connections the proxy holds open now (accepted and not yet closed on both
// sides).
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, closes every connection on both sides (dropping what is still queued) and
// returns once every goroutine of the proxy has ended. Later calls do nothing.
func (p *Proxy) Close() error {
	var links []*link
	already := false
	p.update(func() {
		already = p.closed
		p.closed = true
		// Taken with closed set under the same lock: accept adds no link after this.
		for l := range p.links {
			links = append(links, l)
		}
	})
	if already {
		return nil
	}
	err := p.listener.Close()
	p.cancelDial()
	for _, l := range links {
		l.shutdown()
	}
	p.wg.Wait()
	return err
}

// update changes the proxy's state under its lock and wakes whoever waits for a change.
func (p *Proxy) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait for some to be freed rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		l := &link{p: p, client: c, done: make(chan struct{}), up: newQueue(), down: newQueue()}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.run()
	}
}

// waitDue waits until a chunk read at read may be delivered: the link is not cut and the delay has
// passed since read. It returns false if done is closed first.
func (p *Proxy) waitDue(read time.Time, done <-chan struct{}) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		cut, delay, changed := p.cut, p.delay, p.changed
		p.mu.Unlock()
		var fire <-chan time.Time
		if !cut {
			wait := time.Until(read.Add(delay))
			if wait <= 0 {
				return true
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			fire = timer.C
		}
		select {
		case <-fire:
		case <-changed:
		case <-done:
			return false
		}
	}
}

// waitRestored waits until the link is not cut; false if done is closed first.
func (p *Proxy) waitRestored(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		cut, changed := p.cut, p.changed
		p.mu.Unlock()
		if !cut {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

// link is one proxied connection: the client the proxy accepted and the server it dialed for it.
type link struct {
	p      *Proxy
	client net.Conn
	server net.Conn // set under p.mu once dialed; nil before
	// done is closed by shutdown: every goroutine of the link stops waiting and returns.
	done     chan struct{}
	shutOnce sync.Once
	stopped  bool   // under p.mu: shutdown has run, a server dialed late must be closed at once
	up, down *queue // client to server, server to client
}

// run forwards one connection until both directions have finished or either side failed, then closes
// both sides and forgets the link.
func (l *link) run() {
	p := l.p
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	defer l.shutdown()

	// The client's bytes are read (and held) from the start, as the client's kernel would send them
	// whether or not anything passes.
	p.wg.Add(1)
	go l.read(l.client, l.up)

	// A connection accepted during a Cut reaches the target only once the link is back, as a SYN
	// dropped by the network would.
	if !p.waitRestored(l.done) {
		return
	}
	var d net.Dialer
	server, err := d.DialContext(p.dialCtx, "tcp", p.target)
	if err != nil {
		return // the client sees its connection closed, as it would see a refused one reset
	}
	p.mu.Lock()
	if l.stopped {
		p.mu.Unlock()
		_ = server.Close()
		return
	}
	l.server = server
	p.mu.Unlock()

	p.wg.Add(1)
	go l.read(server, l.down)
	var writers sync.WaitGroup
	writers.Add(2)
	for _, dir := range []struct {
		q   *queue
		dst net.Conn
	}{{l.up, server}, {l.down, l.client}} {
		go func() {
			defer writers.Done()
			if !l.write(dir.q, dir.dst) {
				l.shutdown()
			}
		}()
	}
	writers.Wait()
}

// shutdown closes both sides of the link and wakes its goroutines. It is safe to call more than once.
func (l *link) shutdown() {
	l.shutOnce.Do(func() {
		close(l.done)
		_ = l.client.Close()
		l.p.mu.Lock()
		l.stopped = true
		server := l.server
		l.p.mu.Unlock()
		if server != nil {
			_ = server.Close()
		}
	})
}

// read moves what src sends into q, stamped with the time it was read, and marks the end of the stream
// when src stops sending (EOF, or an error such as a reset).
func (l *link) read(src net.Conn, q *queue) {
	defer l.p.wg.Done()
	buf := make([]byte, readSize)
	for {
		n, err := src.Read(buf)
		now := time.Now()
		if n > 0 {
			data := make([]byte, n)
			copy(data, buf[:n])
			if !q.push(chunk{data: data, read: now}, l.done) {
				return
			}
		}
		if err != nil {
			q.push(chunk{read: now}, l.done)
			return
		}
	}
}

// write delivers q to dst in order, each chunk when it is due, and closes dst's write half after the
// end of the stream, itself delayed like a FIN would be. It returns true when the stream ended that
// way, false when the link was shut down or writing to dst failed.
func (l *link) write(q *queue, dst net.Conn) bool {
	for {
		first, ok := q.head(l.done)
		if !ok {
			return false
		}
		if !l.p.waitDue(first.read, l.done) {
			return false
		}
		l.p.mu.Lock()
		cut, delay := l.p.cut, l.p.delay
		l.p.mu.Unlock()
		if cut { // cut since waitDue looked
			continue
		}
		bufs, end := q.takeDue(delay)
		if len(bufs) > 0 {
			if _, err := bufs.WriteTo(dst); err != nil {
				return false
			}
		}
		if end {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			return true
		}
	}
}

// chunk is what one read returned, or, with nil data, the end of the stream.
type chunk struct {
	data []byte
	read time.Time
}

// queue is one direction of one link: chunks read and not yet written, oldest first.
type queue struct {
	mu     sync.Mutex
	chunks []chunk
	bytes  int
	added  chan struct{} // holds a token when a chunk was added since the writer last looked
	taken  chan struct{} // holds a token when chunks were taken since the reader last looked
}

func newQueue() *queue {
	return &queue{added: make(chan struct{}, 1), taken: make(chan struct{}, 1)}
}

// push appends c and then, if the queue holds more than maxQueued bytes, waits until the writer takes
// some; false if done is closed while waiting.
func (q *queue) push(c chunk, done <-chan struct{}) bool {
	q.mu.Lock()
	q.chunks = append(q.chunks, c)
	q.bytes += len(c.data)
	q.mu.Unlock()
	signal(q.added)
	for {
		q.mu.Lock()
		full := q.bytes > maxQueued
		q.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-q.taken:
		case <-done:
			return false
		}
	}
}

// head waits for the oldest chunk and returns it without taking it; false if done is closed first.
func (q *queue) head(done <-chan struct{}) (chunk, bool) {
	for {
		q.mu.Lock()
		if len(q.chunks) > 0 {
			c := q.chunks[0]
			q.mu.Unlock()
			return c, true
		}
		q.mu.Unlock()
		select {
		case <-q.added:
		case <-done:
			return chunk{}, false
		}
	}
}

// takeDue takes the oldest chunk, which the caller has found due, and every chunk after it that is due
// under delay as well, up to the end of the stream; end reports that the end was taken.
func (q *queue) takeDue(delay time.Duration) (bufs net.Buffers, end bool) {
	q.mu.Lock()
	now := time.Now()
	n := 0
	for n < len(q.chunks) && (n == 0 || !now.Before(q.chunks[n].read.Add(delay))) {
		c := q.chunks[n]
		n++
		if c.data == nil {
			end = true
			break
		}
		bufs = append(bufs, c.data)
		q.bytes -= len(c.data)
	}
	clear(q.chunks[:n]) // let the taken data be collected
	q.chunks = q.chunks[n:]
	q.mu.Unlock()
	signal(q.taken)
	return bufs, end
}

// signal leaves a token in a channel of capacity 1 unless one is there already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
