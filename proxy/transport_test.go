package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingOrigin is an httptest origin that counts the connections it accepted.
type countingOrigin struct {
	*httptest.Server
	conns atomic.Int64
}

func newCountingOrigin(t *testing.T, h http.HandlerFunc, configure func(*http.Server)) *countingOrigin {
	t.Helper()
	o := &countingOrigin{}
	o.Server = httptest.NewUnstartedServer(h)
	o.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Add(1)
		}
	}
	if configure != nil {
		configure(o.Config)
	}
	o.Start()
	t.Cleanup(o.Close)
	return o
}

func get(t *testing.T, tr http.RoundTripper, method, target string, h http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, target, err)
	}
	return resp, string(b)
}

func TestTransport_ReusesOneConnectionForEveryKindOfAnswer(t *testing.T) {
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/unchanged":
			w.WriteHeader(http.StatusNotModified)
		case "/chunked":
			w.Header().Set("Trailer", "X-Sum")
			for i := range 3 {
				fmt.Fprintf(w, "part%d,", i)
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Sum", "3")
		default:
			fmt.Fprint(w, "hello ", r.Method, " ", r.URL.Path)
		}
	}, nil)
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	for i := range 5 {
		if resp, body := get(t, tr, "GET", o.URL+"/page", nil); resp.StatusCode != 200 || body != "hello GET /page" {
			t.Fatalf("round %d: %d %q", i, resp.StatusCode, body)
		}
		if resp, body := get(t, tr, "HEAD", o.URL+"/page", nil); resp.StatusCode != 200 || body != "" {
			t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
		}
		if resp, _ := get(t, tr, "GET", o.URL+"/empty", nil); resp.StatusCode != 204 {
			t.Fatalf("204: %d", resp.StatusCode)
		}
		if resp, _ := get(t, tr, "GET", o.URL+"/unchanged", nil); resp.StatusCode != 304 {
			t.Fatalf("304: %d", resp.StatusCode)
		}
		resp, body := get(t, tr, "GET", o.URL+"/chunked", nil)
		if body != "part0,part1,part2," || resp.Trailer.Get("X-Sum") != "3" {
			t.Fatalf("chunked: %q trailer %v", body, resp.Trailer)
		}
	}
	if n := o.conns.Load(); n != 1 {
		t.Fatalf("the origin accepted %d connections for 25 sequential answers, want 1", n)
	}
}

func TestTransport_AConnectionTheOriginClosedWhileIdleIsReplacedUnnoticed(t *testing.T) {
	// The origin closes keep-alive connections idle for 20 ms, silently (as Node's 5 s default does).
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") },
		func(s *http.Server) { s.IdleTimeout = 20 * time.Millisecond })
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	for i := range 4 {
		if resp, body := get(t, tr, "GET", o.URL+"/", nil); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("round %d: %d %q", i, resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond) // the origin closes the pooled connection meanwhile
	}
	if n := o.conns.Load(); n != 4 {
		t.Fatalf("%d connections, want 4 (one per round: each pooled one was closed by the origin)", n)
	}
}

