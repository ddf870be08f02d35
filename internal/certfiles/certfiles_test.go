package certfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/testutil/testcert"
	"github.com/edgeq/edgeq/internal/testutil/wait"
)

// serve answers TLS handshakes with s's certificates until the test ends, and returns the address.
func serve(t *testing.T, s *Store) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: s.GetCertificate})
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
				c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake connects as a client naming serverName (none when "") and returns the leaf it was given;
// config adds the client's own limits.
func handshake(t *testing.T, addr, serverName string, config *tls.Config) *x509.Certificate {
	t.Helper()
	if config == nil {
		config = &tls.Config{}
	}
	config.ServerName, config.InsecureSkipVerify = serverName, true // the test checks which leaf, not trust
	conn, err := tls.Dial("tcp", addr, config)
	if err != nil {
		t.Fatalf("handshake for %q: %v", serverName, err)
	}
	defer conn.Close()
	cs := conn.ConnectionState()
	return testcert.Peer(&cs)
}

// lockedBuffer collects a logger's lines from the watch goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

func TestGetCertificate_ByNameThenWildcardThenTheDefault(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	shop := ca.Issue(t, testcert.Options{Names: []string{"shop.example", "www.shop.example"}})
	shopRSA := ca.Issue(t, testcert.Options{Names: []string{"shop.example"}, RSA: true})
	wildcard := ca.Issue(t, testcert.Options{Names: []string{"*.example.org"}})
	var pairs []Pair
	for i, leaf := range []testcert.Leaf{shop, shopRSA, wildcard} {
		c, k := leaf.Files(t, dir, string(rune('a'+i)))
		pairs = append(pairs, Pair{c, k})
	}
	s, err := Load(Options{Pairs: pairs})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	rsaOnly := func() *tls.Config {
		return &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}
	}
	for _, c := range []struct {
		what, name string
		config     *tls.Config
		want       testcert.Leaf
	}{
		{"an exact name", "shop.example", nil, shop},
		{"another name of the same leaf, in capitals with a trailing dot", "WWW.Shop.Example.", nil, shop},
		{"a client that takes RSA only gets the RSA certificate of the name", "shop.example", rsaOnly(), shopRSA},
		{"a name under a wildcard", "pay.example.org", nil, wildcard},
		{"a wildcard covers one label only: the default", "a.pay.example.org", nil, shop},
		{"the wildcard's parent is not covered: the default", "example.org", nil, shop},
		{"no SNI: the default", "", nil, shop},
		{"an unknown name: the default", "elsewhere.test", nil, shop},
	} {
		if got := handshake(t, addr, c.name, c.config); !got.Equal(c.want.Cert) {
			t.Errorf("%s (%q): got the certificate for %v, want %v", c.what, c.name, got.DNSNames, c.want.Cert.DNSNames)
		}
	}
}

func TestLoad_APairThatDoesNotLoadIsNamed(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	good, goodKey := ca.Issue(t, testcert.Options{}).Files(t, dir, "good")
	other, otherKey := ca.Issue(t, testcert.Options{}).Files(t, dir, "other")
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a PEM file"), 0o600)
	for _, c := range []struct {
		pairs []Pair
		want  string
	}{
		{[]Pair{{good, goodKey}, {other, goodKey}}, "certificates[1]: " + other + " and " + goodKey + ": tls: private key does not match public key"},
		{[]Pair{{filepath.Join(dir, "missing.crt"), goodKey}}, "certificates[0]: cert_file: open " + filepath.Join(dir, "missing.crt")},
		{[]Pair{{good, filepath.Join(dir, "missing.key")}}, "certificates[0]: key_file: open "},
		{[]Pair{{junk, otherKey}}, "certificates[0]: " + junk + " and " + otherKey + ": tls: failed to find any PEM data in certificate input"},
		{nil, "certificates: none given"},
	} {
		_, err := Load(Options{Pairs: c.pairs})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Load(%v): %v, want %q", c.pairs, err, c.want)
		}
	}
}

