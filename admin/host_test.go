package admin

import "testing"

// Host names are compared without port and trailing dot, in any case; IP literals, localhost and no
// Host are always answered; a name that merely contains an allowed one is not.
func TestHostAllowed_AddressesLocalhostAndListedNamesOnly(t *testing.T) {
	names := map[string]bool{hostKey("Admin.Example."): true}
	for host, want := range map[string]bool{
		"":                      true,
		"127.0.0.1":             true,
		"127.0.0.1:9090":        true,
		"10.0.0.7:9090":         true,
		"[::1]":                 true,
		"[::1]:9090":            true,
		"[fd00::7]:9090":        true,
		"::1":                   true, // an IPv6 literal without brackets (only a script sends it) keeps its colons
		"localhost":             true,
		"LocalHost.:9090":       true,
		"admin.example":         true,
		"ADMIN.EXAMPLE.:9090":   true,
		"evil.example":          false,
		"evil.example:9090":     false,
		"EVIL.example.":         false,
		"admin.example.evil":    false,
		"xadmin.example":        false,
		"localhost.evil":        false,
		"127.0.0.1.nip.io":      false,
		"127.1":                 false, // browsers send the address as 127.0.0.1; only a script sends this
		"[evil.example]":        false,
		"admin.example:9090:80": false,
	} {
		if got := hostAllowed(host, names); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}
