package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
)

// Requests as real clients send them, which net/http's client would normalise (lower-case
// methods, odd Host headers, HTTP/1.0 without Host, underscore header names), sent raw.

// rawAnswer is edgeq's answer to one raw request.
type rawAnswer struct {
	status int
	header http.Header
	body   string
}

// sendRaw writes request (without its final blank line; "Connection: close" is added) on a new
// connection and reads the answer. method tells the reader whether the answer has a body (HEAD).
func (rg *rig) sendRaw(t *testing.T, method, request string) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", rg.server.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request+"Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%q: %v", request, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rest, _ := io.ReadAll(br); len(rest) > 0 {
		t.Fatalf("%q: %d bytes after the answer: %q", request, len(rest), rest)
	}
	return rawAnswer{resp.StatusCode, resp.Header, string(body)}
}

// wantForwarded fails t unless exactly one request reached the origin since it had seen before (want),
// or none (!want).
func (rg *rig) wantForwarded(t *testing.T, before int64, want bool) {
	t.Helper()
	wanted := int64(0)
	if want {
		wanted = 1
	}
	if forwarded := rg.hits.Load() - before; forwarded != wanted {
		t.Fatalf("%d requests reached the origin, want %d", forwarded, wanted)
	}
}

// echoMethod makes the origin answer with the method it received.
func echoMethod(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "origin saw "+r.Method) }

// A method of letters in any case is the upper-case method: matched by the routes of that method and
// forwarded upper-cased, as Flask, Django, Symfony and Laravel read it. Before, "post" matched
// no "POST /checkout/{product}" route and reached the shop ungated.
func TestMethods_LettersInAnyCaseAreGatedAndForwardedUpperCased(t *testing.T) {
	gate := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Route", route.Name)
			if route.Name == "checkout" {
				http.Error(w, "gated", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}}
	rg := newRig(t, rigOptions{originHandler: echoMethod, steps: []Step{gate}, routes: []config.Route{
		{Name: "checkout", Match: "POST /checkout/{product}"},
		{Name: "cart", Match: "patch /cart/{item}"}, // a pattern's method is upper-cased too
	}})
	cases := []struct {
		request, route string
		status         int
		body           string
	}{
		{"POST /checkout/p5 HTTP/1.1", "checkout", 403, "gated\n"},
		{"post /checkout/p5 HTTP/1.1", "checkout", 403, "gated\n"},
		{"Post /checkout/p5 HTTP/1.1", "checkout", 403, "gated\n"},
		{"pOsT /checkout/p5 HTTP/1.0", "checkout", 403, "gated\n"},
		{"PATCH /cart/1 HTTP/1.1", "cart", 200, "origin saw PATCH"},
		{"patch /cart/1 HTTP/1.1", "cart", 200, "origin saw PATCH"}, // fetch(url, {method: "patch"})
		{"get /page HTTP/1.1", "", 200, "origin saw GET"},
		{"delete /page HTTP/1.1", "", 200, "origin saw DELETE"},
		{"propfind /dav HTTP/1.1", "", 200, "origin saw PROPFIND"},
		{"head /page HTTP/1.1", "", 200, ""}, // a HEAD for the server too: no body follows
	}
	for _, c := range cases {
		t.Run(c.request, func(t *testing.T) {
			method, _, _ := strings.Cut(c.request, " ")
			before := rg.hits.Load()
			a := rg.sendRaw(t, strings.ToUpper(method), c.request+"\r\nHost: shop.example\r\nContent-Length: 0\r\n")
			if a.status != c.status || a.body != c.body || a.header.Get("X-Route") != c.route {
				t.Fatalf("got %d %q by route %q, want %d %q by route %q", a.status, a.body, a.header.Get("X-Route"),
					c.status, c.body, c.route)
			}
			rg.wantForwarded(t, before, c.status == 200)
		})
	}
	// edgeq's own endpoints take them too.
	if a := rg.sendRaw(t, "GET", "get /_edgeq/hello HTTP/1.1\r\nHost: shop.example\r\n"); a.status != 200 {
		t.Fatalf("get on an endpoint: %d %s", a.status, a.body)
	}
}

