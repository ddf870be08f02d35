// Package visitor mints and checks visitor ids: one random id per browser, signed by edgeq, which
// admission routes with `user: visitor` count as one buyer (docs/reference.md "Visitor ids"). A
// visitor id lives in a cookie for a year and is independent of places in line and tokens, so a
// browser that completes an order and joins the queue again is still the same buyer.
package visitor

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
)

const (
	// Cookie is the name of a browser's visitor id cookie. Like every edgeq_ cookie it never reaches
	// the shop.
	Cookie = "edgeq_vid"
	// Header carries the visitor id of an API client that keeps no cookies: edgeq sends it with every
	// new id it issues, and the client sends it back (removed before the shop, as every Edgeq-* header).
	Header = "Edgeq-Visitor"
	// Life is the cookie's Max-Age: long enough to outlast any sale, so that a buyer stays one.
	Life = 365 * 24 * time.Hour
)

const (
	idBytes  = 16 // 128 random bits: ids never collide and cannot be guessed
	macBytes = 16 // 128 bits of HMAC-SHA256: a forgery succeeds with probability 2^-128
	// signedLen is the length of a signed id: hex id, ".", hex MAC.
	signedLen = 2*idBytes + 1 + 2*macBytes
)

// IDs mints and checks signed visitor ids. Its zero value is not usable: see New.
type IDs struct {
	// macs reuses keyed HMAC states (vocab.MAC): every request of a browser with a visitor id is checked.
	macs vocab.MAC
}

// New returns the visitor ids signed with key (a key of their own, derived for this purpose).
func New(key []byte) *IDs {
	return &IDs{macs: vocab.NewMAC(key)}
}

// Mint returns a new visitor id and its signed form, the value of the cookie and of the header. The id
// is lower-case hex, so it is already what identities normalise to.
func (v *IDs) Mint() (id, signed string) {
	var raw [idBytes]byte
	rand.Read(raw[:]) // never fails (crypto/rand, Go 1.24 and later)
	id = hex.EncodeToString(raw[:])
	sum := v.mac(id)
	return id, id + "." + hex.EncodeToString(sum[:])
}

// Check returns the id of a signed visitor id, or ok false when edgeq did not sign it (forged,
// tampered with, signed under another key, or not one at all). The signature is compared in constant
// time.
func (v *IDs) Check(signed string) (id string, ok bool) {
	if len(signed) != signedLen || signed[2*idBytes] != '.' {
		return "", false
	}
	id = signed[:2*idBytes]
	if !lowerHex(id) {
		return "", false
	}
	var got [macBytes]byte
	if !vocab.DecodeHex(got[:], signed[2*idBytes+1:]) {
		return "", false
	}
	want := v.mac(id)
	if !hmac.Equal(got[:], want[:]) {
		return "", false
	}
	return id, true
}

// mac is the truncated HMAC of an id, under a label of its own so that no other MAC edgeq computes
// under a related key can stand for it.
func (v *IDs) mac(id string) (out [macBytes]byte) {
	sum := v.macs.Sum(func(msg []byte) []byte { return append(append(msg, "edgeq visitor id v1\x00"...), id...) })
	copy(out[:], sum[:])
	return out
}

// lowerHex reports whether s, an id (2*idBytes bytes), is made of lower-case hexadecimal digits only:
// the one spelling Mint writes, so that a visitor id has one spelling and one pseudonym.
func lowerHex(s string) bool {
	var raw [idBytes]byte
	return vocab.DecodeHex(raw[:], s)
}
