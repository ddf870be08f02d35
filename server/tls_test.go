package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgeq/edgeq/internal/testutil/testcert"
)

// protocols are the ways a visitor reaches edgeq that the parity tests run their scenarios over:
// HTTP/1.1 on the plain listener ("http"), and HTTP/1.1 and HTTP/2 over TLS, chosen by ALPN.
var protocols = []string{"http", "h1", "h2"}

// tlsEdge is what a test's TLS listener serves: a leaf for localhost and 127.0.0.1, signed by an
// authority of the test's own, in files the test may replace.
type tlsEdge struct {
	ca                *testcert.CA
	leaf              testcert.Leaf
	certFile, keyFile string
}

func newTLSEdge(t *testing.T) *tlsEdge {
	t.Helper()
	e := &tlsEdge{ca: testcert.NewCA(t)}
	e.leaf = e.ca.Issue(t, testcert.Options{})
	e.certFile, e.keyFile = e.leaf.Files(t, t.TempDir(), "edge")
	return e
}

// tls is a server.tls section: a listener on a free port with the edge's certificate, and keys.
func (e *tlsEdge) tls(keys map[string]any) map[string]any {
	section := map[string]any{
		"listen":       "127.0.0.1:0",
		"certificates": []any{map[string]any{"cert_file": e.certFile, "key_file": e.keyFile}},
	}
	for k, v := range keys {
		section[k] = v
	}
	return section
}

// withServer sets keys of the server section of a configuration text (server.tls, server.h2c).
func withServer(t *testing.T, text string, keys map[string]any) string {
	t.Helper()
	var tree map[string]any
	if err := yaml.Unmarshal([]byte(text), &tree); err != nil {
		t.Fatal(err)
	}
	server, _ := tree["server"].(map[string]any)
	if server == nil {
		server = map[string]any{}
	}
	for k, v := range keys {
		server[k] = v
	}
	tree["server"] = server
	out, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// startTLS starts edgeq on text with a TLS listener serving the edge's certificate.
func (e *tlsEdge) start(t *testing.T, text string, tlsKeys map[string]any) *instance {
	t.Helper()
	in := start(t, withServer(t, text, map[string]any{"tls": e.tls(tlsKeys)}))
	if in.tls == "" {
		t.Fatal("no TLS listener started")
	}
	return in
}

// client speaks proto ("h1" or "h2") to the TLS listener, trusting the test's authority, and fails
// any answer that came over another protocol.
func (e *tlsEdge) client(t *testing.T, proto string) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.ca.Pool()}, Protocols: new(http.Protocols)}
	major := 1
	switch proto {
	case "h1":
		tr.Protocols.SetHTTP1(true)
	case "h2":
		tr.Protocols.SetHTTP2(true)
		major = 2
	default:
		t.Fatalf("unknown protocol %q", proto)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: protoCheck{tr, major}}
}

// over returns a client and the base URL that reach in by proto (protocols).
func (e *tlsEdge) over(t *testing.T, in *instance, proto string) (*http.Client, string) {
	t.Helper()
	if proto == "http" {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: protoCheck{tr, 1}}, in.public
	}
	return e.client(t, proto), in.tls
}

// hangUpOver sends one request by proto and leaves without its answer: over HTTP/1.1 the client
// closes the connection (hangUp); over HTTP/2 it resets the request's stream (RST_STREAM CANCEL) on
// a connection that carries other requests on, as a browser does when a tab closes.
func hangUpOver(t *testing.T, client *http.Client, proto, base, method, path string, header http.Header, body string) {
	t.Helper()
	if proto != "h2" {
		hangUp(t, base, method, path, header, body)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 20 ms after the whole request went out (its streams share the connection with many others):
	// long enough for edgeq to read it and start on it, as in hangUp.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		time.AfterFunc(20*time.Millisecond, cancel)
	}})
	req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close() // answered before the client left (a refusal comes at once): not read, as in hangUp
	}
}

type protoCheck struct {
	http.RoundTripper
	major int
}

func (p protoCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.RoundTripper.RoundTrip(req)
	if err == nil && resp.ProtoMajor != p.major {
		resp.Body.Close()
		return nil, fmt.Errorf("answered over %s, want HTTP/%d", resp.Proto, p.major)
	}
	return resp, err
}

// served returns the leaf the TLS listener at base gives a new connection asking for serverName.
func served(t *testing.T, base, serverName string, config *tls.Config) (*tls.ConnectionState, error) {
	t.Helper()
	if config == nil {
		config = &tls.Config{}
	}
	config.ServerName, config.InsecureSkipVerify = serverName, true // the test checks which leaf, not trust
	u, _ := url.Parse(base)
	conn, err := tls.Dial("tcp", u.Host, config)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	cs := conn.ConnectionState()
	return &cs, nil
}

