package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hostile HTTP on the public listener, end to end through a running edgeq.

// recordingOrigin remembers every request that reached the shop.
type recordingOrigin struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method, path string
	header       http.Header
	body         string
}

func newRecordingOrigin(t *testing.T) *recordingOrigin {
	t.Helper()
	o := &recordingOrigin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		o.mu.Lock()
		o.seen = append(o.seen, seenRequest{r.Method, r.URL.Path, r.Header.Clone(), string(body)})
		o.mu.Unlock()
		fmt.Fprintf(w, "shop answered %s %s", r.Method, r.URL.Path)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *recordingOrigin) requests() []seenRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]seenRequest(nil), o.seen...)
}

func (o *recordingOrigin) reset() {
	o.mu.Lock()
	o.seen = nil
	o.mu.Unlock()
}

// hostileConfig has a queue-gated page, a stock-admission checkout with a small body limit, per-IP join
// limits and short slow-client timeouts.
func hostileConfig(originURL string) string {
	return fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  max_body_bytes: 1024
  read_header_timeout: 500ms
  idle_timeout: 1s
admin: {listen: "127.0.0.1:0", api_key: "the-admin-key"}
origin: {url: %q}
log: {level: error}
limits: {join_per_ip_per_minute: 3, status_per_ip_per_minute: 0}
queues:
  - {id: drop, capacity: 10}
  # Full: a request reaches /protected only with a token (API clients are served at once with room).
  - {id: locked, capacity: 0}
products:
  - {id: "1", stock: 5, name: "Sneaker"}
routes:
  - {name: protected, match: "/protected", queue: locked}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User", quantity: "form:quantity"}
`, originURL)
}

// rawExchange writes raw bytes on a fresh connection and returns everything edgeq answers until it
// closes the connection (or stays silent for a second after answering).
func rawExchange(t *testing.T, base, raw string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		conn.SetReadDeadline(time.Now().Add(time.Second))
		n, err := conn.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String()
		}
	}
}

// statusLines returns the status codes of the HTTP responses in a raw exchange, in order.
func statusLines(raw string) []string {
	var codes []string
	for line := range strings.SplitSeq(raw, "\r\n") {
		if len(line) > 9 && strings.HasPrefix(line, "HTTP/1.") {
			rest := line[9:]
			code, _, _ := strings.Cut(rest, " ")
			codes = append(codes, code)
		}
	}
	return codes
}

// Request smuggling: a request with ambiguous framing either gets one interpretation from edgeq, which
// re-frames it for the shop, or is refused. A request hidden in a body is never forwarded unseen: if
// edgeq reads it as a second request it goes through the gate like any other (403 here), and the shop
// never receives a protected path or a second request it did not see edgeq answer.
func TestSmuggling_AmbiguousFramingNeverReachesTheOriginTwice(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, hostileConfig(origin.URL))
	smuggled := "GET /protected HTTP/1.1\r\nHost: shop\r\n\r\n"
	cases := []struct {
		name, raw string
		refused   bool   // edgeq answers 4xx/5xx itself and the shop sees nothing
		first     string // otherwise: edgeq's first answer
	}{
		{"CL.TE: Content-Length covers the smuggled request, chunked ends before it",
			"POST /open HTTP/1.1\r\nHost: shop\r\nContent-Length: " + fmt.Sprint(5+len(smuggled)) +
				"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, false, "200"},
		{"TE.CL: chunked covers the smuggled request, Content-Length ends before it",
			"POST /open HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" +
				fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled), false, "200"},
		{"two different Content-Length values",
			"POST /open HTTP/1.1\r\nHost: shop\r\nContent-Length: 0\r\nContent-Length: " + fmt.Sprint(len(smuggled)) +
				"\r\n\r\n" + smuggled, true, ""},
		{"Content-Length list", "POST /open HTTP/1.1\r\nHost: shop\r\nContent-Length: 0, 40\r\n\r\n" + smuggled, true, ""},
		{"signed Content-Length", "POST /open HTTP/1.1\r\nHost: shop\r\nContent-Length: +0\r\n\r\n" + smuggled, true, ""},
		{"unknown transfer coding", "POST /open HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + smuggled, true, ""},
		{"chunked not last", "POST /open HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + smuggled, true, ""},
		{"space before the colon", "POST /open HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding : chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n" + smuggled, true, ""},
		// Folded into X-A's value: the framing is Content-Length 0 and "0\r\n\r\n" is a bad request line.
		{"obs-fold continuation line", "POST /open HTTP/1.1\r\nHost: shop\r\nContent-Length: 0\r\nX-A: b\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, false, "200"},
		// A bare LF ends a header line for Go's parser: chunked wins and the smuggled request is a
		// malformed chunk, which edgeq answers 400 (the shop may see a request whose body breaks off).
		{"bare LF in a header", "POST /open HTTP/1.1\r\nHost: shop\r\nX-A: b\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n" + smuggled, false, "400"},
		{"HTTP/1.0 with chunked", "POST /open HTTP/1.0\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, false, "200"},
	}
	// In these the body breaks off while edgeq forwards it, so whether the shop's handler saw the
	// request start depends on timing: at most once, and never the smuggled request.
	partial := map[string]bool{"bare LF in a header": true}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case has its own path, so a request that reaches the shop late is still counted
			// against the right case.
			path := fmt.Sprintf("/open-%d", i)
			raw := rawExchange(t, in.public, strings.Replace(c.raw, "POST /open ", "POST "+path+" ", 1))
			codes := statusLines(raw)
			var seen []seenRequest
			for _, r := range origin.requests() {
				if r.path == path || r.path == "/protected" {
					seen = append(seen, r)
				}
			}
			if len(codes) == 0 {
				t.Fatalf("no response at all:\n%q", raw)
			}
			for _, r := range seen {
				if r.path == "/protected" {
					t.Fatalf("the protected path reached the shop ungated; edgeq answered %v", codes)
				}
				if strings.Contains(r.body, "/protected") && r.header.Get("Content-Length") == "" && len(r.header["Transfer-Encoding"]) > 0 {
					t.Fatalf("the shop got an ambiguously framed body: %+v", r)
				}
			}
			if len(seen) > 1 {
				t.Fatalf("one client request reached the shop %d times: %+v", len(seen), seen)
			}
			if c.refused {
				if len(seen) != 0 || (codes[0][0] != '4' && codes[0][0] != '5') {
					t.Fatalf("want a refusal and nothing forwarded; edgeq answered %v, shop saw %+v\n%q", codes, seen, raw)
				}
				return
			}
			// Accepted: exactly one request reached the shop, and if edgeq read anything more from the
			// connection, edgeq answered it itself: the gate's 403 (the smuggler has no token) or 400.
			if (len(seen) != 1 && !(partial[c.name] && len(seen) == 0)) || codes[0] != c.first {
				t.Fatalf("edgeq answered %v (want %s first), shop saw %+v\n%q", codes, c.first, seen, raw)
			}
			for _, code := range codes[1:] {
				if code != "403" && code != "400" {
					t.Fatalf("the smuggled request was answered %s, want edgeq's own 403 or 400 (all: %v)", code, codes)
				}
			}
		})
	}
}

// Client-sent Edgeq-* headers and X-Forwarded-* from an untrusted peer never reach the shop, and rotating
// X-Forwarded-For does not get around the per-IP join limit.
func TestSpoofedHeaders_UntrustedPeerIsIgnored(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, hostileConfig(origin.URL))
	req, _ := http.NewRequest("GET", in.public+"/page", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "evil.example")
	req.Header.Set("Edgeq-Request-Id", "00000001-0000-8000-8000-000000000000")
	req.Header.Set("Edgeq-Queue-Id", "drop")
	req.Header.Set("edgeq-admission-id", "42")
	req.Header.Set("Cookie", "edgeq_token_drop=forged; shop=kept")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	seen := origin.requests()
	if resp.StatusCode != 200 || len(seen) != 1 {
		t.Fatalf("status %d, shop saw %d requests", resp.StatusCode, len(seen))
	}
	h := seen[0].header
	if got := h.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want only the real peer", got)
	}
	if got := h.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("X-Forwarded-Proto = %q, want http", got)
	}
	if got := h.Get("X-Forwarded-Host"); strings.Contains(got, "evil") {
		t.Errorf("X-Forwarded-Host = %q, taken from an untrusted client", got)
	}
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "edgeq-") {
			t.Errorf("client header %s reached the shop", name)
		}
	}
	if got := h.Get("Cookie"); got != "shop=kept" {
		t.Errorf("Cookie = %q, want edgeq's cookie removed and the shop's kept", got)
	}

	var statuses []int
	for i := range 5 {
		req, _ := http.NewRequest("POST", in.public+"/_edgeq/assign_queue_pos", strings.NewReader("queue_id=drop"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	if fmt.Sprint(statuses) != "[200 200 200 429 429]" {
		t.Fatalf("joins with rotating X-Forwarded-For: %v, want the limit of 3 per IP to hold", statuses)
	}
}

// Oversized input is refused with a clear status before anything reaches the shop or the store.
func TestOversized_HeadersAndBodies(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, hostileConfig(origin.URL))

	req, _ := http.NewRequest("GET", in.public+"/page", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 80<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("80 KiB of headers: %d, want 431", resp.StatusCode)
	}

	body := "quantity=1&pad=" + strings.Repeat("x", 4096)
	req, _ = http.NewRequest("POST", in.public+"/checkout/1", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-User", "alice")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(answer), `"PAYLOAD_TOO_LARGE"`) {
		t.Fatalf("4 KiB body over a 1 KiB limit: %d %s", r.StatusCode, answer)
	}
	// The same again with chunked framing (no Content-Length to refuse early).
	req, _ = http.NewRequest("POST", in.public+"/checkout/1", io.MultiReader(strings.NewReader(body)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-User", "alice")
	r, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over the limit: %d", r.StatusCode)
	}
	if seen := origin.requests(); len(seen) != 0 {
		t.Fatalf("oversized requests reached the shop: %+v", seen)
	}
	resp, err = http.Get(in.public + "/_edgeq/products/1")
	if err != nil {
		t.Fatal(err)
	}
	product, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(product), `"remaining_stock":5`) {
		t.Fatalf("stock changed by refused requests: %s", product)
	}
}

// Slowloris: a client that sends its headers a byte at a time is cut off after read_header_timeout,
// an idle kept-alive connection is closed after idle_timeout, and many slow clients do not keep a
// normal visitor out.
func TestSlowClients_AreCutOff(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, hostileConfig(origin.URL))
	addr := strings.TrimPrefix(in.public, "http://")

	var slow []net.Conn
	for range 50 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET /page HTTP/1.1\r\nHost: shop\r\n")
		slow = append(slow, conn)
	}
	// A normal visitor is served while fifty connections are stuck in their headers.
	if status := get(t, in.public+"/page"); status != 200 {
		t.Fatalf("normal request beside slow clients: %d", status)
	}

	// One slow client keeps trickling a header byte every 100 ms; the server must hang up long before
	// the trickle (up to 20 s) would end.
	trickler := slow[0]
	closed := make(chan error, 1)
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := trickler.Read(buf); err != nil {
				closed <- err
				return
			}
		}
	}()
	cutOff := false
	for i := 0; i < 200 && !cutOff; i++ {
		select {
		case err := <-closed:
			if !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("slow client: unexpected read error %v", err)
			}
			cutOff = true
		case <-time.After(100 * time.Millisecond):
			trickler.Write([]byte("X"))
		}
	}
	if !cutOff {
		t.Fatal("a client trickling its headers was never cut off")
	}
	for _, conn := range slow[1:] {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := bufio.NewReader(conn).ReadByte(); err == nil {
			// Go may answer 408 before closing; the connection must still end.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, conn); err != nil {
				t.Fatalf("slow connection not closed: %v", err)
			}
		} else if !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("slow connection not closed: %v", err)
		}
	}

	// Idle keep-alive: one complete request, then silence.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /page HTTP/1.1\r\nHost: shop\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("keep-alive request: %d close=%v", resp.StatusCode, resp.Close)
	}
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("idle connection: %v, want closed by the server", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "connection reset")
}

// The admin API, metrics and probes live only on admin.listen: on the public port, even with the right
// key, those paths are the shop's (forwarded like any other path) or edgeq's 404, never the admin API.
func TestAdminAPI_NotOnThePublicPort(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, hostileConfig(origin.URL))
	auth := http.Header{"Authorization": {"Bearer the-admin-key"}}

	// On the admin listener the key works (so the paths below are real admin paths).
	r, err := send("GET", in.admin+"/api/queues", auth)
	if err != nil || r.status != 200 || !strings.Contains(r.body, `"drop"`) {
		t.Fatalf("admin listener: %v %d %s", err, r.status, r.body)
	}
	for _, path := range []string{"/api/queues", "/api/queue/drop", "/api/products", "/metrics", "/healthz", "/readyz", "/dashboard"} {
		origin.reset()
		r, err := send("GET", in.public+path, auth)
		if err != nil {
			t.Fatal(err)
		}
		seen := origin.requests()
		if r.status != 200 || len(seen) != 1 || seen[0].path != path || r.body != "shop answered GET "+path {
			t.Errorf("public %s: %d %q (shop saw %d requests); want the shop's own answer", path, r.status, r.body, len(seen))
		}
	}
	for _, path := range []string{"/_edgeq/api/queues", "/_edgeq/metrics", "/_edgeq/dashboard"} {
		origin.reset()
		r, err := send("GET", in.public+path, auth)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 404 || len(origin.requests()) != 0 {
			t.Errorf("public %s: %d %s, want edgeq's 404", path, r.status, r.body)
		}
	}
	// Changing state through the public port is impossible too.
	origin.reset()
	r, err = send("POST", in.public+"/api/queue/increment_serving_position?queue_id=drop&increment_by=5", auth)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := send("GET", in.public+"/_edgeq/serving_pos/drop", nil)
	if err != nil || !strings.Contains(serving.body, `"position":0`) {
		t.Fatalf("serving position after a public admin call: %v %s", err, serving.body)
	}
}

// Secrets never reach the logs: not at start, not on admin calls with right or wrong keys, not on a
// reload that changes them (named, never shown), not from a visitor's Authorization header.
func TestLogs_NeverContainSecrets(t *testing.T) {
	origin := newRecordingOrigin(t)
	secrets := []string{"admin-key-ABC123", "identity-secret-DEF456", "visitor-bearer-GHI789", "admin-key-JKL012"}
	text := func(adminKey string) string {
		return strings.Replace(strings.Replace(hostileConfig(origin.URL), "log: {level: error}", "log: {level: debug}", 1),
			`api_key: "the-admin-key"`, `api_key: "`+adminKey+`"`, 1) + "identity: {secret: \"" + secrets[1] + "\"}\n"
	}
	in := start(t, text(secrets[0]))
	for _, key := range []string{secrets[0], "wrong-" + secrets[0], ""} {
		if _, err := send("GET", in.admin+"/api/queues", http.Header{"Authorization": {"Bearer " + key}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := send("GET", in.public+"/protected", http.Header{"Authorization": {"Bearer " + secrets[2]}}); err != nil {
		t.Fatal(err)
	}
	// A request id is a credential (generate_token turns it into the visitor's token): the paths that
	// carry one are logged without it.
	rid, tok := joinAndToken(t, in, "drop")
	secrets = append(secrets, rid, tok)
	for _, path := range []string{"/_edgeq/status/drop/" + rid, "/_edgeq/queue_pos/drop/" + rid} {
		if r, err := send("GET", in.public+path, nil); err != nil || r.status != 200 {
			t.Fatalf("GET %s: %v %+v", path, err, r)
		}
	}
	// So is an invitation code, in its link and in the admin API's DELETE.
	var made struct {
		Items []struct{ Code, URL string } `json:"items"`
	}
	invites, _ := http.NewRequest("POST", in.admin+"/api/queue/drop/invites", strings.NewReader(`{"count": 2}`))
	invites.Header.Set("Authorization", "Bearer "+secrets[0])
	if resp, err := http.DefaultClient.Do(invites); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating invitations: %v %v", err, resp)
	} else {
		json.NewDecoder(resp.Body).Decode(&made)
		resp.Body.Close()
	}
	secrets = append(secrets, made.Items[0].Code, made.Items[1].Code)
	if r, err := send("GET", in.public+made.Items[0].URL, nil); err != nil || r.status != 200 {
		t.Fatalf("GET %s: %v %+v", made.Items[0].URL, err, r)
	}
	if r, err := send("DELETE", in.admin+"/api/queue/drop/invites/"+made.Items[1].Code, http.Header{"Authorization": {"Bearer " + secrets[0]}}); err != nil || r.status != http.StatusNoContent {
		t.Fatalf("DELETE invitation: %v %+v", err, r)
	}
	in.rewrite(t, text(secrets[3]))
	eventually(t, "reload logged", func() bool { return strings.Contains(in.logs.String(), "admin.api_key") })
	logs := in.logs.String()
	// The events above were logged (so the check below looks at something).
	for _, want := range []string{`"msg":"admin request"`, `"path":"/protected"`, `"keys":"admin.api_key"`,
		`"path":"/_edgeq/status/drop/{request_id}"`, `"path":"/_edgeq/queue_pos/drop/{request_id}"`,
		`"path":"/_edgeq/invite/drop/{code}"`, `"path":"/api/queue/drop/invites/{code}"`} {
		if !strings.Contains(logs, want) {
			t.Fatalf("no %s in the logs\n%s", want, logs)
		}
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("secret %q appears in the logs", s)
		}
	}
}
