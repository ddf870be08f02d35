package token

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func testKeyring(t testing.TB) *Keyring {
	t.Helper()
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return NewKeyring(key)
}

func validClaims(now time.Time) Claims {
	return Claims{
		Issuer: "edgeq", Queue: "drop", RequestID: "0000002a-0000-8000-8000-000000000000", Position: 42,
		IssuedAt: now.Unix(), NotBefore: now.Unix(), Expires: now.Add(10 * time.Minute).Unix(), ID: "jti-1",
	}
}

func b64(v any) string {
	raw, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestSignAndVerify(t *testing.T) {
	keys := testKeyring(t)
	now := time.Now()
	c := validClaims(now)
	raw, err := keys.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := keys.Sign(c)
	if again != raw {
		t.Fatal("signing the same claims twice gave different tokens")
	}
	v := NewVerifier(keys, "edgeq", 5*time.Second)
	for range 2 { // the second time comes from the cache
		got, err := v.Verify(raw, "drop")
		if err != nil || got != c {
			t.Fatalf("Verify = %+v, %v", got, err)
		}
	}
	header, _, _ := strings.Cut(raw, ".")
	hb, _ := base64.RawURLEncoding.DecodeString(header)
	var h map[string]string
	json.Unmarshal(hb, &h)
	if h["alg"] != "EdDSA" || h["kid"] != keys.SigningKeyID() || h["typ"] != "JWT" {
		t.Fatalf("header %v", h)
	}
}

// Every forged, tampered, stale or misdirected token is refused.
func TestVerify_Refusals(t *testing.T) {
	keys := testKeyring(t)
	now := time.Now()
	sign := func(c Claims) string {
		raw, err := keys.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	good := sign(validClaims(now))
	parts := strings.Split(good, ".")
	pub := keys.verify[keys.SigningKeyID()]

	// HS256 "signed" with the public key: the classic algorithm-confusion forgery.
	hsHeader := b64(map[string]string{"alg": "HS256", "typ": "JWT", "kid": keys.SigningKeyID()})
	mac := hmac.New(sha256.New, pub)
	mac.Write([]byte(hsHeader + "." + parts[1]))
	hs256 := hsHeader + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))

	noneHeader := b64(map[string]string{"alg": "none", "typ": "JWT"})
	tampered := validClaims(now)
	tampered.Position = 1
	other := testKeyring(t)
	foreign, _ := other.Sign(validClaims(now))

	expired := validClaims(now)
	expired.IssuedAt, expired.NotBefore, expired.Expires = now.Add(-time.Hour).Unix(), now.Add(-time.Hour).Unix(), now.Add(-time.Minute).Unix()
	early := validClaims(now)
	early.NotBefore = now.Add(time.Hour).Unix()
	wrongIssuer := validClaims(now)
	wrongIssuer.Issuer = "someone-else"
	noExpiry := validClaims(now)
	noExpiry.Expires = 0

	cases := []struct {
		name, raw, queue string
		want             error
	}{
		{"alg none", noneHeader + "." + parts[1] + ".", "drop", ErrInvalid},
		{"alg none with signature", noneHeader + "." + parts[1] + "." + parts[2], "drop", ErrInvalid},
		{"HS256 with the public key", hs256, "drop", ErrInvalid},
		{"unknown kid", foreign, "drop", ErrUnknownKey},
		{"tampered payload", parts[0] + "." + b64(tampered) + "." + parts[2], "drop", ErrInvalid},
		{"tampered signature", parts[0] + "." + parts[1] + "." + flipChar(parts[2], 10), "drop", ErrInvalid},
		{"expired", sign(expired), "drop", ErrInvalid},
		{"not yet valid", sign(early), "drop", ErrInvalid},
		{"wrong issuer", sign(wrongIssuer), "drop", ErrInvalid},
		{"no expiry", sign(noExpiry), "drop", ErrInvalid},
		{"queue A token on queue B", good, "other_queue", ErrAudience},
		{"empty", "", "drop", ErrMalformed},
		{"garbage", "not.a.token", "drop", ErrInvalid},
		{"oversized", strings.Repeat("a", 5000) + ".b.c", "drop", ErrMalformed},
	}
	v := NewVerifier(keys, "edgeq", 5*time.Second)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for range 2 { // and again, from the rejection cache
				if _, err := v.Verify(c.raw, c.queue); !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
			}
		})
	}
	// The good token still verifies after all that.
	if _, err := v.Verify(good, "drop"); err != nil {
		t.Fatal(err)
	}
}

func TestVerify_LeewayAndExpiryOfCachedTokens(t *testing.T) {
	keys := testKeyring(t)
	now := time.Now()
	c := validClaims(now)
	c.Expires = now.Add(time.Minute).Unix()
	raw, _ := keys.Sign(c)
	v := NewVerifier(keys, "edgeq", 5*time.Second)
	if _, err := v.Verify(raw, "drop"); err != nil {
		t.Fatal(err)
	}
	v.now = func() time.Time { return now.Add(time.Minute + 3*time.Second) } // within leeway
	if _, err := v.Verify(raw, "drop"); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	v.now = func() time.Time { return now.Add(time.Minute + 10*time.Second) }
	if _, err := v.Verify(raw, "drop"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a cached token past its expiry: %v", err)
	}
}