// A renewal: certificate files replaced while edgeq serves reach the next connection, without a
// restart; a replacement whose key belongs to another certificate is logged and the certificate in
// service stays. The expiry metric follows the certificate in service.
func TestTLS_ReplacedCertificateFilesReachNewConnectionsABrokenPairKeepsTheOld(t *testing.T) {
	e := newTLSEdge(t)
	in := e.start(t, configText(newOrigin(t).URL, ""), nil)
	leafServed := func() *x509.Certificate {
		cs, err := served(t, in.tls, "localhost", nil)
		if err != nil {
			t.Fatal(err)
		}
		return testcert.Peer(cs)
	}
	if !leafServed().Equal(e.leaf.Cert) {
		t.Fatal("not the configured certificate")
	}
	expiry := func() float64 { return in.metric(t, `edgeq_tls_certificate_expiry_seconds{name="localhost"}`) }
	if s := expiry(); s < 23*3600 || s > 24*3600 {
		t.Fatalf("expiry metric %v, want about a day", s)
	}

	renewed := e.ca.Issue(t, testcert.Options{NotAfter: time.Now().Add(90 * 24 * time.Hour)})
	renewed.Write(t, e.certFile, e.keyFile)
	eventually(t, "the renewed certificate served", func() bool { return leafServed().Equal(renewed.Cert) })
	if s := expiry(); s < 89*24*3600 {
		t.Fatalf("expiry metric %v after the renewal, want about 90 days", s)
	}
	if code := statusOf2(t, e.client(t, "h2"), in.tls+"/"); code != 200 {
		t.Fatalf("after the renewal: %d", code)
	}

	broken := e.ca.Issue(t, testcert.Options{})
	testcert.Leaf{Cert: broken.Cert, CertPEM: broken.CertPEM, KeyPEM: e.leaf.KeyPEM}.Write(t, e.certFile, e.keyFile)
	eventually(t, "the broken pair logged", func() bool {
		return strings.Contains(in.logs.String(), "TLS certificate files changed but do not load")
	})
	if !leafServed().Equal(renewed.Cert) {
		t.Fatal("a certificate whose key does not match was put in service")
	}
}

