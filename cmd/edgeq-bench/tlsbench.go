package main

// The TLS rows of the table (table.go): a gated GET over HTTPS with keep-alive through edgeq's own
// TLS listener (server.tls), beside nginx and Caddy terminating TLS in front of the same origin, all
// with one self-signed ECDSA P-256 certificate, in the same alternating rounds as the plain rows.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// benchCert is the certificate of every TLS row: self-signed, ECDSA P-256, for 127.0.0.1, ::1 and
// localhost, valid for a day.
type benchCert struct {
	certFile, keyFile string
	pool              *x509.CertPool // trusts it, for the proxies' readiness checks
}

// writeBenchCert makes the certificate and writes it and its key (PKCS#8) as PEM files in dir.
func writeBenchCert(dir string) (*benchCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &benchCert{certFile: filepath.Join(dir, "bench.crt"), keyFile: filepath.Join(dir, "bench.key"), pool: x509.NewCertPool()}
	if err := os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c.pool.AddCert(cert)
	return c, nil
}

// tableServerYAML is the server section of the table's edgeq: the plain listener, and a TLS
// listener with the certificate (edgeq's defaults otherwise: TLS 1.2 and up, HTTP/2 by ALPN).
func tableServerYAML(cert *benchCert) string {
	return fmt.Sprintf(`{listen: "127.0.0.1:0", tls: {listen: "127.0.0.1:0", certificates: [{cert_file: %q, key_file: %q}]}}`,
		cert.certFile, cert.keyFile)
}

// Names of the rows compared over TLS, and of the plain rows they are compared with.
const (
	nginxPlainRow = "nginx proxy_pass (keepalive)"
	caddyPlainRow = "Caddy reverse_proxy"
	gatedPlainRow = "edgeq gated GET, valid token"
	nginxTLSRow   = "nginx TLS proxy_pass (keepalive)"
	caddyTLSRow   = "Caddy TLS reverse_proxy"
	gatedTLSRow   = "edgeq TLS gated GET, valid token"
)

// keepTLSReferences drops nginx's and Caddy's TLS rows when -only left no edgeq row over TLS to
// compare with them (they are references, kept by -only like nginx's plain row otherwise).
func keepTLSReferences(targets []wrkTarget) []wrkTarget {
	if slices.ContainsFunc(targets, func(t wrkTarget) bool { return t.tls && t.ref == "" }) {
		return targets
	}
	return slices.DeleteFunc(targets, func(t wrkTarget) bool { return t.tls })
}

// writeTLSTable writes the TLS rows of the run: requests/s and each row's ratio to nginx's and
// Caddy's TLS rows, and to the same path without TLS when that row ran too.
func writeTLSTable(w io.Writer, targets []wrkTarget, medians []wrkResult, ref map[string]float64) {
	if !slices.ContainsFunc(targets, func(t wrkTarget) bool { return t.tls }) {
		return
	}
	byName := map[string]float64{}
	for i, t := range targets {
		byName[t.name] = medians[i].rps
	}
	ratio := func(rps, of float64) string {
		if of <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.2fx", rps/of)
	}
	_, _ = fmt.Fprintln(w, "\nover TLS (same rounds; wrk keeps its https:// connections alive; one self-signed ECDSA P-256 certificate for all):")
	_, _ = fmt.Fprintln(w)
	_, _ = fmt.Fprintln(w, "| path over TLS | requests/s | vs nginx TLS | vs Caddy TLS | vs the same path without TLS | p50 | p99 | non-2xx |")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for i, m := range medians {
		t := targets[i]
		if !t.tls {
			continue
		}
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %.0f%% |\n", t.name, m.rps, ratio(m.rps, ref[nginxTLSRow]),
			ratio(m.rps, ref[caddyTLSRow]), ratio(m.rps, byName[t.plain]), m.p50, m.p99, m.non2xx*100)
	}
}