func TestVerify_RotatedKeysStillVerify(t *testing.T) {
	oldKey, _ := GenerateKey()
	old := NewKeyring(oldKey)
	raw, _ := old.Sign(validClaims(time.Now()))
	newKey, _ := GenerateKey()
	rotated := NewKeyring(newKey, oldKey.Public().(ed25519.PublicKey))
	if _, err := NewVerifier(rotated, "edgeq", 0).Verify(raw, "drop"); err != nil {
		t.Fatalf("token of the previous key: %v", err)
	}
	if _, err := NewVerifier(NewKeyring(newKey), "edgeq", 0).Verify(raw, "drop"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("without the old key: %v", err)
	}
}

// The JWKS alone verifies a token with crypto/ed25519, without golang-jwt: what any origin or client
// library would do.
func TestJWKSVerifiesWithCryptoEd25519(t *testing.T) {
	keys := testKeyring(t)
	raw, _ := keys.Sign(validClaims(time.Now()))
	var set struct {
		Keys []struct{ Kty, Crv, X, Kid, Alg, Use string }
	}
	if err := json.Unmarshal(keys.JWKS(), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", keys.JWKS(), err)
	}
	k := set.Keys[0]
	if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" || k.Use != "sig" {
		t.Fatalf("JWK %+v", k)
	}
	x, err := base64.RawURLEncoding.DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		t.Fatalf("x: %v", err)
	}
	lastDot := strings.LastIndexByte(raw, '.')
	sig, err := base64.RawURLEncoding.DecodeString(raw[lastDot+1:])
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(ed25519.PublicKey(x), []byte(raw[:lastDot]), sig) {
		t.Fatal("the JWKS key does not verify the token")
	}
	if KeyID(ed25519.PublicKey(x)) != k.Kid {
		t.Fatal("kid is not the key's thumbprint")
	}
}

func FuzzVerify(f *testing.F) {
	keys, _ := GenerateKey()
	ring := NewKeyring(keys)
	good, _ := ring.Sign(validClaims(time.Now()))
	f.Add(good)
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add(good[:len(good)-3])
	v := NewVerifier(ring, "edgeq", time.Second)
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := v.Verify(raw, "drop")
		if err != nil {
			return
		}
		// Anything accepted must be a token this keyring signed, with the required claims.
		if raw != good {
			resigned, _ := ring.Sign(c)
			if resigned != raw {
				t.Fatalf("accepted %q, which this keyring did not produce", raw)
			}
		}
		if c.Queue != "drop" || c.Issuer != "edgeq" || c.Expires == 0 {
			t.Fatalf("accepted claims %+v", c)
		}
	})
}

// flipChar changes the base64url character at i (one that carries six bits of the value, unlike the
// last one, whose low bits are padding), so the decoded bytes always differ.
func flipChar(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// Ours tells edgeq's tokens (valid or not) from every other credential an Authorization header may
// carry: the shop's opaque sessions, other issuers' JWTs, tokens of keys edgeq does not hold.
func TestVerifier_Ours(t *testing.T) {
	keys := testKeyring(t)
	v := NewVerifier(keys, "edgeq", 5*time.Second)
	now := time.Now()
	sign := func(k *Keyring, c Claims) string {
		t.Helper()
		raw, err := k.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	valid := sign(keys, validClaims(now))
	expired := validClaims(now.Add(-time.Hour))
	otherQueue := validClaims(now)
	otherQueue.Queue = "other"
	otherIssuer := validClaims(now)
	otherIssuer.Issuer = "the-shop"
	older, _ := GenerateKey()
	rotated := NewKeyring(older)
	withOlder := NewKeyring(mustKey(t), older.Public().(ed25519.PublicKey))
	head, payload, _ := strings.Cut(valid, ".")
	payload, _, _ = strings.Cut(payload, ".")

	for _, c := range []struct {
		name string
		raw  string
		want bool
	}{
		{"valid", valid, true},
		{"expired", sign(keys, expired), true},
		{"of another queue", sign(keys, otherQueue), true},
		{"edgeq's key and issuer, signature broken", head + "." + payload + ".AAAA", true},
		{"the shop's opaque session", "shop-session-abc", false},
		{"empty", "", false},
		{"edgeq's key, another issuer", sign(keys, otherIssuer), false},
		{"another key", sign(testKeyring(t), validClaims(now)), false},
		{"a key edgeq no longer holds", sign(rotated, validClaims(now)), false},
		{"header not base64", "%%%." + payload + ".sig", false},
		{"header not an object", b64("x") + "." + payload + ".sig", false},
		{"payload not JSON", head + ".bm90IGpzb24.sig", false},
		{"four segments", valid + ".x", false},
		{"oversized", head + "." + strings.Repeat("A", 5000) + ".sig", false},
	} {
		if got := v.Ours(c.raw); got != c.want {
			t.Errorf("%s: Ours = %v, want %v", c.name, got, c.want)
		}
	}
	// An older verification key's tokens are edgeq's while the keyring holds the key.
	if !NewVerifier(withOlder, "edgeq", 0).Ours(sign(rotated, validClaims(now))) {
		t.Error("a token of an older key edgeq still verifies with is not recognised")
	}
	// A verified token is recognised from the cache.
	if _, err := v.Verify(valid, "drop"); err != nil {
		t.Fatal(err)
	}
	if !v.Ours(valid) {
		t.Error("a verified token is not recognised")
	}
}

func mustKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}