func statusOf2(t *testing.T, c *http.Client, target string) int {
	t.Helper()
	resp, err := c.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Several certificates: each client gets the one for the name it asks for (SNI), wildcards
// included; a client that names none gets the first.
func TestTLS_TheCertificateIsChosenByTheNameAskedFor(t *testing.T) {
	e := newTLSEdge(t)
	dir := t.TempDir()
	shop := e.ca.Issue(t, testcert.Options{Names: []string{"shop.example"}})
	shopCert, shopKey := shop.Files(t, dir, "shop")
	wild := e.ca.Issue(t, testcert.Options{Names: []string{"*.example.org"}})
	wildCert, wildKey := wild.Files(t, dir, "wild")
	in := e.start(t, configText(newOrigin(t).URL, ""), map[string]any{"certificates": []any{
		map[string]any{"cert_file": e.certFile, "key_file": e.keyFile},
		map[string]any{"cert_file": shopCert, "key_file": shopKey},
		map[string]any{"cert_file": wildCert, "key_file": wildKey},
	}})
	for name, want := range map[string]testcert.Leaf{"shop.example": shop, "pay.example.org": wild, "": e.leaf, "localhost": e.leaf} {
		cs, err := served(t, in.tls, name, nil)
		if err != nil || !testcert.Peer(cs).Equal(want.Cert) {
			t.Errorf("asking for %q: %v, got %v", name, err, testcert.Peer(cs))
		}
	}
	// A browser asking for shop.example checks the chain: served over HTTP/2 with it.
	c := e.client(t, "h2")
	c.Transport.(protoCheck).RoundTripper.(*http.Transport).TLSClientConfig.ServerName = "shop.example"
	if code := statusOf2(t, c, in.tls+"/"); code != 200 {
		t.Fatalf("shop.example over h2: %d", code)
	}
}

// min_version 1.2 refuses TLS 1.1 and the TLS 1.2 suites without forward secrecy or AEAD; 1.3
// refuses 1.2. HTTP/2 is offered by ALPN beside HTTP/1.1.
func TestTLS_VersionsSuitesAndALPN(t *testing.T) {
	e := newTLSEdge(t)
	origin := newOrigin(t).URL
	in12 := e.start(t, configText(origin, ""), nil)
	in13 := e.start(t, configText(origin, ""), map[string]any{"min_version": "1.3"})
	for _, c := range []struct {
		what   string
		base   string
		config *tls.Config
		ok     bool
		alpn   string
	}{
		{"TLS 1.1 against 1.2", in12.tls, &tls.Config{MaxVersion: tls.VersionTLS11}, false, ""},
		{"TLS 1.2 with a CBC suite", in12.tls, &tls.Config{MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false, ""},
		{"TLS 1.2 with ECDHE and AES-GCM", in12.tls, &tls.Config{MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, NextProtos: []string{"h2", "http/1.1"}}, true, "h2"},
		{"TLS 1.3 asking for HTTP/1.1", in12.tls, &tls.Config{NextProtos: []string{"http/1.1"}}, true, "http/1.1"},
		{"TLS 1.2 against 1.3", in13.tls, &tls.Config{MaxVersion: tls.VersionTLS12}, false, ""},
		{"TLS 1.3 against 1.3", in13.tls, &tls.Config{NextProtos: []string{"h2", "http/1.1"}}, true, "h2"},
	} {
		cs, err := served(t, c.base, "localhost", c.config)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: refused: %v", c.what, err)
		case !c.ok && err == nil:
			t.Errorf("%s: accepted (%s)", c.what, tls.VersionName(cs.Version))
		case c.ok && cs.NegotiatedProtocol != c.alpn:
			t.Errorf("%s: ALPN %q, want %q", c.what, cs.NegotiatedProtocol, c.alpn)
		}
	}
}

// redirect_http: the plain listener sends browsers to the same URL over HTTPS with 308 (any
// method), except ACME challenges and health checks, and requests a trusted proxy says arrived over
// HTTPS. HSTS is on every answer of the TLS listener, the shop's (replacing its own) and edgeq's,
// and on none of the plain listener.
func TestTLS_RedirectHTTPAndHSTS(t *testing.T) {
	e := newTLSEdge(t)
	var seen []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		w.Header().Set("Strict-Transport-Security", "max-age=1")
		fmt.Fprint(w, "shop")
	}))
	t.Cleanup(origin.Close)
	text := withServer(t, configText(origin.URL, ""), map[string]any{"trusted_proxies": []any{"127.0.0.2"}})
	in := e.start(t, text, map[string]any{"redirect_http": true, "hsts": "max-age=31536000; includeSubDomains"})
	_, tlsPort, _ := net.SplitHostPort(strings.TrimPrefix(in.tls, "https://"))
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path, host string
		want               string // Location, or "" for the shop's answer
	}{
		{"GET", "/products/1?color=red&size=42", "shop.example", "https://shop.example:" + tlsPort + "/products/1?color=red&size=42"},
		{"POST", "/checkout/1", "shop.example:8080", "https://shop.example:" + tlsPort + "/checkout/1"},
		{"GET", "/a%2Fb//c?q=%20", "[2001:db8::1]:80", "https://[2001:db8::1]:" + tlsPort + "/a%2Fb//c?q=%20"},
		{"GET", "/.well-known/acme-challenge/token123", "shop.example", ""},
		{"GET", "/healthz", "shop.example", ""},
		{"GET", "/readyz", "shop.example", ""},
	} {
		req, _ := http.NewRequest(c.method, in.public+c.path, nil)
		req.Host = c.host
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case c.want != "" && (resp.StatusCode != 308 || resp.Header.Get("Location") != c.want):
			t.Errorf("%s %s (Host %s): %d %q, want 308 %s", c.method, c.path, c.host, resp.StatusCode, resp.Header.Get("Location"), c.want)
		case c.want == "" && resp.StatusCode != 200:
			t.Errorf("%s %s: %d, want the shop's answer", c.method, c.path, resp.StatusCode)
		}
		if v := resp.Header.Get("Strict-Transport-Security"); v != "" && c.want == "" && v != "max-age=1" {
			t.Errorf("%s on the plain listener: HSTS %q", c.path, v)
		}
	}
	if strings.Join(seen, ",") != "GET /.well-known/acme-challenge/token123,GET /healthz,GET /readyz" {
		t.Fatalf("the shop saw %v", seen)
	}

	// Over TLS: the shop's answer and edgeq's own carry the configured HSTS, once.
	for _, proto := range []string{"h1", "h2"} {
		c := e.client(t, proto)
		for _, path := range []string{"/products/1", "/_edgeq/products/none", "/_edgeq/static/nothing"} {
			resp, err := c.Get(in.tls + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if v := resp.Header.Values("Strict-Transport-Security"); len(v) != 1 || v[0] != "max-age=31536000; includeSubDomains" {
				t.Errorf("%s %s (%d): HSTS %q", proto, path, resp.StatusCode, v)
			}
		}
	}
}

