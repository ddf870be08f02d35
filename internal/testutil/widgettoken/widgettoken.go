// Package widgettoken is what the bot-check stand-ins (turnstiletest, hcaptchatest) share: the token
// their widgets hand out, "<base64url(JSON claims)>.<base64url(HMAC-SHA256)>" under the stand-in's own
// key, so that its siteverify can tell a token it minted, and read what it was minted for, without
// keeping any; and the bits of HTTP around it that both serve alike.
package widgettoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Claims are what a token carries: the page's hostname, what the stand-in binds its tokens to (the
// widget's site key for hCaptcha, its action for Turnstile), when the widget was solved (Unix
// seconds), and a nonce so that two tokens never match.
type Claims struct {
	Hostname string `json:"h"`
	SiteKey  string `json:"k,omitempty"`
	Action   string `json:"a,omitempty"`
	Time     int64  `json:"t"`
	Nonce    string `json:"n"`
}

// NewKey is a fresh signing key for a stand-in.
func NewKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand does not fail on a supported platform
	return key
}

// Seal is the token of c under key, with a fresh nonce in place of c.Nonce.
func Seal(key []byte, c Claims) string {
	c.Nonce = nonce()
	raw, _ := json.Marshal(c) // Claims are strings and a number
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + mac(key, payload)
}

// Open reads the claims of a token sealed under key; false for one that was not (or is malformed).
func Open(key []byte, token string) (Claims, bool) {
	var c Claims
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(mac(key, payload))) {
		return c, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(raw, &c) != nil {
		return Claims{}, false
	}
	return c, true
}

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand does not fail on a supported platform
	return base64.RawURLEncoding.EncodeToString(b)
}

func mac(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
