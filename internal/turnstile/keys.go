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

// limitKey is the limits.turnstile_per_ip_per_minute bucket of one client (client is
// ratelimit.ClientKey of its address), shared by every replica; beside the join limit's bucket.
func limitKey(k store.Keys, client string) string { return k.Global("rl:"+client, "turnstile") }
