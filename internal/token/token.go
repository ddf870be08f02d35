package token

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"
)

// Claims are the claims of an access token (docs/reference.md "The queue gate").
type Claims struct {
	Issuer    string `json:"iss"`
	Queue     string `json:"aud"` // the queue id; a token of queue A never opens queue B
	RequestID string `json:"sub"` // the visitor's queue request id
	Position  int64  `json:"pos"` // the visitor's queue position
	IssuedAt  int64  `json:"iat"`
	NotBefore int64  `json:"nbf"`
	Expires   int64  `json:"exp"`
	ID        string `json:"jti"`
	// TurnstileAt is the unix time of the Turnstile check passed when joining, 0 if none.
	TurnstileAt int64 `json:"tsv,omitempty"`
}

// The jwt.Claims methods let golang-jwt validate exp, nbf, iss and aud.

func (c Claims) GetExpirationTime() (*jwt.NumericDate, error) { return numeric(c.Expires), nil }
func (c Claims) GetIssuedAt() (*jwt.NumericDate, error)       { return numeric(c.IssuedAt), nil }
func (c Claims) GetNotBefore() (*jwt.NumericDate, error)      { return numeric(c.NotBefore), nil }
func (c Claims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c Claims) GetSubject() (string, error)                  { return c.RequestID, nil }
func (c Claims) GetAudience() (jwt.ClaimStrings, error)       { return jwt.ClaimStrings{c.Queue}, nil }

func numeric(unix int64) *jwt.NumericDate {
	if unix == 0 {
		return nil
	}
	return jwt.NewNumericDate(time.Unix(unix, 0))
}

// ExpiresAt is the expiry as a time.
func (c Claims) ExpiresAt() time.Time { return time.Unix(c.Expires, 0) }

// Keyring holds the signing key and every key tokens are verified with.
type Keyring struct {
	signing    ed25519.PrivateKey
	signingKID string
	verify     map[string]ed25519.PublicKey // by kid
	order      []string                     // kids, signing key first, for the JWKS
}

// NewKeyring builds a keyring that signs with signing and also accepts tokens signed by older keys.
func NewKeyring(signing ed25519.PrivateKey, older ...ed25519.PublicKey) *Keyring {
	pub := signing.Public().(ed25519.PublicKey)
	k := &Keyring{signing: signing, signingKID: KeyID(pub), verify: map[string]ed25519.PublicKey{}}
	for _, key := range append([]ed25519.PublicKey{pub}, older...) {
		kid := KeyID(key)
		if _, dup := k.verify[kid]; !dup {
			k.verify[kid] = key
			k.order = append(k.order, kid)
		}
	}
	return k
}

// SigningKeyID is the kid of tokens signed now.
func (k *Keyring) SigningKeyID() string { return k.signingKID }

// Sign returns the compact JWT for c. Ed25519 signatures are deterministic, so the same claims always
// give the same token: re-issuing a live token returns it unchanged.
func (k *Keyring) Sign(c Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = k.signingKID
	return t.SignedString(k.signing)
}

// JWKS returns the JSON Web Key Set (RFC 7517, OKP keys per RFC 8037) of every verification key.
func (k *Keyring) JWKS() []byte {
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
	}
	set := struct {
		Keys []jwk `json:"keys"`
	}{}
	for _, kid := range k.order {
		set.Keys = append(set.Keys, jwk{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.verify[kid]),
			Kid: kid, Alg: "EdDSA", Use: "sig"})
	}
	b, _ := json.Marshal(set)
	return b
}

// Errors of Verify. Every one means "no valid token": the gate treats them alike, logs tell them apart.
var (
	ErrMalformed  = errors.New("token: malformed")
	ErrUnknownKey = errors.New("token: unknown key id")
	ErrInvalid    = errors.New("token: invalid")
	ErrAudience   = errors.New("token: issued for another queue")
)

// Verifier checks tokens: signature (EdDSA only, by kid), issuer, expiry and not-before with leeway,
// and audience. Verified tokens are cached, so a visitor's every request after the first costs a map
// lookup instead of a signature check; the cache holds claims, and expiry is re-checked on every hit.
type Verifier struct {
	keys   *Keyring
	issuer string
	leeway time.Duration
	now    func() time.Time
	good   *expirable.LRU[string, Claims]
	bad    *expirable.LRU[string, error]
}

