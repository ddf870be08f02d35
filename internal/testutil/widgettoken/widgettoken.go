// Package widgettoken is the token the bot-check stand-ins' widgets hand out (turnstiletest,
// hcaptchatest): "<base64url(JSON claims)>.<base64url(HMAC-SHA256)>" under the stand-in's own key, so
// its siteverify can tell a token it minted, and read what it was minted for, without keeping any.
package widgettoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Nonce is a fresh random nonce for a token's claims, so that two tokens never match.
func Nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand does not fail on a supported platform
	return base64.RawURLEncoding.EncodeToString(b)
}

// Seal is the token of claims under key.
func Seal(key []byte, claims any) string {
	raw, _ := json.Marshal(claims) // claims are the stand-in's own struct of strings and numbers
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + mac(key, payload)
}

// Open reads a token sealed under key into claims; false for one that was not (or is malformed).
func Open(key []byte, token string, claims any) bool {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(mac(key, payload))) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	return err == nil && json.Unmarshal(raw, claims) == nil
}

func mac(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
