package token

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeygenRoundTrip(t *testing.T) {
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pemBytes), "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("not a PKCS#8 PEM: %s", pemBytes)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	os.WriteFile(path, pemBytes, 0o600)
	loaded, err := LoadSigningKey(path)
	if err != nil || !loaded.Equal(key) {
		t.Fatalf("LoadSigningKey = %v, %v", loaded, err)
	}
	pub, err := LoadVerifyKey(path)
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("LoadVerifyKey(private) = %v, %v", pub, err)
	}
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	pubPath := filepath.Join(dir, "pub.pem")
	os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	pub, err = LoadVerifyKey(pubPath)
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("LoadVerifyKey(public) = %v, %v", pub, err)
	}
	if _, err := LoadSigningKey(pubPath); err == nil {
		t.Fatal("a public key was accepted as a signing key")
	}
}

func TestLoadSigningKey_Errors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	cases := map[string]string{
		write("empty.pem", ""): "no PEM block",
		write("junk.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"):        "",
		write("rsa.pem", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"): "want \"PRIVATE KEY\"",
		filepath.Join(dir, "missing.pem"): "no such file",
	}
	for path, want := range cases {
		_, err := LoadSigningKey(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", filepath.Base(path), err, want)
		}
	}
}

// RFC 8037 appendix A.3 gives the thumbprint of its example Ed25519 key.
func TestKeyID_RFC8037Example(t *testing.T) {
	x := []byte{0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
		0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a}
	if got, want := KeyID(ed25519.PublicKey(x)), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("KeyID = %q, want %q", got, want)
	}
}