// A trusted proxy that terminated TLS in front of the plain listener is not sent round in circles.
func TestTLS_RedirectHTTPSparesATrustedProxysHTTPS(t *testing.T) {
	e := newTLSEdge(t)
	text := withServer(t, configText(newOrigin(t).URL, ""), map[string]any{"trusted_proxies": []any{"127.0.0.1"}})
	in := e.start(t, text, map[string]any{"redirect_http": true})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for proto, want := range map[string]int{"https": 200, "http": 308, "": 308} {
		req, _ := http.NewRequest("GET", in.public+"/", nil)
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("X-Forwarded-Proto %q from a trusted proxy: %d, want %d", proto, resp.StatusCode, want)
		}
	}
}

// server.h2c: HTTP/2 by prior knowledge on the plain listener when on; when off the same client
// gets no HTTP/2 answer.
func TestH2C_PriorKnowledgeOnlyWhenOn(t *testing.T) {
	origin := newOrigin(t).URL
	h2c := func() *http.Client {
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	on := start(t, withServer(t, configText(origin, ""), map[string]any{"h2c": true}))
	resp, err := h2c().Get(on.public + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("h2c on: %s %d", resp.Proto, resp.StatusCode)
	}
	// HTTP/1.1 still works beside it.
	if code := get(t, on.public+"/"); code != 200 {
		t.Fatalf("HTTP/1.1 with h2c on: %d", code)
	}

	off := start(t, configText(origin, ""))
	if resp, err := h2c().Get(off.public + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("h2c off: answered %s %d", resp.Proto, resp.StatusCode)
	}
}

// Cookies edgeq sets over TLS are Secure (tokens.cookie_secure auto), and the shop is told the
// visitor came over HTTPS, over either protocol; on the plain listener neither.
func TestTLS_CookiesAreSecureAndTheShopHearsHTTPS(t *testing.T) {
	e := newTLSEdge(t)
	protos := make(chan string, 10)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.Header.Get("X-Forwarded-Proto")
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(origin.Close)
	in := e.start(t, configText(origin.URL, `  - {name: page, match: "GET /p/{id}", queue: q}
queues:
  - {id: q, capacity: 10}`), nil)
	for _, c := range []struct {
		what   string
		rt     http.RoundTripper // no redirects followed: the cookies of the first answer
		base   string
		secure bool
	}{
		{"h1", e.client(t, "h1").Transport, in.tls, true},
		{"h2", e.client(t, "h2").Transport, in.tls, true},
		{"plain", http.DefaultTransport, in.public, false},
	} {
		req, _ := http.NewRequest("GET", c.base+"/p/1", nil)
		req.Header.Set("Accept", "text/html")
		resp, err := c.rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if resp.StatusCode != 200 || len(cookies) == 0 {
			t.Fatalf("%s: %d with cookies %v", c.what, resp.StatusCode, cookies)
		}
		for _, ck := range cookies {
			if ck.Secure != c.secure {
				t.Errorf("%s: cookie %s Secure=%v", c.what, ck.Name, ck.Secure)
			}
		}
		if want, got := map[bool]string{true: "https", false: "http"}[c.secure], <-protos; got != want {
			t.Errorf("%s: the shop got X-Forwarded-Proto %q, want %q", c.what, got, want)
		}
	}
}

// A certificate that does not load stops start-up and `edgeq check`, naming the pair.
func TestTLS_ACertificateThatDoesNotLoadIsAStartupError(t *testing.T) {
	e := newTLSEdge(t)
	missing := filepath.Join(t.TempDir(), "missing.key")
	text := withServer(t, configText("http://127.0.0.1:9", ""), map[string]any{"tls": e.tls(map[string]any{
		"certificates": []any{map[string]any{"cert_file": e.certFile, "key_file": missing}}})})
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(text), 0o600)
	err := Run(context.Background(), Options{ConfigPath: path, LogOutput: io.Discard})
	var startup *StartupError
	if !errors.As(err, &startup) || !strings.Contains(err.Error(), "server.tls.certificates[0]: key_file: open "+missing) {
		t.Fatalf("Run: %v", err)
	}
	problems, _, err := Check(path)
	if err != nil || len(problems) != 1 || problems[0].Path != "server.tls.certificates[0]" ||
		!strings.HasPrefix(problems[0].Reason, "key_file: open "+missing) {
		t.Fatalf("check: %v %+v", err, problems)
	}
}