// rawOrigin answers every request with answer's bytes, whatever is asked; an HTTP/1.0 answer ends
// its connection.
func rawOrigin(t *testing.T, answer string) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					req.Body.Close()
					if _, err := io.WriteString(c, answer); err != nil {
						return
					}
					if strings.HasPrefix(answer, "HTTP/1.0") {
						return // the end of the body is the end of the connection
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

func TestTransport_ABodyThatEndsWithTheConnectionIsReadAndNotPooled(t *testing.T) {
	addr, accepted := rawOrigin(t, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	for range 3 {
		if resp, body := get(t, tr, "GET", "http://"+addr+"/", nil); resp.StatusCode != 200 || body != "until the end" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	}
	if n := accepted.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

func TestTransport_BytesAfterTheAnswerAreNeverReadAsTheNextAnswer(t *testing.T) {
	// A broken (or hostile) origin sends a second answer nobody asked for after the first.
	smuggled := "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"
	addr, accepted := rawOrigin(t, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"+smuggled)
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	for i := range 3 {
		if _, body := get(t, tr, "GET", "http://"+addr+"/", nil); body != "hello" {
			t.Fatalf("answer %d: %q, want hello", i, body)
		}
	}
	if n := accepted.Load(); n != 3 {
		t.Fatalf("%d connections, want 3: a connection with unread bytes must not be pooled", n)
	}
}

// rawServer runs serve for every connection accepted on a loopback listener.
func rawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String()
}

func TestTransport_WhatArrivesOnAnIdleConnectionIsNeverTheNextAnswer(t *testing.T) {
	for _, c := range []struct{ name, late string }{
		// An answer nobody asked for, sent after the real one had been read.
		{"unsolicited answer", "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"},
		// Some servers say 408 before closing an idle connection.
		{"408 before a close", "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var conns atomic.Int64
			addr := rawServer(t, func(conn net.Conn, br *bufio.Reader) {
				conns.Add(1)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					req.Body.Close()
					io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
					time.Sleep(20 * time.Millisecond)
					io.WriteString(conn, c.late)
				}
			})
			tr := NewTransport(5 * time.Second)
			defer tr.CloseIdleConnections()
			for i := range 3 {
				if resp, body := get(t, tr, "GET", "http://"+addr+"/", nil); resp.StatusCode != 200 || body != "hello" {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
				}
				time.Sleep(80 * time.Millisecond) // the late bytes arrive while the connection is idle
			}
			if n := conns.Load(); n != 3 {
				t.Fatalf("%d connections, want 3 (each one spoilt by what came after its answer)", n)
			}
		})
	}
}

func TestTransport_AnEndlessHeaderIsRefused(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		for range 12 << 10 { // 12 MiB of header
			if _, err := io.WriteString(conn, line); err != nil {
				return
			}
		}
		io.WriteString(conn, "Content-Length: 0\r\n\r\n")
	})
	tr := NewTransport(30 * time.Second)
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("an answer with 12 MiB of header was accepted")
	}
}

func TestTransport_IdleConnectionsAreClosedAfterTheIdleTimeout(t *testing.T) {
	var open atomic.Int64
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // overlap, so that several connections are opened
		fmt.Fprint(w, "ok")
	}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		}
	})
	tr := NewTransport(5 * time.Second)
	tr.idleTimeout = 100 * time.Millisecond
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { get(t, tr, "GET", o.URL+"/", nil) })
	}
	wg.Wait()
	if open.Load() == 0 {
		t.Fatal("no connection open after the requests: nothing was pooled")
	}
	waitFor(t, func() bool { return open.Load() == 0 })
	tr.mu.Lock()
	left := len(tr.idle[strings.TrimPrefix(o.URL, "http://")])
	tr.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d connections left in the pool", left)
	}
	// And the transport still works.
	if _, body := get(t, tr, "GET", o.URL+"/", nil); body != "ok" {
		t.Fatalf("after expiry: %q", body)
	}
}

func TestTransport_EarlyHintsReachTheVisitorThroughReverseProxy(t *testing.T) {
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</app.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		fmt.Fprint(w, "page")
	}, nil)
	u, _ := url.Parse(o.URL)
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: NewTransport(5 * time.Second),
	})
	defer front.Close()
	var hints []string
	req, _ := http.NewRequest("GET", front.URL+"/", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, fmt.Sprint(code, " ", h.Get("Link")))
			return nil
		},
	}))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "page" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if len(hints) != 1 || hints[0] != "103 </app.css>; rel=preload; as=style" {
		t.Fatalf("1xx seen by the visitor: %q", hints)
	}
}

func TestTransport_SlowHeadersTimeOutWithANetTimeoutError(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, nil)
	tr := NewTransport(50 * time.Millisecond)
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", o.URL+"/", nil)
	_, err := tr.RoundTrip(req)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("error %v, want a net.Error that is a timeout", err)
	}
}