// Any other method is 400 INVALID_REQUEST before any route or endpoint runs; the origin is not
// contacted (docs/reference.md "Routing").
func TestMethods_OthersAreRefusedBeforeAnyRoute(t *testing.T) {
	rg := newRig(t, rigOptions{originHandler: echoMethod, routes: []config.Route{{Name: "checkout", Match: "POST /checkout/{p}"}}})
	for _, method := range []string{"P0ST", "POST-X", "PO_ST", "M-SEARCH", "VERSION-CONTROL", "GET!", "po.st", "1", "~", "PO%54"} {
		for _, path := range []string{"/checkout/1", "/page", "/_edgeq/hello"} {
			t.Run(method+" "+path, func(t *testing.T) {
				a := rg.sendRaw(t, method, method+" "+path+" HTTP/1.1\r\nHost: shop.example\r\nAccept: text/html\r\n")
				var body struct {
					Error, Field, Problems string
				}
				if err := json.Unmarshal([]byte(a.body), &body); err != nil || a.status != 400 ||
					body.Error != "INVALID_REQUEST" || body.Field != "method" || body.Problems == "" {
					t.Fatalf("%d %s, want 400 INVALID_REQUEST for the field method", a.status, a.body)
				}
				if a.header.Get(CorrelationHeader) == "" {
					t.Fatal("no correlation id on the refusal")
				}
			})
		}
	}
	if rg.hits.Load() != 0 {
		t.Fatalf("%d refused requests reached the origin", rg.hits.Load())
	}
}

