package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/web"
)

// Real clients in front of real shops, end to end through a running edgeq.

// A visitor cannot turn a request into a log line as large as the request: every value it controls
// is clipped in the access log, in the cause of a refusal and on the admin listener.
func TestLogs_VisitorValuesAreClipped(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, strings.Replace(hostileConfig(origin.URL), "log: {level: error}", "log: {level: debug}", 1))
	huge := strings.Repeat("p", 60<<10) // about as large as a request line or header may be (64 KiB)
	cases := []struct {
		name, method, url string
		header            http.Header
		status            int
	}{
		{"a huge path", "GET", in.public + "/" + huge, nil, http.StatusOK},
		{"a huge refused Content-Type", "POST", in.public + "/checkout/1",
			http.Header{"Content-Type": {huge}, "X-User": {"alice"}}, http.StatusUnsupportedMediaType},
		{"a huge product id", "POST", in.public + "/checkout/" + huge,
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "X-User": {"alice"}}, http.StatusBadRequest},
		{"a huge path on the admin listener", "GET", in.admin + "/api/" + huge,
			http.Header{"Authorization": {"Bearer the-admin-key"}}, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := send(c.method, c.url, c.header)
			if err != nil || r.status != c.status {
				t.Fatalf("%v: status %d, want %d: %.300s", err, r.status, c.status, r.body)
			}
		})
	}
	const bound = 8 * web.LogValueMax // a line may carry a few clipped values, escaped
	clipped := 0
	for _, line := range strings.Split(in.logs.String(), "\n") {
		if len(line) > bound {
			t.Errorf("a log line of %d bytes (bound %d): %.300s...", len(line), bound, line)
		}
		if strings.Contains(line, "...[clipped, ") {
			clipped++
		}
	}
	// The lines were written (clipped), so the bound above looked at them.
	if clipped < len(cases) {
		t.Fatalf("%d clipped values in the logs, want at least %d:\n%.3000s", clipped, len(cases), in.logs.String())
	}
	want := fmt.Sprintf(`"path":"/%s...[clipped, %d bytes]"`, huge[:web.LogValueMax-1], len(huge)+1)
	if !strings.Contains(in.logs.String(), want) {
		t.Fatalf("the access line of the huge path does not show its start and length")
	}
}

// "post /checkout/1" is a checkout to Flask, Django, Symfony and Laravel, which upper-case the method
// before routing: edgeq admits it exactly like "POST /checkout/1" (per-user limit and stock included),
// and the shop receives POST.
func TestMethods_LowerCaseCheckoutIsAdmittedLikePOST(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, hostileConfig(origin.URL))
	var answers []string
	for _, method := range []string{"post", "Post", "POST"} {
		raw := rawExchange(t, in.public, method+" /checkout/1 HTTP/1.1\r\nHost: shop\r\nX-User: alice\r\n"+
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 10\r\nConnection: close\r\n\r\nquantity=1")
		answers = append(answers, strings.Join(statusLines(raw), ","))
	}
	if fmt.Sprint(answers) != "[200 409 409]" {
		t.Fatalf("answers %v, want the first admitted and the others refused by the per-user limit", answers)
	}
	seen := origin.requests()
	if len(seen) != 1 || seen[0].method != "POST" {
		t.Fatalf("the shop saw %+v, want one POST", seen)
	}
	r, err := send("GET", in.public+"/_edgeq/products/1", nil)
	if err != nil || !strings.Contains(r.body, `"remaining_stock":4`) {
		t.Fatalf("stock after one admitted checkout: %v %s", err, r.body)
	}
}

