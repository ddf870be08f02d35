package tcpproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// server is a loopback TCP server for the tests: it runs handle on each connection and, on close,
// ends every connection and waits for its handlers, so that a goroutine count after close sees none.
type server struct {
	l        net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	accepted int
}

func startServer(t *testing.T, handle func(net.Conn)) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{l: l, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.accepted++
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
					c.Close()
				}()
				handle(c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *server) addr() string { return s.l.Addr().String() }

func (s *server) acceptedConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

func (s *server) close() {
	s.l.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func echo(c net.Conn) { io.Copy(c, c) }

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// readFull reads len(want) bytes within timeout and compares them with want.
func readFull(t *testing.T, c net.Conn, want string, timeout time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q: %v (got %q)", want, err, got)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// readNothing checks that nothing arrives on c for d.
func readNothing(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v during a cut; want nothing until the deadline", buf[:n], err)
	}
}

func TestForwards(t *testing.T) {
	srv := startServer(t, echo)
	p := startProxy(t, srv.addr())
	c := dial(t, p)
	start := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	readFull(t, c, "ping", 5*time.Second)
	if rtt := time.Since(start); rtt > time.Second {
		t.Errorf("round trip without delay took %s", rtt)
	}
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns = %d, want 1", n)
	}
}

func TestDelayRoundTrip(t *testing.T) {
	const delay = 100 * time.Millisecond
	srv := startServer(t, echo)
	p := startProxy(t, srv.addr())
	p.SetDelay(delay)
	c := dial(t, p)
	for i := range 3 {
		msg := "ping" + strconv.Itoa(i)
		start := time.Now()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		readFull(t, c, msg, 5*time.Second)
		rtt := time.Since(start)
		if rtt < 2*delay {
			t.Errorf("round trip took %s, want at least 2×%s", rtt, delay)
		}
		if rtt > 2*delay+time.Second {
			t.Errorf("round trip took %s, want about 2×%s", rtt, delay)
		}
	}
	// Lowering the delay applies at once.
	p.SetDelay(0)
	start := time.Now()
	c.Write([]byte("fast"))
	readFull(t, c, "fast", 5*time.Second)
	if rtt := time.Since(start); rtt >= 2*delay {
		t.Errorf("round trip after SetDelay(0) took %s", rtt)
	}
}

// TestOrder writes many small pieces through a delay that keeps changing and checks that the echo
// comes back byte for byte in order.
func TestOrder(t *testing.T) {
	srv := startServer(t, echo)
	p := startProxy(t, srv.addr())
	p.SetDelay(20 * time.Millisecond)
	c := dial(t, p)

	var want bytes.Buffer
	for i := range 3000 {
		fmt.Fprintf(&want, "%d,", i)
	}
	got := make(chan []byte, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		b := make([]byte, want.Len())
		n, _ := io.ReadFull(c, b)
		got <- b[:n]
	}()
	delays := []time.Duration{0, 30 * time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond}
	for i := range 3000 {
		if _, err := fmt.Fprintf(c, "%d,", i); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			p.SetDelay(delays[(i/500)%len(delays)])
		}
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // let the pieces go as separate chunks
		}
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("echo differs from what was sent: got %d bytes, want %d", len(b), want.Len())
	}
}

// TestThroughput checks that the delay is latency, not a bandwidth cap: 32 MiB through a 100ms delay
// take about 100ms plus the copying, not a delay per chunk.
func TestThroughput(t *testing.T) {
	const size = 32 << 20
	received := make(chan int, 1)
	srv := startServer(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received <- int(n)
	})
	p := startProxy(t, srv.addr())
	p.SetDelay(100 * time.Millisecond)
	c := dial(t, p)
	start := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	select {
	case n := <-received:
		if n != size {
			t.Fatalf("server received %d bytes, want %d", n, size)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("32 MiB did not pass in 20s")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("32 MiB through a 100ms delay took %s", d)
	}
}

func TestCutHoldsRestoreDelivers(t *testing.T) {
	srv := startServer(t, echo)
	p := startProxy(t, srv.addr())
	p.SetDelay(20 * time.Millisecond)
	c := dial(t, p)
	c.Write([]byte("before"))
	readFull(t, c, "before", 5*time.Second)

	p.Cut()
	for _, s := range []string{"held-1,", "held-2,", "held-3"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatalf("write during a cut: %v", err)
		}
	}
	readNothing(t, c, 300*time.Millisecond)
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns during a cut = %d, want 1: a cut closes nothing", n)
	}
	p.Restore()
	readFull(t, c, "held-1,held-2,held-3", 5*time.Second)
	c.Write([]byte("after"))
	readFull(t, c, "after", 5*time.Second)
}