// The body deadline bounds the body only: once a fast client's body is in, the origin may take longer
// than the deadline to answer, or stream its answer, and the connection serves the next request.
// (net/http watches a connection whose body is in for a client that leaves; a deadline left standing
// would end that watch with an error and cancel the request.)
func TestBodyTimeout_ASlowAnswerToAFastBodyIsNotCut(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	rg := newRig(t, rigOptions{bodyTimeout: bodyTimeout, originHandler: func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, "got "+string(body)+";")
		w.(http.Flusher).Flush()
		select {
		case <-time.After(4 * bodyTimeout):
			io.WriteString(w, " done")
		case <-r.Context().Done():
		}
	}})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} // one connection, reused
	defer client.CloseIdleConnections()
	for i := range 2 {
		resp, err := client.Post(rg.server.URL+"/upload", "text/plain", strings.NewReader("abc"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "got abc; done" {
			t.Fatalf("request %d: %d %q %v, want the whole slow answer", i, resp.StatusCode, body, err)
		}
	}
}

// cgiName is a header name as CGI-style servers (Puma, Gunicorn, PHP-FPM) hand it to the shop.
func cgiName(name string) string { return strings.ToUpper(strings.ReplaceAll(name, "-", "_")) }

// What a client sends to change the method or path a framework routes by, to speak for edgeq, or,
// from an untrusted peer, to name its own address, never reaches the origin, in any spelling a
// CGI-style server reads as the same header. A trusted proxy's address headers are kept (its
// Forwarded with this hop appended), and the gates' own Edgeq-* headers still arrive.
func TestClientHeaders_NeverReachTheOriginInAnySpelling(t *testing.T) {
	never := []string{"X-HTTP-Method-Override: POST", "x_http_method_override: DELETE", "X-HTTP-Method: PUT",
		"X-Method-Override: PATCH", "X-Original-URL: /checkout/1", "X_Rewrite_URL: /checkout/1",
		"Edgeq_Admission_Id: forged", "EDGEQ_BID_ID: forged", "edgeq-request-id: forged", "Edgeq.Bid.Id: forged"}
	address := []string{"X-Real-IP: 6.6.6.6", "X_Real_IP: 6.6.6.7", "True-Client-IP: 6.6.6.6", "CF-Connecting-IP: 6.6.6.6",
		"X-Client-IP: 6.6.6.6", "X-Forwarded-Port: 443", "X-Forwarded-Prefix: /admin", "X-Forwarded-Server: evil.example",
		"Forwarded: for=6.6.6.6;proto=https", "X-Forwarded-Ssl: on", "Fastly-Client-IP: 6.6.6.6"}
	gate := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("Edgeq-Queue-Id", "the-gates-own")
			next.ServeHTTP(w, r)
		})
	}}
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted peer %v", trusted), func(t *testing.T) {
			o := rigOptions{originHandler: echoHeaders, steps: []Step{gate}, routes: []config.Route{{Name: "page", Match: "/page"}}}
			if trusted {
				o.trusted = []string{"127.0.0.0/8"}
			}
			rg := newRig(t, o)
			sent := append([]string{"GET /page HTTP/1.1", "Host: shop.example", "X-Shop: kept", "Edgeq_Queue_Id: forged",
				"X_Forwarded_Proto: https"}, append(never, address...)...)
			h := decodeHeaders(t, rg.sendRaw(t, "GET", strings.Join(sent, "\r\n")+"\r\n").body)
			got := map[string][]string{} // by CGI name, every spelling's values
			for name, values := range h {
				got[cgiName(name)] = append(got[cgiName(name)], values...)
			}
			for _, line := range never {
				if name, _, _ := strings.Cut(line, ":"); got[cgiName(name)] != nil {
					t.Errorf("%s reached the origin: %q", name, got[cgiName(name)])
				}
			}
			if v := strings.Join(got["EDGEQ_QUEUE_ID"], ","); v != "the-gates-own" {
				t.Errorf("origin saw Edgeq-Queue-Id %q, want only the gate's", v)
			}
			if v := strings.Join(got["X_SHOP"], ","); v != "kept" {
				t.Errorf("origin saw X-Shop %q, want the client's own headers untouched", v)
			}
			for _, line := range address {
				name, value, _ := strings.Cut(line, ": ")
				v := strings.Join(got[cgiName(name)], ",")
				switch {
				case !trusted && v != "":
					t.Errorf("%s from an untrusted peer reached the origin: %q", name, v)
				case trusted && name == "Forwarded" && v != value+", for=127.0.0.1":
					t.Errorf("Forwarded from a trusted peer = %q, want it kept with this hop appended", v)
				case trusted && name != "Forwarded" && !strings.Contains(v, value):
					t.Errorf("%s from a trusted peer = %q, want %q kept", name, v, value)
				}
			}
			if !trusted && strings.Join(got["X_FORWARDED_PROTO"], ",") != "http" {
				t.Errorf("X-Forwarded-Proto spellings at the origin: %q, want only edgeq's http", got["X_FORWARDED_PROTO"])
			}
		})
	}
}

func TestForwardedNode(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":   "192.0.2.7",
		"2001:db8::1": `"[2001:db8::1]"`, // RFC 7239 section 6: brackets, and quotes for the colons
	} {
		if got := forwardedNode(netip.MustParseAddr(in)); got != want {
			t.Errorf("forwardedNode(%s) = %s, want %s", in, got, want)
		}
	}
}

