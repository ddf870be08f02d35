package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/token"
)

// The MAC keys are pinned to how they have always been made: request ids, clearances, pseudonyms and
// visitor ids made before an upgrade must still be recognised after it.
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
		{"visitor ids, no secret", config.Identity{}, purposeVisitors, keyring.DeriveKey("edgeq visitor ids v1")},
		{"request ids, secret", withSecret, purposeRequestIDs, token.DeriveKey(secret, "edgeq request ids v1")},
		{"clearance, secret", withSecret, purposeClearance, token.DeriveKey(secret, "edgeq turnstile clearance v1")},
		{"pseudonyms, secret", withSecret, purposePseudonyms, secret}, // the secret itself
		{"visitor ids, secret", withSecret, purposeVisitors, token.DeriveKey(secret, "edgeq visitor ids v1")},
	}
	for _, c := range cases {
		if got := identityKey(c.identity, keyring, c.purpose); !bytes.Equal(got, c.want) {
			t.Errorf("%s: got %x, want %x", c.name, got, c.want)
		}
	}
}

// A buyer's in-flight claim outlives the longest wait for a slot on an admission route.
func TestClaimTTL_CoversTheHold(t *testing.T) {
	cfg := config.Default()
	cfg.Origin.Timeout = 20 * time.Second
	cfg.Routes = []config.Route{
		{Name: "a", MaxInFlight: 1, Hold: 45 * time.Second, Admission: config.Admission{Type: "stock"}},
		{Name: "b", MaxInFlight: 1, Hold: 90 * time.Second},                              // no admission
		{Name: "c", Hold: 120 * time.Second, Admission: config.Admission{Type: "stock"}}, // no limit
	}
	if got := claimTTL(cfg); got != 20*time.Second+45*time.Second+30*time.Second {
		t.Fatalf("claimTTL = %v", got)
	}
}