// TestCutHoldsReplies cuts while the server's reply is on its way: the reply is held, not lost.
func TestCutHoldsReplies(t *testing.T) {
	// The server says when it has echoed the request; the echo then waits a second in the proxy (the
	// delay), so the Cut below comes well before the echo is due, however slow the machine.
	received := make(chan struct{})
	srv := startServer(t, func(c net.Conn) {
		b := make([]byte, len("in flight"))
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		c.Write(b)
		close(received)
	})
	p := startProxy(t, srv.addr())
	p.SetDelay(time.Second)
	c := dial(t, p)
	c.Write([]byte("in flight"))
	select {
	case <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the server")
	}
	p.Cut()
	readNothing(t, c, 400*time.Millisecond)
	p.Restore()
	readFull(t, c, "in flight", 5*time.Second)
}

func TestConnDuringCut(t *testing.T) {
	srv := startServer(t, echo)
	p := startProxy(t, srv.addr())
	p.Cut()
	c := dial(t, p) // accepted although cut
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	readNothing(t, c, 300*time.Millisecond)
	if n := srv.acceptedConns(); n != 0 {
		t.Fatalf("target accepted %d connections during the cut, want 0", n)
	}
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns = %d, want 1", n)
	}
	p.Restore()
	readFull(t, c, "hello", 5*time.Second)
}

// TestHalfClose checks that a client's FIN reaches the server after the bytes before it, and that the
// server can still answer; then both sides close and the proxy lets the connection go.
func TestHalfClose(t *testing.T) {
	srv := startServer(t, func(c net.Conn) {
		b, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got %d bytes: %s", len(b), b)
	})
	p := startProxy(t, srv.addr())
	p.SetDelay(50 * time.Millisecond)
	c := dial(t, p)
	c.Write([]byte("abc"))
	c.Write([]byte("def"))
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "got 6 bytes: abcdef" {
		t.Fatalf("reply %q", b)
	}
	waitFor(t, "the proxy to close the connection", func() bool { return p.Conns() == 0 })
}

// TestHalfCloseDuringCut checks that a FIN sent during a cut is held like the bytes before it.
func TestHalfCloseDuringCut(t *testing.T) {
	srv := startServer(t, func(c net.Conn) {
		b, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got %s", b)
	})
	p := startProxy(t, srv.addr())
	c := dial(t, p)
	c.Write([]byte("x"))
	time.Sleep(50 * time.Millisecond)
	p.Cut()
	c.Write([]byte("y"))
	c.CloseWrite()
	readNothing(t, c, 300*time.Millisecond)
	p.Restore()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "got xy" {
		t.Fatalf("reply %q, %v", b, err)
	}
}

func TestTargetDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := l.Addr().String()
	l.Close() // nothing listens there now
	p := startProxy(t, target)
	c := dial(t, p)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v from a proxy whose target is down; want the connection closed", n, err)
	}
	waitFor(t, "the proxy to drop the connection", func() bool { return p.Conns() == 0 })
}

func TestCloseEndsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		srv := startServer(t, echo)
		defer srv.close()
		p, err := Start(srv.addr())
		if err != nil {
			t.Fatal(err)
		}
		p.SetDelay(time.Hour) // bytes queued and never due
		var conns []net.Conn
		for range 3 {
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte("queued"))
			conns = append(conns, c)
		}
		waitFor(t, "3 connections", func() bool { return p.Conns() == 3 && srv.acceptedConns() == 3 })
		p.Cut()
		c, err := net.Dial("tcp", p.Addr()) // waiting for Restore to be dialed through
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		waitFor(t, "4 connections", func() bool { return p.Conns() == 4 })

		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if n := p.Conns(); n != 0 {
			t.Errorf("Conns after Close = %d", n)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("read after Close: %v, want the connection closed", err)
			}
			c.Close()
		}
		if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
			t.Error("the proxy still accepts after Close")
		}
	}()
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			if what == "goroutines to end" {
				buf := make([]byte, 1<<20)
				t.Logf("%s", buf[:runtime.Stack(buf, true)])
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
