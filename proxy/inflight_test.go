package proxy

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/inflight"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/web"
)

func limitedRig(t *testing.T, maxBody int64, origin http.HandlerFunc) *rig {
	t.Helper()
	limiter := inflight.New(inflight.Options{Store: storetest.Embedded(t), Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { limiter.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return newRig(t, rigOptions{
		inflight: limiter, maxBodyBytes: maxBody, originHandler: origin,
		routes: []config.Route{{Name: "checkout", Match: "POST /checkout", MaxInFlight: 1, Hold: 5 * time.Second}},
	})
}

// A route that sets max_in_flight on a proxy without a limiter is closed, not unlimited.
func TestInFlight_WithoutALimiterTheRouteIsClosed(t *testing.T) {
	rg := newRig(t, rigOptions{routes: []config.Route{{Name: "checkout", Match: "POST /checkout", MaxInFlight: 1}}})
	resp, err := http.Post(rg.server.URL+"/checkout", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "GATE_UNAVAILABLE") || rg.hits.Load() != 0 {
		t.Fatalf("%d %s, %d at the origin", resp.StatusCode, body, rg.hits.Load())
	}
	if missing := rg.proxy.CurrentTable().Missing["checkout"]; len(missing) != 1 || missing[0] != requireInFlight {
		t.Fatalf("missing %v", missing)
	}
}

// A visitor still sending its body holds no slot: the route's one slot goes to a request that is
// complete, and the slow body reaches the origin whole once it is in.
func TestInFlight_NoSlotIsHeldWhileABodyArrives(t *testing.T) {
	got := make(chan string, 2)
	rg := limitedRig(t, 1<<20, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	})
	slowBody, send := io.Pipe()
	t.Cleanup(func() { send.CloseWithError(io.ErrUnexpectedEOF) }) // before the rig's servers close
	slow := make(chan int, 1)
	go func() {
		resp, err := http.Post(rg.server.URL+"/checkout", "text/plain", slowBody)
		if err != nil {
			slow <- 0
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	send.Write([]byte("first half, ")) // returns once the transport took it: the headers are sent
	time.Sleep(50 * time.Millisecond)  // and edgeq is reading the body
	resp, err := http.Post(rg.server.URL+"/checkout", "text/plain", strings.NewReader("quick"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the complete request waited for the slow body's slot: %v %v", resp, err)
	}
	resp.Body.Close()
	if b := <-got; b != "quick" {
		t.Fatalf("origin got %q first", b)
	}
	send.Write([]byte("second half"))
	send.Close()
	if status := <-slow; status != 200 {
		t.Fatalf("slow body: %d", status)
	}
	if b := <-got; b != "first half, second half" {
		t.Fatalf("origin got %q", b)
	}
}

// A body larger than server.max_body_bytes is not refused: its remainder streams to the origin.
func TestInFlight_ALargerBodyStreamsWhole(t *testing.T) {
	got := make(chan string, 1)
	rg := limitedRig(t, 8, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	})
	body := strings.Repeat("0123456789", 100)
	resp, err := http.Post(rg.server.URL+"/checkout", "text/plain", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	if b := <-got; b != body {
		t.Fatalf("origin got %d bytes, want %d", len(b), len(body))
	}
}

// hold_per_client counts a request by its token's request id when it has one, else by its address:
// an IPv4 address (also written IPv4-mapped) alone, an IPv6 address by its /64.
func TestHoldClient_TokenElseAddressIPv6ByItsSlash64(t *testing.T) {
	client := func(requestID, addr string) string {
		info := &web.Request{QueueRequestID: requestID}
		if addr != "" {
			info.ClientIP = netip.MustParseAddr(addr)
		}
		return holdClient(info)
	}
	same := [][2]string{
		{client("r1", "203.0.113.7"), client("r1", "198.51.100.9")},
		{client("", "203.0.113.7"), client("", "::ffff:203.0.113.7")},
		{client("", "2001:db8:1:2::1"), client("", "2001:db8:1:2:ffff::9")},
	}
	for _, pair := range same {
		if pair[0] != pair[1] || pair[0] == "" {
			t.Errorf("%q and %q should be one client", pair[0], pair[1])
		}
	}
	different := [][2]string{
		{client("r1", "203.0.113.7"), client("r2", "203.0.113.7")},
		{client("r1", "203.0.113.7"), client("", "203.0.113.7")},
		{client("", "203.0.113.7"), client("", "203.0.113.8")},
		{client("", "2001:db8:1:2::1"), client("", "2001:db8:1:3::1")},
	}
	for _, pair := range different {
		if pair[0] == pair[1] {
			t.Errorf("%q should be two clients", pair[0])
		}
	}
	if got := client("", ""); got != "" {
		t.Errorf("no token, no address: %q, want nobody in particular", got)
	}
}
