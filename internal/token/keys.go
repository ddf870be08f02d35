// Package token issues and verifies edgeq's access tokens: EdDSA (Ed25519) JWTs.
// This file holds the keys: generation (`edgeq keygen`), PEM loading and RFC 7638 key ids.
package token

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
)

// GenerateKey returns a new Ed25519 signing key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	return key, err
}

// MarshalPrivateKey encodes key as a PKCS#8 "PRIVATE KEY" PEM block, the format keygen writes and
// tokens.signing_key_file reads (the same as `openssl genpkey -algorithm ed25519`).
func MarshalPrivateKey(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// LoadSigningKey reads an Ed25519 private key from a PKCS#8 PEM file.
func LoadSigningKey(path string) (ed25519.PrivateKey, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: PEM block is %q, want \"PRIVATE KEY\" (PKCS#8, from `edgeq keygen`)", path, block.Type)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: key is %T, want Ed25519", path, parsed)
	}
	return key, nil
}

// LoadVerifyKey reads an Ed25519 public key from a PEM file holding either the public key ("PUBLIC
// KEY", PKIX) or a former signing key ("PRIVATE KEY"), for tokens.verify_key_files.
func LoadVerifyKey(path string) (ed25519.PublicKey, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	switch block.Type {
	case "PRIVATE KEY":
		key, err := LoadSigningKey(path)
		if err != nil {
			return nil, err
		}
		return key.Public().(ed25519.PublicKey), nil
	case "PUBLIC KEY":
		parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		key, ok := parsed.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%s: key is %T, want Ed25519", path, parsed)
		}
		return key, nil
	}
	return nil, fmt.Errorf("%s: PEM block is %q, want \"PUBLIC KEY\" or \"PRIVATE KEY\"", path, block.Type)
}

func readPEM(path string) (*pem.Block, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // a key file the configuration names, by the operator
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block found", path)
	}
	return block, nil
}

// KeyID is the RFC 7638 JWK thumbprint of an Ed25519 public key (SHA-256, base64url): the `kid` of
// tokens and of the JWKS entry, stable for a key and different for every other.
func KeyID(pub ed25519.PublicKey) string {
	// RFC 7638 section 3.2: required members only, lexicographic order, no whitespace.
	canonical := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// DeriveKey derives a secret for another purpose from the signing key (HMAC-SHA256 of the purpose
// under the key's seed), so operators manage one secret, and every replica with the same signing key
// derives the same value.
func (k *Keyring) DeriveKey(purpose string) []byte {
	return DeriveKey(k.signing.Seed(), purpose)
}

// DeriveKey derives a secret for purpose from a root secret: HMAC-SHA256 of the purpose under the
// root. Different purposes give independent keys.
func DeriveKey(root []byte, purpose string) []byte {
	m := hmac.New(sha256.New, root)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}
