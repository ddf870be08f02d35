package visitor

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestMint_IDsAreSignedAndChecked(t *testing.T) {
	v := New([]byte("key"))
	seen := map[string]bool{}
	for range 100 {
		id, signed := v.Mint()
		if len(id) != 32 || !lowerHex(id) || !strings.HasPrefix(signed, id+".") {
			t.Fatalf("Mint() = %q, %q", id, signed)
		}
		if seen[id] {
			t.Fatalf("id %s minted twice", id)
		}
		seen[id] = true
		if got, ok := v.Check(signed); !ok || got != id {
			t.Fatalf("Check(%q) = %q, %v", signed, got, ok)
		}
	}
}

func TestCheck_RefusesWhatEdgeqDidNotSign(t *testing.T) {
	v := New([]byte("key"))
	id, signed := v.Mint()
	_, otherKey := New([]byte("another key")).Mint()
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		return string(b)
	}
	cases := map[string]string{
		"empty":                "",
		"the id alone":         id,
		"a digit of the id":    flip(signed, 3),
		"a digit of the MAC":   flip(signed, len(signed)-1),
		"another key's id":     otherKey,
		"upper case":           strings.ToUpper(signed),
		"upper-case MAC":       id + "." + strings.ToUpper(signed[33:]),
		"another separator":    id + ":" + signed[33:],
		"longer":               signed + "0",
		"shorter":              signed[:len(signed)-1],
		"MAC of another id":    flip(id, 0) + signed[32:],
		"not hex":              strings.Repeat("g", 32) + "." + signed[33:],
		"a forged zero MAC":    id + "." + strings.Repeat("0", 32),
		"a percent-encoded id": strings.Replace(signed, ".", "%2E", 1),
	}
	for name, value := range cases {
		if got, ok := v.Check(value); ok {
			t.Errorf("%s: Check(%q) = %q, accepted", name, value, got)
		}
	}
}

func FuzzCheck(f *testing.F) {
	v := New([]byte("key"))
	// Made here, not minted: every fuzzing worker process must know the same genuine value.
	id := strings.Repeat("5a", idBytes)
	mac := v.mac(id)
	signed := id + "." + hex.EncodeToString(mac[:])
	for _, s := range []string{"", signed, signed[:33], strings.ToUpper(signed)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, ok := v.Check(in)
		if !ok {
			return
		}
		// Only what Mint writes verifies: the signed form of the id it returns.
		if in != signed || id != signed[:32] {
			t.Fatalf("Check(%q) accepted %q", in, id)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	v := New([]byte("key"))
	_, signed := v.Mint()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := v.Check(signed); !ok {
			b.Fatal("refused")
		}
	}
}