// A host-scoped route cannot be stepped around with a Host that only an origin's leniency makes the
// same site: a Host that is not a host name or an IP literal with an optional port is 400, and so is
// a request without a Host while a route is scoped to a host. Before, "shop.example..",
// "[shop.example]" and an HTTP/1.0 request without Host matched no host and passed through ungated.
func TestHost_HostRoutesCannotBeSteppedAround(t *testing.T) {
	gated := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gated", http.StatusForbidden) })
	}}
	// A host-less route beside it, so other hosts pass through to the shop rather than get 421 (every
	// route naming a host: sites_test.go).
	withHostRoute := newRig(t, rigOptions{steps: []Step{gated}, routes: []config.Route{
		{Name: "checkout", Match: "POST shop.example/checkout/{p}"}, {Name: "search", Match: "GET /search"}}})
	withoutHostRoute := newRig(t, rigOptions{steps: []Step{gated},
		routes: []config.Route{{Name: "checkout", Match: "POST /checkout/{p}"}}})
	label63, name253 := strings.Repeat("a", 63), strings.Repeat(strings.Repeat("a", 49)+".", 5)+"abc"
	cases := []struct {
		rg          *rig
		proto, host string // host "-": no Host line at all
		status      int
	}{
		{withHostRoute, "HTTP/1.1", "shop.example", 403},
		{withHostRoute, "HTTP/1.1", "SHOP.Example.", 403},
		{withHostRoute, "HTTP/1.1", "shop.example:8080", 403},
		{withHostRoute, "HTTP/1.1", "shop.example:", 403},
		{withHostRoute, "HTTP/1.0", "shop.example", 403},
		{withHostRoute, "HTTP/1.1", "other.example", 200},
		{withHostRoute, "HTTP/1.1", "192.0.2.7:80", 200},
		{withHostRoute, "HTTP/1.1", "[2001:db8::7]:80", 200},
		{withHostRoute, "HTTP/1.1", "[::ffff:192.0.2.7]", 200},
		{withHostRoute, "HTTP/1.1", label63 + ".example", 200},
		{withHostRoute, "HTTP/1.1", name253, 200},
		{withHostRoute, "HTTP/1.1", "shop.example..", 400},
		{withHostRoute, "HTTP/1.1", "[shop.example]", 400},
		{withHostRoute, "HTTP/1.1", "shop.example:80:", 400},
		{withHostRoute, "HTTP/1.1", "shop.example:8o", 400},
		{withHostRoute, "HTTP/1.1", "shop.example:123456", 400},
		{withHostRoute, "HTTP/1.1", ".shop.example", 400},
		{withHostRoute, "HTTP/1.1", "shop..example", 400},
		{withHostRoute, "HTTP/1.1", "shop_example", 400},
		{withHostRoute, "HTTP/1.1", "shop.example;x", 400},
		{withHostRoute, "HTTP/1.1", "shop.example%2e", 400},
		{withHostRoute, "HTTP/1.1", label63 + "a.example", 400},
		{withHostRoute, "HTTP/1.1", name253 + "d", 400},
		{withHostRoute, "HTTP/1.1", "[192.0.2.7]", 400},
		{withHostRoute, "HTTP/1.1", "[fe80::1%25eth0]", 400},
		{withHostRoute, "HTTP/1.1", "[2001:db8::7", 400},
		{withHostRoute, "HTTP/1.1", "[2001:db8::7]x", 400},
		{withHostRoute, "HTTP/1.0", "-", 400},
		{withHostRoute, "HTTP/1.1", "", 400},
		// Without host-scoped routes an empty Host matches as well as any: old health checkers send
		// HTTP/1.0 without one. A malformed one is still refused.
		{withoutHostRoute, "HTTP/1.0", "-", 403},
		{withoutHostRoute, "HTTP/1.1", "", 403},
		{withoutHostRoute, "HTTP/1.1", "shop.example..", 400},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %q", c.proto, c.host), func(t *testing.T) {
			request := "POST /checkout/1 " + c.proto + "\r\nContent-Length: 0\r\n"
			if c.host != "-" {
				request += "Host: " + c.host + "\r\n"
			}
			before := c.rg.hits.Load()
			a := c.rg.sendRaw(t, "POST", request)
			if a.status != c.status {
				t.Fatalf("status %d, want %d: %s", a.status, c.status, a.body)
			}
			if c.status == 400 {
				var body struct{ Error, Field, Problems string }
				if err := json.Unmarshal([]byte(a.body), &body); err != nil || body.Error != "INVALID_REQUEST" ||
					body.Field != "host" || body.Problems == "" {
					t.Fatalf("body %s, want INVALID_REQUEST for the field host", a.body)
				}
			}
			c.rg.wantForwarded(t, before, c.status == 200)
		})
	}
}
