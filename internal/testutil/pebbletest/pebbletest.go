// Package pebbletest starts a real ACME server for tests: Let's Encrypt's Pebble, with its DNS stand-in
// (pebble-challtestsrv) answering 127.0.0.1 for every name, so that Pebble's validation of an HTTP-01
// or TLS-ALPN-01 challenge for any domain comes to the test's own listener. Both are Go tools of this
// module (go.mod's tool lines), built once per test process; nothing is fetched from elsewhere at run
// time beyond what `go build` needs.
package pebbletest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/proc"
)

const module = "github.com/letsencrypt/pebble/v2"

// Server is a running Pebble.
type Server struct {
	// Directory is the ACME directory URL; CAFile trusts Pebble's own HTTPS (not the certificates it
	// issues: Roots is their root).
	Directory, CAFile string
	// HTTPPort and TLSPort are where Pebble validates challenges, on 127.0.0.1: the test serves them.
	HTTPPort, TLSPort int
	management        string
	log               *lockedBuffer
}

var build struct {
	once     sync.Once
	dir, src string
	err      error
}

// binaries builds pebble and pebble-challtestsrv once and returns their directory and Pebble's source
// directory (its test certificates).
func binaries() (string, string, error) {
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "edgeq-pebble-")
		if build.err != nil {
			return
		}
		// Building fetches the module into the module cache on a machine that has not got it yet;
		// only then does go list know its directory.
		cmd := exec.Command("go", "build", "-o", build.dir, module+"/cmd/pebble", module+"/cmd/pebble-challtestsrv")
		if msg, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("pebbletest: building Pebble: %v\n%s", err, msg)
			return
		}
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
		build.src = strings.TrimSpace(string(out))
		if err != nil || build.src == "" {
			build.err = fmt.Errorf("pebbletest: locating %s: %v", module, err)
		}
	})
	return build.dir, build.src, build.err
}

// Start runs Pebble and its DNS stand-in until t ends. Challenges are validated on HTTPPort and
// TLSPort of 127.0.0.1, free ports chosen here.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, src, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dns, listen, management := proc.FreeAddr(t), proc.FreeAddr(t), proc.FreeAddr(t)
	s := &Server{
		Directory: "https://" + listen + "/dir", CAFile: filepath.Join(src, "test/certs/pebble.minica.pem"),
		HTTPPort: port(proc.FreeAddr(t)), TLSPort: port(proc.FreeAddr(t)), management: management, log: &lockedBuffer{},
	}
	config := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": management,
		"certificate": filepath.Join(src, "test/certs/localhost/cert.pem"), "privateKey": filepath.Join(src, "test/certs/localhost/key.pem"),
		"httpPort": s.HTTPPort, "tlsPort": s.TLSPort, "ocspResponderURL": "", "externalAccountBindingRequired": false,
		"retryAfter": map[string]int{"authz": 1, "order": 1}, "keyAlgorithm": "ecdsa",
	}}
	raw, _ := json.Marshal(config)
	path := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, s.log, nil, filepath.Join(bin, "pebble-challtestsrv"), "-dnsserver", dns, "-defaultIPv4", "127.0.0.1",
		"-defaultIPv6", "", "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "", "-management", proc.FreeAddr(t))
	// No random sleeps before validation, no nonces refused at random: the tests time what edgeq does.
	run(t, s.log, []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"}, filepath.Join(bin, "pebble"),
		"-config", path, "-dnsserver", dns)
	client := s.Client(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(s.Directory)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebbletest: Pebble did not answer: %v\n%s", err, s.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CAPool trusts Pebble's own HTTPS (its directory), as CAFile.
func (s *Server) CAPool(t testing.TB) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(s.CAFile)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("pebbletest: %s: %v", s.CAFile, err)
	}
	return pool
}

// Client is an HTTP client that trusts Pebble's own HTTPS.
func (s *Server) Client(t testing.TB) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.CAPool(t)}}}
}

// Roots is the pool of the root that signs what Pebble issues (it makes a new one each start).
func (s *Server) Roots(t testing.TB) *x509.CertPool {
	t.Helper()
	resp, err := s.Client(t).Get("https://" + s.management + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	pem, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("pebbletest: no root from the management interface: %s", pem)
	}
	return pool
}

// Issued counts the certificates Pebble issued so far (its log says so for each).
func (s *Server) Issued() int { return strings.Count(s.log.String(), "Issued certificate serial") }

// Log is what Pebble and its DNS stand-in wrote.
func (s *Server) Log() string { return s.log.String() }

func run(t testing.TB, log io.Writer, env []string, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
}

func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
