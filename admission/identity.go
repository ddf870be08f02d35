package admission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"

	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

// pseudonyms turn user identities (the queue request id, a session cookie, a header) into HMAC
// pseudonyms before anything is stored: Redis and the admin API never see the raw value.
type pseudonyms struct{ macs *sync.Pool }

func newPseudonyms(key []byte) pseudonyms {
	return pseudonyms{macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// of returns the pseudonym of a user id: 32 hex characters.
func (p pseudonyms) of(user string) string {
	m := p.macs.Get().(hash.Hash)
	defer p.macs.Put(m)
	m.Reset()
	m.Write([]byte("edgeq user\x00"))
	m.Write([]byte(user))
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0])[:16])
}

// identity is the pseudonym of a user id as a request or an operator writes it: normalised as
// fields.Identity reads a value of that kind of field ("path", "json", ...), then pseudonymised.
func (p pseudonyms) identity(value, fieldKind string) (string, *web.Error) {
	id, e := fields.Identity(value, fieldKind)
	if e != nil {
		return "", e
	}
	return p.of(id), nil
}