// A client that trickles its body (a byte every 200 ms) is cut off server.body_timeout after its
// request arrived. A body over 4 KiB streams to the shop, and the request it held there ends with
// it: the origin's handler, reading the body, returns. A smaller one is read whole before the shop
// is contacted (the proxy's short path), so the shop never sees it; an admission route, which reads
// the body itself, refuses it before the shop is contacted too. Before edgeq cut them off, twenty such
// connections were still open after 40 s.
func TestSlowBodies_AreCutOff(t *testing.T) {
	origin := newRecordingOrigin(t)
	const bodyTimeout = time.Second
	in := start(t, strings.Replace(hostileConfig(origin.URL), "idle_timeout: 1s",
		"idle_timeout: 1s\n  body_timeout: "+bodyTimeout.String(), 1))
	// Generous: the deadline happening at all is what is tested, on a machine that may be busy.
	const slack = 10 * time.Second
	paths := []string{"/checkout/1"}
	for i := range 5 {
		paths = append(paths, fmt.Sprintf("/upload-small-%d", i), fmt.Sprintf("/upload-large-%d", i))
	}
	type ending struct {
		path, answer string
		err          error
		after        time.Duration
	}
	endings := make(chan ending, len(paths))
	began := time.Now()
	for _, path := range paths {
		go func() {
			conn, err := net.Dial("tcp", strings.TrimPrefix(in.public, "http://"))
			if err != nil {
				endings <- ending{path: path, err: err}
				return
			}
			defer conn.Close()
			conn.SetDeadline(began.Add(bodyTimeout + slack))
			length := "1000"
			if strings.HasPrefix(path, "/upload-large-") {
				length = "10000"
			}
			io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: shop\r\nX-User: alice\r\n"+
				"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: "+length+"\r\n\r\nquantity=1&pad=")
			answer := make(chan ending, 1)
			go func() {
				b, err := io.ReadAll(conn) // until edgeq closes the connection
				answer <- ending{path: path, answer: string(b), err: err, after: time.Since(began)}
			}()
			trickle := time.NewTicker(200 * time.Millisecond)
			defer trickle.Stop()
			for {
				select {
				case e := <-answer:
					endings <- e
					return
				case <-trickle.C:
					conn.Write([]byte("x")) // fails once edgeq has closed the connection
				}
			}
		}()
	}
	for range paths {
		e := <-endings
		var netErr net.Error
		if errors.As(e.err, &netErr) && netErr.Timeout() {
			t.Errorf("%s: still open %s after it began (body_timeout %s)", e.path, e.after.Round(time.Millisecond), bodyTimeout)
			continue
		}
		if e.err != nil && !isReset(e.err) {
			t.Errorf("%s: %v", e.path, e.err)
		}
		// edgeq answers 400 when it can; a client still writing may instead see the connection reset.
		if codes := statusLines(e.answer); len(codes) > 1 || len(codes) == 1 && codes[0] != "400" {
			t.Errorf("%s: answered %v, want 400 or a closed connection", e.path, codes)
		}
	}
	// Each large upload's request at the shop ended: its handler read a body that broke off, and returned.
	eventually(t, "the shop's handlers returned", func() bool {
		ended := 0
		for _, r := range origin.requests() {
			if strings.HasPrefix(r.path, "/upload-large-") {
				ended++
			}
		}
		return ended == 5
	})
	for _, r := range origin.requests() {
		if r.path == "/checkout/1" || strings.HasPrefix(r.path, "/upload-small-") {
			t.Fatalf("%s, whose body never arrived, reached the shop", r.path)
		}
	}
	if r, err := send("GET", in.public+"/_edgeq/products/1", nil); err != nil || !strings.Contains(r.body, `"remaining_stock":5`) {
		t.Fatalf("stock after a checkout whose body never arrived: %v %s", err, r.body)
	}
}

// When a body's deadline passes, what the client sends after it is never read as another request: the
// connection is closed after edgeq's 400, on a pass-through path, an admission route and an edgeq
// endpoint alike.
func TestSlowBodies_TheRestIsNeverReadAsARequest(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, strings.Replace(hostileConfig(origin.URL), "idle_timeout: 1s", "idle_timeout: 1s\n  body_timeout: 1s", 1))
	smuggled := "GET /protected HTTP/1.1\r\nHost: shop\r\nX-User: bob\r\n\r\n"
	for _, path := range []string{"/upload", "/checkout/1", "/_edgeq/assign_queue_pos"} {
		t.Run(path, func(t *testing.T) {
			origin.reset()
			conn, err := net.Dial("tcp", strings.TrimPrefix(in.public, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(15 * time.Second))
			start := "quantity=1&queue_id=drop&pad="
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: shop\r\nX-User: alice\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
				"Content-Length: %d\r\n\r\n%s", path, len(start)+len(smuggled), start)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			// The body's last bytes, a request of their own, arrive after the deadline.
			io.WriteString(conn, smuggled)
			rest, err := io.ReadAll(br)
			if resp.StatusCode != 400 || len(rest) != 0 || err != nil && !isReset(err) {
				t.Fatalf("answered %d, then %q (%v); want 400 and the connection closed", resp.StatusCode, rest, err)
			}
			for _, r := range origin.requests() {
				if r.path != "/upload" {
					t.Fatalf("the shop received %s %s", r.method, r.path)
				}
			}
		})
	}
}