// A renewal: new files put over the old ones while serving reach the next connection, with no
// restart; a replacement that does not load (a key that belongs to another certificate, a truncated
// file) is logged once and the certificate in service stays until a good pair arrives.
func TestWatch_ReplacedFilesReachNewConnectionsABrokenPairKeepsTheOld(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	first := ca.Issue(t, testcert.Options{Names: []string{"shop.example"}})
	certFile, keyFile := first.Files(t, dir, "shop")
	logs := &lockedBuffer{}
	s, err := Load(Options{Pairs: []Pair{{certFile, keyFile}}, Interval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Watch(ctx)
	addr := serve(t, s)
	served := func() *x509.Certificate { return handshake(t, addr, "shop.example", nil) }
	if !served().Equal(first.Cert) {
		t.Fatal("not the first certificate")
	}

	second := ca.Issue(t, testcert.Options{Names: []string{"shop.example"}})
	second.Write(t, certFile, keyFile)
	wait.Until(t, 10*time.Second, "the replaced certificate served", func() bool { return served().Equal(second.Cert) })
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Fatalf("no reload logged:\n%s", logs)
	}

	// A new certificate with the key of another one: refused, logged, the second still served.
	third := ca.Issue(t, testcert.Options{Names: []string{"shop.example"}})
	testcert.Leaf{Cert: third.Cert, CertPEM: third.CertPEM, KeyPEM: first.KeyPEM}.Write(t, certFile, keyFile)
	wait.Until(t, 10*time.Second, "the broken pair logged", func() bool {
		return strings.Contains(logs.String(), "do not load: the previous certificate is still served")
	})
	for range 5 {
		s.Look()
	}
	if !served().Equal(second.Cert) {
		t.Fatal("a pair that does not load was put in service")
	}
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Fatalf("the broken pair was logged %d times, want once", n)
	}
	// Truncated in place, then mended: the good pair is served.
	os.WriteFile(certFile, third.CertPEM[:40], 0o600)
	third.Write(t, certFile, keyFile)
	wait.Until(t, 10*time.Second, "the mended pair served", func() bool { return served().Equal(third.Cert) })
}

// A tool that replaces the certificate and then the key, a moment apart: the certificate is never
// read with the old key, so nothing is logged as broken and the new pair is served.
func TestLook_APairReplacedOneFileAtATimeIsReadOnceBothAreIn(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	first := ca.Issue(t, testcert.Options{})
	certFile, keyFile := first.Files(t, dir, "shop")
	logs := &lockedBuffer{}
	s, err := Load(Options{Pairs: []Pair{{certFile, keyFile}}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	second := ca.Issue(t, testcert.Options{})
	os.WriteFile(certFile, second.CertPEM, 0o600)
	s.Look() // sees the certificate changed: waits for the files to settle
	os.WriteFile(keyFile, second.KeyPEM, 0o600)
	s.Look() // sees the key changed: waits again
	s.Look()
	if got := s.Leaves()[0]; !got.Equal(second.Cert) || strings.Contains(logs.String(), "do not load") {
		t.Fatalf("after both files: serving %v, logs:\n%s", got.SerialNumber, logs)
	}
}

func TestCollector_SecondsUntilEachLeafExpires(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	shop := ca.Issue(t, testcert.Options{Names: []string{"shop.example"}, NotAfter: now.Add(90 * 24 * time.Hour)})
	shopRSA := ca.Issue(t, testcert.Options{Names: []string{"shop.example"}, NotAfter: now.Add(30 * 24 * time.Hour), RSA: true})
	api := ca.Issue(t, testcert.Options{Names: []string{"api.example"}, NotAfter: now.Add(-time.Hour)})
	var pairs []Pair
	for i, leaf := range []testcert.Leaf{shop, shopRSA, api} {
		c, k := leaf.Files(t, dir, string(rune('a'+i)))
		pairs = append(pairs, Pair{c, k})
	}
	logs := &lockedBuffer{}
	s, err := Load(Options{Pairs: pairs, Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP edgeq_tls_certificate_expiry_seconds Seconds until the leaf of a TLS certificate in service expires (NotAfter), by the leaf's first name; of several certificates with one first name, the soonest. Negative once expired.
# TYPE edgeq_tls_certificate_expiry_seconds gauge
edgeq_tls_certificate_expiry_seconds{name="api.example"} -3600
edgeq_tls_certificate_expiry_seconds{name="shop.example"} 2.592e+06
`
	if err := testutil.CollectAndCompare(s.Collector(), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "TLS certificate has expired") {
		t.Fatalf("an expired certificate was not warned about:\n%s", logs)
	}
}