// Cache sizes: enough for every live token of a large sale on one replica, bounded so a flood of
// distinct junk tokens cannot grow memory.
const (
	verifiedCacheSize = 100_000
	rejectedCacheSize = 20_000
)

// NewVerifier builds a verifier for tokens issued by issuer.
func NewVerifier(keys *Keyring, issuer string, leeway time.Duration) *Verifier {
	return &Verifier{
		keys: keys, issuer: issuer, leeway: leeway, now: time.Now,
		good: expirable.NewLRU[string, Claims](verifiedCacheSize, nil, 10*time.Minute),
		bad:  expirable.NewLRU[string, error](rejectedCacheSize, nil, time.Minute),
	}
}

// Verify returns the claims of raw if it is a valid token for queue.
func (v *Verifier) Verify(raw, queue string) (Claims, error) {
	now := v.now()
	c, ok := v.good.Get(raw)
	if !ok {
		if err, seen := v.bad.Get(raw); seen {
			return Claims{}, err
		}
		var err error
		if c, err = v.parse(raw); err != nil {
			v.bad.Add(raw, err)
			return Claims{}, err
		}
		v.good.Add(raw, c)
	}
	// Time claims are checked on every use, cached or not.
	if now.After(time.Unix(c.Expires, 0).Add(v.leeway)) {
		return Claims{}, fmt.Errorf("%w: expired", ErrInvalid)
	}
	if now.Add(v.leeway).Before(time.Unix(c.NotBefore, 0)) {
		return Claims{}, fmt.Errorf("%w: not valid yet", ErrInvalid)
	}
	if c.Queue != queue {
		return Claims{}, ErrAudience
	}
	return c, nil
}

// Ours reports whether raw is one of this edgeq's tokens, valid or not: a JWT whose header names
// one of the keyring's key ids and whose iss is the verifier's issuer. It decides where a credential
// belongs (edgeq takes its own tokens from Authorization: Bearer, and any other Authorization is the
// shop's), never whether anything opens: the signature is not checked, so a forgery naming edgeq's
// key counts as edgeq's too and is kept from the shop with the rest; an expired, revoked or other
// queue's token is edgeq's as well. A token signed by a key no longer in the keyring, or issued
// under another issuer, is not recognised. It is cheap and allocates little: a value that is not a
// JWT is told apart by its dots, another issuer's JWT by its header's key id, and a verified token
// by the cache.
func (v *Verifier) Ours(raw string) bool {
	if _, ok := v.good.Peek(raw); ok {
		return true // verified: signed by one of the keys, for this issuer
	}
	if len(raw) > 4096 || strings.Count(raw, ".") != 2 {
		return false
	}
	head, rest, _ := strings.Cut(raw, ".")
	body, _, _ := strings.Cut(rest, ".")
	var header struct {
		Kid string `json:"kid"`
	}
	if !decodeSegment(head, &header) {
		return false
	}
	if _, ok := v.keys.verify[header.Kid]; !ok {
		return false
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	return decodeSegment(body, &claims) && claims.Issuer == v.issuer
}

// decodeSegment decodes a JWT segment (base64url without padding, then JSON) into out.
func decodeSegment(seg string, out any) bool {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	return err == nil && json.Unmarshal(b, out) == nil
}

// parse checks everything that does not change with time: structure, algorithm, key, signature,
// issuer, and that the time claims are present.
func (v *Verifier) parse(raw string) (Claims, error) {
	if len(raw) > 4096 || strings.Count(raw, ".") != 2 {
		return Claims{}, ErrMalformed
	}
	var c Claims
	_, err := jwt.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		key, ok := v.keys.verify[kid]
		if !ok {
			return nil, ErrUnknownKey
		}
		return key, nil
	},
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), // pinned: never none, never HS*
		// Time claims are checked on every use in Verify, the rest just below.
		jwt.WithoutClaimsValidation(),
		jwt.WithStrictDecoding(),
	)
	if err != nil {
		if errors.Is(err, ErrUnknownKey) {
			return Claims{}, ErrUnknownKey
		}
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Issuer != v.issuer {
		return Claims{}, fmt.Errorf("%w: issuer %q", ErrInvalid, c.Issuer)
	}
	if c.Expires == 0 || c.NotBefore == 0 || c.Queue == "" || c.RequestID == "" || c.Position < 1 {
		return Claims{}, fmt.Errorf("%w: missing claims", ErrInvalid)
	}
	return c, nil
}
