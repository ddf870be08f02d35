package server

import (
	"bytes"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/token"
)

// The MAC keys are pinned to how they have always been made: request ids, clearances and pseudonyms
// made before an upgrade must still be recognised after it.
func TestIdentityKey_SecretOrSigningKeyPerPurpose(t *testing.T) {
	signing, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyring := token.NewKeyring(signing)
	secret := []byte("identity-secret")
	withSecret := config.Identity{Secret: string(secret)}
	cases := []struct {
		name     string
		identity config.Identity
		purpose  string
		want     []byte
	}{
		{"request ids, no secret", config.Identity{}, purposeRequestIDs, keyring.DeriveKey("edgeq request ids v1")},
		{"clearance, no secret", config.Identity{}, purposeClearance, keyring.DeriveKey("edgeq turnstile clearance v1")},
		{"pseudonyms, no secret", config.Identity{}, purposePseudonyms, keyring.DeriveKey("edgeq identity v1")},
		{"request ids, secret", withSecret, purposeRequestIDs, token.DeriveKey(secret, "edgeq request ids v1")},
		{"clearance, secret", withSecret, purposeClearance, token.DeriveKey(secret, "edgeq turnstile clearance v1")},
		{"pseudonyms, secret", withSecret, purposePseudonyms, secret}, // the secret itself
	}
	for _, c := range cases {
		if got := identityKey(c.identity, keyring, c.purpose); !bytes.Equal(got, c.want) {
			t.Errorf("%s: got %x, want %x", c.name, got, c.want)
		}
	}
}
