package admin

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// BenchmarkKeyMatches shows the admin key check takes the same time however close a wrong key is to
// the right one (both are hashed, then compared in constant time): compare the ns/op of the
// sub-benchmarks. Timing is a benchmark's business, not a test's.
func BenchmarkKeyMatches(b *testing.B) {
	key := strings.Repeat("k", 40)
	want := sha256.Sum256([]byte(key))
	cases := []struct{ name, given string }{
		{"right", key},
		{"wrong-first-byte", "x" + key[1:]},
		{"wrong-last-byte", key[:39] + "x"},
		{"empty", ""},
	}
	for _, c := range cases {
		header := "Bearer " + c.given
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if ok, _ := keyMatches(want, header); ok != (c.given == key) {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