func TestTransport_AVisitorWhoLeavesMidBodyClosesTheOriginConnection(t *testing.T) {
	wrote := make(chan struct{})
	originSawClose := make(chan struct{})
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/other" {
			fmt.Fprint(w, "other")
			return
		}
		fmt.Fprint(w, "first part,")
		w.(http.Flusher).Flush()
		close(wrote)
		<-r.Context().Done() // net/http cancels it when the connection closes
		close(originSawClose)
	}, nil)
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", o.URL+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	<-wrote
	buf := make([]byte, 11)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first part," {
		t.Fatalf("%q %v", buf, err)
	}
	cancel()
	if _, err := resp.Body.Read(buf); !errors.Is(err, context.Canceled) {
		// context.Canceled, as net/http says it: ReverseProxy does not log such a copy as an error.
		t.Fatalf("read after the visitor left: %v, want context.Canceled", err)
	}
	resp.Body.Close()
	select {
	case <-originSawClose:
	case <-time.After(10 * time.Second):
		t.Fatal("the origin's connection stayed open after the visitor left")
	}
	// The next request needs a new connection: the broken one was not pooled.
	if _, body := get(t, tr, "GET", o.URL+"/other", nil); body != "other" {
		t.Fatalf("next answer %q", body)
	}
	if n := o.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestTransport_ConcurrentRequestsGetTheirOwnAnswers(t *testing.T) {
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		n := len(r.URL.Query().Get("n"))
		if r.URL.Query().Has("chunked") {
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, r.URL.Query().Get("n"), strings.Repeat(".", n*997%9000))
	}, nil)
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	const clients, each = 32, 100
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				n := fmt.Sprintf("%d-%d", c, i)
				target := o.URL + "/?n=" + n
				if i%3 == 0 {
					target += "&chunked"
				}
				req, _ := http.NewRequest("GET", target, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := n + strings.Repeat(".", len(n)*997%9000); err != nil || string(b) != want {
					errs <- fmt.Errorf("request %s: got %d bytes starting %.20q, want %d (%v)", n, len(b), b, len(want), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := o.conns.Load(); n > clients {
		t.Fatalf("%d connections for %d clients", n, clients)
	}
}

func TestTransport_WhichRequestsTakeTheShortPath(t *testing.T) {
	mk := func(method, target string, body io.Reader, h http.Header) *http.Request {
		r := httptest.NewRequest(method, target, body)
		r.RequestURI = ""
		for k, v := range h {
			r.Header[k] = v
		}
		return r
	}
	for _, c := range []struct {
		name string
		req  *http.Request
		want bool
	}{
		{"GET", mk("GET", "http://o/", nil, nil), true},
		{"HEAD", mk("HEAD", "http://o/", nil, nil), true},
		{"GET with a body", mk("GET", "http://o/", strings.NewReader("x"), nil), false},
		{"POST without a body", mk("POST", "http://o/", nil, nil), true},
		{"DELETE", mk("DELETE", "http://o/", nil, nil), true},
		{"POST with a form", mk("POST", "http://o/", strings.NewReader("quantity=1"), nil), true},
		{"PUT of 4 KiB", mk("PUT", "http://o/", strings.NewReader(strings.Repeat("x", maxShortBody)), nil), true},
		{"POST over 4 KiB", mk("POST", "http://o/", strings.NewReader(strings.Repeat("x", maxShortBody+1)), nil), false},
		{"POST of unknown length (chunked)", func() *http.Request {
			r := mk("POST", "http://o/", io.MultiReader(strings.NewReader("x")), nil)
			r.ContentLength = -1
			return r
		}(), false},
		{"POST with Expect: 100-continue", mk("POST", "http://o/", strings.NewReader("x"), http.Header{"Expect": {"100-continue"}}), false},
		{"CONNECT", mk("CONNECT", "http://o/", nil, nil), false},
		{"HTTPS origin", mk("GET", "https://o/", nil, nil), false},
		{"Upgrade", mk("GET", "http://o/", nil, http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}), false},
		{"newline in a value", mk("GET", "http://o/", nil, http.Header{"X-A": {"a\r\nInjected: 1"}}), false},
		{"space in a name", mk("GET", "http://o/", nil, http.Header{"X A": {"a"}}), false},
	} {
		if got := shortPath(c.req); got != c.want {
			t.Errorf("%s: short path %v, want %v", c.name, got, c.want)
		}
	}
}

func post(t *testing.T, tr http.RoundTripper, target, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest("POST", target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("POST %s: body: %v", target, err)
	}
	return resp, string(b), nil
}

func TestTransport_SmallPostsGoTheShortWayOnOneConnection(t *testing.T) {
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d %s", r.Method, r.Header.Get("Content-Type"), r.ContentLength, b)
	}, nil)
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	for i := range 5 {
		body := fmt.Sprintf("quantity=%d", i)
		resp, got, err := post(t, tr, o.URL+"/checkout", body)
		if err != nil || resp.StatusCode != 200 || got != fmt.Sprintf("POST application/x-www-form-urlencoded %d %s", len(body), body) {
			t.Fatalf("round %d: %v %q", i, err, got)
		}
		big := strings.Repeat("y", maxShortBody)
		if resp, got, err := post(t, tr, o.URL+"/checkout", big); err != nil || resp.StatusCode != 200 || !strings.HasSuffix(got, " 4096 "+big) {
			t.Fatalf("4 KiB body: %v %.60q", err, got)
		}
		if resp, body := get(t, tr, "GET", o.URL+"/page", nil); resp.StatusCode != 200 || !strings.HasPrefix(body, "GET") {
			t.Fatalf("GET after a POST: %d %q", resp.StatusCode, body)
		}
	}
	if n := o.conns.Load(); n != 1 {
		t.Fatalf("the origin accepted %d connections for 15 sequential requests, want 1", n)
	}
}

