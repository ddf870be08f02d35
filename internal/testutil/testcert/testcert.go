// Package testcert makes TLS certificates for tests: a certificate authority of the test's own and
// leaves it signs, as PEM files, so a test can serve HTTPS, trust it by the authority alone, and
// replace the files while a server runs.
package testcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that exists for one test.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
}

// NewCA makes an authority valid from an hour ago for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: "edgeq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, key: key}
}

// Pool trusts the authority alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Options shape a leaf. The zero value is an ECDSA leaf for "localhost", valid for a day. Every leaf
// also names 127.0.0.1.
type Options struct {
	Names    []string  // DNS names; default ["localhost"]
	NotAfter time.Time // default a day from now
	RSA      bool      // an RSA-2048 key instead of ECDSA P-256
}

// Leaf is a certificate the authority signed, with its key, as PEM.
type Leaf struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Issue signs a leaf.
func (ca *CA) Issue(t testing.TB, o Options) Leaf {
	t.Helper()
	if len(o.Names) == 0 {
		o.Names = []string{"localhost"}
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	var key crypto.Signer
	var err error
	if o.RSA {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: o.Names[0]}, DNSNames: o.Names,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, // clients that connect by address check it
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: o.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return Leaf{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Write puts the leaf in certFile and keyFile, each written aside and renamed over the old one, as
// certificate tools replace files.
func (l Leaf) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for file, data := range map[string][]byte{certFile: l.CertPEM, keyFile: l.KeyPEM} {
		tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
}

// Files writes the leaf into dir as NAME.crt and NAME.key and returns their paths.
func (l Leaf) Files(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	l.Write(t, certFile, keyFile)
	return certFile, keyFile
}

// SPKIHash is the base64 SHA-256 of the leaf's public key, as Chromium's
// --ignore-certificate-errors-spki-list takes it.
func (l Leaf) SPKIHash() string {
	sum := sha256.Sum256(l.Cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Peer returns the leaf a TLS connection state shows the server sent.
func Peer(cs *tls.ConnectionState) *x509.Certificate {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0]
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
