package botcheck

import (
	"net/netip"
	"testing"

	"github.com/edgeq/edgeq/internal/ratelimit"
	"github.com/edgeq/edgeq/internal/store"
)

func TestKeys_ExactStrings(t *testing.T) {
	k := store.Keys{Prefix: "edgeq"}
	// The first 16 bytes of SHA-256("XXXX.DUMMY.TOKEN.XXXX"), in hex.
	if got, want := usedKey(k, "turnstile", "XXXX.DUMMY.TOKEN.XXXX"), "edgeq:{turnstile}:used:7249228325d57f303e03a211e7010113"; got != want {
		t.Errorf("usedKey: got %q, want %q", got, want)
	}
	if got, want := limitKey(k, ratelimit.ClientKey(netip.MustParseAddr("198.51.100.7"))), "edgeq:{rl:198.51.100.7}:turnstile"; got != want {
		t.Errorf("limitKey: got %q, want %q", got, want)
	}
}
