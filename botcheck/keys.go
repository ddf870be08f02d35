package botcheck

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/edgeq/edgeq/internal/store"
)

// usedKey marks one response of a siteverify provider (turnstile, hcaptcha) as spent across
// replicas; the response is named by the first 16 bytes of its SHA-256, in hex.
func usedKey(k store.Keys, provider, response string) string {
	sum := sha256.Sum256([]byte(response))
	return k.Global(provider, "used:"+hex.EncodeToString(sum[:16]))
}

// limitKey is the limits.turnstile_per_ip_per_minute bucket of one client (client is
// ratelimit.ClientKey of its address), shared by every replica; beside the join limit's bucket.
func limitKey(k store.Keys, client string) string { return k.Global("rl:"+client, "turnstile") }
