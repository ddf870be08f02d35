package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/pebbletest"
	"github.com/edgeq/edgeq/internal/testutil/proc"
)

// acmeConfig is edgeq with automatic certificates for shop.test from Pebble: the plain listener on
// plain and the TLS listener on secure ("127.0.0.1:0" for any), redirecting plain HTTP to HTTPS.
func acmeConfig(t *testing.T, pebble *pebbletest.Server, originURL, plain, secure, store string) string {
	t.Helper()
	return fmt.Sprintf(`
server:
  listen: %q
  tls:
    listen: %q
    redirect_http: true
    acme: {domains: [shop.test], email: ops@shop.test, directory_url: %q, ca_file: %q%s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
%s
log: {level: info}
routes:
  - {name: page, match: "GET /"}
`, plain, secure, pebble.Directory, pebble.CAFile, storageKey(store), originURL, redisKey(store))
}

// store is "redis ADDR", "dir PATH" (the embedded store with a storage directory) or "" (embedded).
func storageKey(store string) string {
	if dir, ok := strings.CutPrefix(store, "dir "); ok {
		return fmt.Sprintf(", storage: %q", dir)
	}
	return ""
}

func redisKey(store string) string {
	if addr, ok := strings.CutPrefix(store, "redis "); ok {
		return fmt.Sprintf("redis: {addr: %q}", addr)
	}
	return ""
}

// servedLeaf waits until in's TLS listener completes a handshake for shop.test with a certificate
// that chains to Pebble's root, and returns its leaf.
func servedLeaf(t *testing.T, in *instance, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	addr := strings.TrimPrefix(in.tls, "https://")
	var lastErr error
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{ServerName: "shop.test", RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			lastErr = err
			continue
		}
		state := conn.ConnectionState()
		conn.Close()
		if state.NegotiatedProtocol != "h2" {
			t.Fatalf("ALPN chose %q, want h2", state.NegotiatedProtocol)
		}
		return state.PeerCertificates[0]
	}
	t.Fatalf("no certificate for shop.test on %s: %v\nedgeq:\n%s", addr, lastErr, in.logs)
	return nil
}

// Two replicas on one Redis, each ordering shop.test at start, against a real ACME server: Pebble
// issues one certificate, and both serve it over HTTP/2. The CA's HTTP-01 check reaches the plain
// listener of one replica, which redirects everything else to HTTPS.
func TestACME_TwoReplicasMakeOneOrderAndServeIt(t *testing.T) {
	pebble := pebbletest.Start(t)
	roots := pebble.Roots(t)
	origin := newOrigin(t)
	store := "redis " + privateRedisWith(t).Addr()
	// Only the first replica's plain listener is where Pebble checks: whichever replica orders, the
	// check is answered there.
	only := func(o *Options) { o.acmeChallenges = []string{"http-01"} }
	a := startWith(t, acmeConfig(t, pebble, origin.URL, "127.0.0.1:"+strconv.Itoa(pebble.HTTPPort), "127.0.0.1:0", store), only)
	b := startWith(t, acmeConfig(t, pebble, origin.URL, "127.0.0.1:0", "127.0.0.1:0", store), only)

	leafA, leafB := servedLeaf(t, a, roots), servedLeaf(t, b, roots)
	if leafA.SerialNumber.Cmp(leafB.SerialNumber) != 0 {
		t.Fatalf("the replicas serve different certificates: %v and %v", leafA.SerialNumber, leafB.SerialNumber)
	}
	if n := pebble.Issued(); n != 1 {
		t.Fatalf("Pebble issued %d certificates for two replicas, want 1\n%s", n, pebble.Log())
	}
	if !strings.Contains(a.logs.String()+b.logs.String(), `"challenge":"http-01"`) {
		t.Fatalf("no HTTP-01 check answered:\nA:\n%s\nB:\n%s", a.logs, b.logs)
	}

	// A page over HTTPS from each, verified against Pebble's root by name; plain HTTP redirects.
	for _, in := range []*instance{a, b} {
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(in.tls, "https://"))
		client := &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
			},
		}}
		resp, err := client.Get("https://shop.test:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("GET over TLS: %d over HTTP/%d", resp.StatusCode, resp.ProtoMajor)
		}
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest("GET", in.public+"/page?x=1", nil)
		req.Host = "shop.test"
		resp, err = noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := "https://shop.test:" + port + "/page?x=1"; resp.StatusCode != 308 || resp.Header.Get("Location") != want {
			t.Fatalf("plain HTTP: %d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
		if left := in.metric(t, `edgeq_tls_certificate_expiry_seconds{name="shop.test"}`); left < 3600 {
			t.Fatalf("the expiry metric says %v s left", left)
		}
	}
}

