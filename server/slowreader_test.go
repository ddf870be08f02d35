//go:build unix

package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/demoshop"
)

// bigAnswer is the size of bigShop's /big answer: far more than the socket buffers between edgeq and
// a client that reads nothing take.
const bigAnswer = 4 << 20

// bigShop answers GET /big and /plain/big with bigAnswer bytes of known length (size=N for another length),
// /events with a server-sent event stream and /chunked with an answer of no length, both open until
// the shop is closed, and /stream as the demo shop does. done counts the /big answers it finished
// writing.
type bigShop struct {
	*httptest.Server
	started, done atomic.Int64
	closing       chan struct{}
}

func newBigShop(t *testing.T) *bigShop {
	s := &bigShop{closing: make(chan struct{})}
	payload := strings.Repeat("0123456789abcdef", bigAnswer/16)
	mux := http.NewServeMux()
	big := func(w http.ResponseWriter, r *http.Request) {
		s.started.Add(1)
		size := bigAnswer
		if n, err := strconv.Atoi(r.URL.Query().Get("size")); err == nil && n <= bigAnswer {
			size = n
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Header().Set("Content-Type", "application/octet-stream")
		if _, err := io.WriteString(w, payload[:size]); err == nil {
			s.done.Add(1)
		}
	}
	mux.HandleFunc("GET /big", big)
	mux.HandleFunc("GET /plain/big", big) // on no route
	stream := func(contentType, first string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			s.started.Add(1)
			w.Header().Set("Content-Type", contentType)
			io.WriteString(w, first)
			http.NewResponseController(w).Flush()
			select {
			case <-s.closing:
			case <-r.Context().Done():
			}
		}
	}
	mux.HandleFunc("GET /events", stream("text/event-stream", "data: one\n\n"))
	mux.HandleFunc("GET /chunked", stream("text/plain", "first part\n"))
	demo, err := demoshop.New(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("GET /stream", demo) // lines flushed one by one, interval_ms apart
	s.Server = httptest.NewServer(mux)
	// Before edgeq stops (cleanups run last first): it drains the requests still at the shop.
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.closing) })
	return s
}

