package admission

import (
	"encoding/hex"

	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// pseudonyms turn user identities (the queue request id, a session cookie, a header) into HMAC
// pseudonyms before anything is stored: Redis and the admin API never see the raw value.
type pseudonyms struct{ mac vocab.MAC }

func newPseudonyms(key []byte) pseudonyms { return pseudonyms{mac: vocab.NewMAC(key)} }

// of returns the pseudonym of a user id: 32 hex characters.
func (p pseudonyms) of(user string) string {
	sum := p.mac.Sum(func(msg []byte) []byte { return append(append(msg, "edgeq user\x00"...), user...) })
	return hex.EncodeToString(sum[:16])
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
