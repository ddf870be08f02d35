package turnstile

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/edgeq/edgeq/internal/store"
)

// usedKey marks one Turnstile response as spent across replicas (markUsed); the response is named by
// the first 16 bytes of its SHA-256, in hex.
func usedKey(k store.Keys, response string) string {
	sum := sha256.Sum256([]byte(response))
	return k.Global("turnstile", "used:"+hex.EncodeToString(sum[:16]))
}