// slowConfig is edgeq on the Redis at redisAddr with server keys (a flow mapping's inside, "" for
// none), trusting loopback's X-Forwarded-For, and the routes given.
func slowConfig(originURL, redisAddr, serverKeys, routes string) string {
	if serverKeys != "" {
		serverKeys = ", " + serverKeys
	}
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]%s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
routes:
%s
`, serverKeys, originURL, redisAddr, routes)
}

// stalledGet sends GET path on a connection whose receive buffer is as small as the kernel allows and
// never reads the answer: a client on a bad network, or one that holds connections open on purpose.
// The connection is closed when the test ends, before edgeq stops.
func stalledGet(t *testing.T, base, path string) net.Conn {
	t.Helper()
	return smallBufferGet(t, base, path, 1024)
}

// smallBufferGet sends GET path on a connection with a receive buffer of about rcvbuf bytes.
func smallBufferGet(t *testing.T, base, path string, rcvbuf int) net.Conn {
	t.Helper()
	u, _ := url.Parse(base)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		return err
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, u.Host); err != nil {
		t.Fatal(err)
	}
	return conn
}

// received reads what conn still delivers, for up to a few seconds: what edgeq had sent before it
// cut the connection off, or everything if it did not.
func received(conn net.Conn) int64 {
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := io.Copy(io.Discard, conn)
	return n
}

// getWhole fetches base+path and returns its status and body length, failing after 10 s.
func getWhole(t *testing.T, target string, header http.Header) (int, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, len(b)
}

// A client that reads nothing of a 4 MB answer (a tiny receive buffer) no longer
// keeps the route's only slot: edgeq holds the answer (spool_bytes, 8 MiB by default), gives the slot
// back, and the next client is served within seconds instead of getting 503 BUSY after its hold.
func TestSlowReader_AReaderThatTakesNothingDoesNotKeepTheSlot(t *testing.T) {
	shop := newBigShop(t)
	in := start(t, slowConfig(shop.URL, privateRedisWith(t).Addr(), "",
		`  - {name: big, match: "GET /big", max_in_flight: 1, hold: 2s}`))
	stalledGet(t, in.public, "/big")
	eventually(t, "the stalled client's request at the shop", func() bool { return shop.started.Load() == 1 })
	began := time.Now()
	status, n := getWhole(t, in.public+"/big", nil)
	if took := time.Since(began); status != 200 || n != bigAnswer || took > 5*time.Second {
		t.Fatalf("the next client: %d, %d bytes after %v; want 200 with %d bytes within 5s", status, n, took, bigAnswer)
	}
	if now := in.metric(t, `edgeq_route_in_flight{route="big"}`); now != 0 {
		t.Errorf("edgeq_route_in_flight = %v while only the stalled client is being answered", now)
	}
}

// An answer longer than spool_bytes keeps the slot while the client reads it; a client that takes
// nothing is cut off after write_timeout, and the slot is free then. A client that takes nothing of an
// answer on a route without max_in_flight is cut off the same way.
func TestWriteTimeout_AStalledClientIsCutOffAndALongerAnswerKeepsTheSlotUntilThen(t *testing.T) {
	shop := newBigShop(t)
	in := start(t, slowConfig(shop.URL, privateRedisWith(t).Addr(), "write_timeout: 1s, spool_bytes: 1MiB",
		`  - {name: big, match: "GET /big", max_in_flight: 1, hold: 0s}`))
	limited := stalledGet(t, in.public, "/big")
	unlimited := stalledGet(t, in.public, "/plain/big")
	eventually(t, "both stalled requests at the shop", func() bool { return shop.started.Load() == 2 })
	stalledAt := time.Now()
	if status, _ := getWhole(t, in.public+"/big", nil); status != http.StatusServiceUnavailable {
		t.Fatalf("while the longer answer is copied: %d, want 503 BUSY", status)
	}
	eventually(t, "the slot free once the stalled client is cut off", func() bool {
		status, n := getWhole(t, in.public+"/big", nil)
		return status == 200 && n == bigAnswer
	})
	if took := time.Since(stalledAt); took > 5*time.Second {
		t.Errorf("the slot was free after %v with write_timeout 1s", took)
	}
	for name, conn := range map[string]net.Conn{"max_in_flight route": limited, "route without a limit": unlimited} {
		if n := received(conn); n >= bigAnswer {
			t.Errorf("%s: the stalled client got all %d bytes; want it cut off", name, n)
		}
	}
}

// write_timeout cuts a client that takes nothing, not one that reads slowly or a stream that is quiet
// for longer than it: the clock runs only while a write waits for the client.
func TestWriteTimeout_ASlowReaderAndAQuietStreamAreNotCut(t *testing.T) {
	shop := newBigShop(t)
	in := start(t, slowConfig(shop.URL, privateRedisWith(t).Addr(), "write_timeout: 1s, spool_bytes: 64KiB",
		`  - {name: big, match: "GET /big", max_in_flight: 1, hold: 0s}`))

	// A 1 MiB answer, longer than spool_bytes, read 8 KiB every 20 ms through a small receive buffer:
	// about 2.5 s in all, each write waiting for the reader far less than write_timeout.
	conn := smallBufferGet(t, in.public, "/big?size=1048576", 8192)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 8192), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	buf := make([]byte, 8192)
	for {
		k, err := resp.Body.Read(buf)
		n += k
		if err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n != 1<<20 {
		t.Fatalf("the slow reader got %d of %d bytes", n, 1<<20)
	}

	// The demo shop's stream pauses 1.2 s between lines, longer than write_timeout.
	stream, err := http.Get(in.public + "/stream?n=3&interval_ms=1200")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(stream.Body)
	stream.Body.Close()
	if err != nil || strings.Count(string(body), "tick") != 3 {
		t.Fatalf("the stream: %q, %v", body, err)
	}
}

// A streamed answer (server-sent events, or no length) gives its slot back at the shop's headers: a
// stream that stays open does not keep everyone else of the route out.
//
// Over each protocol (tls_test.go): over HTTP/2 the streams share one connection.
func TestInFlight_AStreamGivesTheSlotBackAtItsHeaders(t *testing.T) {
	e := newTLSEdge(t)
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) { streamGivesTheSlotBack(t, e, proto) })
	}
}

func streamGivesTheSlotBack(t *testing.T, e *tlsEdge, proto string) {
	shop := newBigShop(t)
	in := e.start(t, slowConfig(shop.URL, privateRedisWith(t).Addr(), "",
		`  - {name: streams, match: "GET /{kind}", max_in_flight: 1, hold: 300ms}`), nil)
	client, base := e.over(t, in, proto)
	for _, path := range []string{"/events", "/chunked", "/events"} {
		// The slot goes back to the store on a goroutine of its own once the headers are in (spool.go):
		// the previous stream's visitor can read its first line before the release has landed. Waiting
		// for the gauge (decremented after the release) keeps a slow release on a loaded machine from
		// passing for a stream that kept its slot (the next request held past its 300 ms, 503 BUSY).
		eventually(t, "the open streams' slots given back", func() bool {
			return in.metric(t, `edgeq_route_in_flight{route="streams"}`) == 0
		})
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("%s, with the streams before it still open: %d %q %v", path, resp.StatusCode, line, err)
		}
	}
	eventually(t, "edgeq_route_in_flight 0 with three streams open", func() bool {
		return in.metric(t, `edgeq_route_in_flight{route="streams"}`) == 0
	})
}

// One client (here one address; a token's request id where there is one)
// that sends 20 requests into a max_in_flight hold line keeps hold_per_client of them (2 by default)
// in line and gets 503 BUSY at once for the rest, so another client's request behind them is served
// within its hold instead of being pushed past it.
func TestHoldPerClient_OneClientsRequestsDoNotPushAnotherToBusy(t *testing.T) {
	gate := make(chan struct{})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		time.Sleep(150 * time.Millisecond) // the shop works on each checkout for a moment
		io.WriteString(w, `{"ok": true}`)
	}))
	t.Cleanup(origin.Close)
	t.Cleanup(openGate) // before edgeq stops: it drains the requests at the shop
	redisAddr := privateRedisWith(t).Addr()
	in := start(t, slowConfig(origin.URL, redisAddr, "",
		`  - {name: checkout, match: "POST /checkout", max_in_flight: 1, hold: 2s}`))
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	inLine := func() int64 { return rdb.ZCard(context.Background(), "edgeq:{f:checkout}:waiters").Val() }

	post := func(client string) (int, time.Duration) {
		req, _ := http.NewRequest("POST", in.public+"/checkout", strings.NewReader(`{}`))
		req.Header.Set("X-Forwarded-For", client)
		began := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(began)
	}
	const flooder, victim = "203.0.113.7", "198.51.100.9"
	go post(flooder) // takes the slot; the shop holds it until the gate opens
	eventually(t, "the first request holding the slot", func() bool {
		return in.metric(t, `edgeq_route_in_flight{route="checkout"}`) == 1
	})
	var mu sync.Mutex
	var answered []time.Duration // flood requests answered before the gate opened
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			status, took := post(flooder)
			if status == http.StatusServiceUnavailable {
				mu.Lock()
				answered = append(answered, took)
				mu.Unlock()
			}
		})
	}
	eventually(t, "every flood request in line or refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return int64(len(answered))+inLine() == 20
	})
	victimStatus := make(chan int, 1)
	go func() { status, _ := post(victim); victimStatus <- status }()
	eventually(t, "the victim in line", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return int64(len(answered))+inLine() == 21
	})
	mu.Lock()
	refusedAtOnce := len(answered)
	for _, took := range answered {
		if took > time.Second {
			t.Errorf("a flood request past hold_per_client was refused after %v, want at once", took)
		}
	}
	mu.Unlock()
	openGate()
	if status := <-victimStatus; status != 200 {
		t.Errorf("the other client behind the flood: %d, want 200", status)
	}
	wg.Wait()
	if refusedAtOnce != 18 {
		t.Errorf("%d of the flooder's 20 waiting requests refused at once, want 18 (hold_per_client 2)", refusedAtOnce)
	}
	if n := in.metric(t, `edgeq_route_held_total{result="client_busy",route="checkout"}`); n != 18 {
		t.Errorf("edgeq_route_held_total{client_busy} = %v, want 18", n)
	}
}