// A small POST reaches the origin in one write, header and body together, whatever its body reads
// from: a visitor's body is a network stream, and net/http flushes the header before a body it does
// not know to be in memory (one more system call per request).
func TestTransport_ASmallPostIsOneWrite(t *testing.T) {
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}, nil)
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	var writes atomic.Int64
	dial := tr.dial
	tr.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, n: &writes}, nil
	}
	for _, size := range []int{1, 1000, 3000} {
		body := strings.Repeat("q", size)
		req, _ := http.NewRequest("POST", o.URL+"/checkout", struct{ io.Reader }{strings.NewReader(body)})
		req.ContentLength = int64(size)
		before := writes.Load()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != body {
			t.Fatalf("%d bytes: the origin got %d", size, len(got))
		}
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("a POST of %d bytes took %d writes, want 1", size, n)
		}
	}
	// A body shorter than its Content-Length fails the round trip; nothing is written.
	req, _ := http.NewRequest("POST", o.URL+"/checkout", struct{ io.Reader }{strings.NewReader("short")})
	req.ContentLength = 10
	before := writes.Load()
	if _, err := tr.RoundTrip(req); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a body that breaks off: %v", err)
	}
	if n := writes.Load() - before; n != 0 {
		t.Fatalf("a body that broke off was written (%d writes)", n)
	}
}

type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// A POST is never sent twice: when the connection ends without an answer (here the origin takes the
// request and drops the connection, on a pooled connection where a stale one would look the same),
// the error goes back to the caller (admission releases the units), as net/http's Transport does.
func TestTransport_APostIsNeverSentTwice(t *testing.T) {
	var posts atomic.Int64
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			io.ReadAll(r.Body)
			posts.Add(1)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		fmt.Fprint(w, "ok")
	}, nil)
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	get(t, tr, "GET", o.URL+"/", nil) // a pooled connection for the POST
	if _, _, err := post(t, tr, o.URL+"/checkout", "quantity=1"); err == nil {
		t.Fatal("a POST without an answer got one")
	}
	if n := posts.Load(); n != 1 {
		t.Fatalf("the origin received the POST %d times, want 1", n)
	}
}

// An origin that answers before reading the body (413, a refused upload) and closes: the body fits
// the send buffer, so writing it does not wait for the origin, and its answer is what comes back.
func TestTransport_AnAnswerBeforeTheBodyIsRead(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		tp := textproto.NewReader(br)
		if _, err := tp.ReadLine(); err != nil { // the request line and header only
			return
		}
		if _, err := tp.ReadMIMEHeader(); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo big\n")
		// A lingering close, as servers do, so that the unread body does not turn into a reset.
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, br)
	})
	tr := NewTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, body, err := post(t, tr, "http://"+addr+"/upload", strings.Repeat("z", maxShortBody))
		if err != nil || resp.StatusCode != 413 || body != "too big\n" {
			t.Errorf("answer: %v %v %q", err, resp, body)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the POST waited for an origin that had answered")
	}
}

func TestTransport_ABadHeaderValueIsRefusedNotWritten(t *testing.T) {
	var hits atomic.Int64
	o := newCountingOrigin(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }, nil)
	tr := NewTransport(5 * time.Second)
	req, _ := http.NewRequest("GET", o.URL+"/", nil)
	req.Header["X-A"] = []string{"a\r\nInjected: 1"}
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a header value with CR LF was sent")
	}
	if hits.Load() != 0 {
		t.Fatal("the origin received it")
	}
}

// BenchmarkTransport compares the short path with net/http's Transport, one origin, 1 KiB answers, to
// GETs and to small form POSTs.
func BenchmarkTransport(b *testing.B) {
	payload := strings.Repeat("x", 1024)
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, payload) }))
	defer o.Close()
	for _, c := range []struct {
		name string
		tr   http.RoundTripper
	}{{"net-http", NewHTTPTransport(5 * time.Second)}, {"edgeq", NewTransport(5 * time.Second)}} {
		for _, method := range []string{"GET", "POST"} {
			b.Run(method+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						var body io.Reader
						if method == "POST" {
							body = strings.NewReader("quantity=1&sku=sneaker-42")
						}
						req, _ := http.NewRequest(method, o.URL+"/", body)
						resp, err := c.tr.RoundTrip(req)
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			})
		}
	}
}