// One process on the embedded store keeps its certificate in a directory: proved over TLS-ALPN-01 on
// the TLS listener, and after a restart served from the directory without a new order.
func TestACME_TLSALPNAndAStorageDirectoryThatOutlivesTheProcess(t *testing.T) {
	pebble := pebbletest.Start(t)
	roots := pebble.Roots(t)
	origin := newOrigin(t)
	dir := t.TempDir()
	text := acmeConfig(t, pebble, origin.URL, "127.0.0.1:0", "127.0.0.1:"+strconv.Itoa(pebble.TLSPort), "dir "+dir)
	only := func(o *Options) { o.acmeChallenges = []string{"tls-alpn-01"} }

	first := startWith(t, text, only)
	leaf := servedLeaf(t, first, roots)
	if n := pebble.Issued(); n != 1 {
		t.Fatalf("Pebble issued %d certificates, want 1\n%s", n, pebble.Log())
	}
	if !strings.Contains(first.logs.String(), `"challenge":"tls-alpn-01"`) {
		t.Fatalf("no TLS-ALPN-01 check answered:\n%s", first.logs)
	}
	first.cancel()
	if err := <-first.done; err != nil {
		t.Fatal(err)
	}
	first.done <- nil // for the cleanup

	again := startWith(t, text, only)
	if got := servedLeaf(t, again, roots); got.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Fatalf("after a restart: serial %v, want %v", got.SerialNumber, leaf.SerialNumber)
	}
	if n := pebble.Issued(); n != 1 {
		t.Fatalf("Pebble issued %d certificates after a restart, want still 1", n)
	}
}

// edgeqBinary builds cmd/edgeq once per test process, for tests that need a replica in a process of
// its own.
var edgeqBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "edgeq-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "edgeq")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/edgeq/edgeq/cmd/edgeq").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building edgeq: %v\n%s", err, out)
	}
	return bin, nil
})

// Behind a load balancer the CA's check reaches whichever replica it picks, not the one that ordered:
// a replica in a process of its own orders shop.test while the only listener the CA can reach is
// another process's, which answers the check from the store (certmagic notes it as distributed).
func TestACME_AnotherProcessAnswersTheCheckFromTheStore(t *testing.T) {
	bin, err := edgeqBinary()
	if err != nil {
		t.Fatal(err)
	}
	pebble := pebbletest.Start(t)
	roots := pebble.Roots(t)
	origin := newOrigin(t)
	store := "redis " + privateRedisWith(t).Addr()
	// The answering replica manages another name, so the order for shop.test is the other process's;
	// it listens where the CA checks both challenges, so whichever the other picks reaches it.
	answering := strings.Replace(acmeConfig(t, pebble, origin.URL, "127.0.0.1:"+strconv.Itoa(pebble.HTTPPort),
		"127.0.0.1:"+strconv.Itoa(pebble.TLSPort), store), "domains: [shop.test]", "domains: [other.test]", 1)
	a := start(t, answering)

	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = proc.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	text := acmeConfig(t, pebble, origin.URL, fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), store)
	text = strings.Replace(text, `admin: {listen: "127.0.0.1:0"`, fmt.Sprintf(`admin: {listen: "127.0.0.1:%d"`, ports[2]), 1)
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := proc.StartReady(exec.Command(bin, "-config", path), 30*time.Second, 100*time.Millisecond, func() error {
		_, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[1]))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(syscall.SIGTERM, 10*time.Second) })
	other := &instance{tls: fmt.Sprintf("https://127.0.0.1:%d", ports[1]), logs: &lockedBuffer{}}
	leaf := servedLeaf(t, other, roots)
	if leaf.Subject.CommonName != "shop.test" && !slices.Contains(leaf.DNSNames, "shop.test") {
		t.Fatalf("served %v", leaf.DNSNames)
	}
	answered := slices.ContainsFunc(strings.Split(a.logs.String(), "\n"), func(line string) bool {
		return strings.Contains(line, "served key authentication") && strings.Contains(line, `"distributed":true`) &&
			strings.Contains(line, `"shop.test"`)
	})
	if !answered {
		t.Fatalf("the answering replica did not answer shop.test's check from the store:\n%s\nthe ordering process:\n%s",
			a.logs, b.Output())
	}
}

// Certificate files and automatic certificates on one listener: while ACME has no certificate for a
// name (here its CA never answers), a file that names it is served, and names ACME does not manage
// get the files' choice.
func TestACME_FilesServeUntilACMEHasACertificate(t *testing.T) {
	e := newTLSEdge(t)
	dead, err := proc.FreePort() // nothing listens: every order fails
	if err != nil {
		t.Fatal(err)
	}
	acmeKeys := map[string]any{"acme": map[string]any{
		"domains": []any{"shop.test"}, "directory_url": fmt.Sprintf("https://127.0.0.1:%d/dir", dead),
	}}
	in := e.start(t, configText(newOrigin(t).URL, `  - {name: page, match: "GET /"}`), acmeKeys)
	addr := strings.TrimPrefix(in.tls, "https://")
	for _, name := range []string{"localhost", "shop.test"} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := conn.ConnectionState().PeerCertificates[0]
		conn.Close()
		if got.SerialNumber.Cmp(e.leaf.Cert.SerialNumber) != 0 {
			t.Fatalf("%s: served %v, want the file's certificate", name, got.DNSNames)
		}
	}
	// The files' certificate verifies for its own name, as without ACME.
	c := e.client(t, "h2")
	if code := statusOf2(t, c, in.tls+"/"); code != 200 {
		t.Fatalf("GET over TLS: %d", code)
	}
}
