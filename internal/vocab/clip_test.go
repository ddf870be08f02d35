package vocab

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip_CutsAtTheCallersBoundOnARuneBoundary(t *testing.T) {
	cases := []struct {
		name, in string
		max      int
		want     string
	}{
		{"empty", "", 64, ""},
		{"at the bound", strings.Repeat("a", 64), 64, strings.Repeat("a", 64)},
		{"one over", strings.Repeat("a", 65), 64, strings.Repeat("a", 64) + "..."},
		{"another bound", strings.Repeat("a", 300), 256, strings.Repeat("a", 256) + "..."},
		// "€" is three bytes: a cut inside one leaves it out whole.
		{"multi-byte rune at the cut", strings.Repeat("a", 63) + "€", 64, strings.Repeat("a", 63) + "..."},
		{"a rune ending at the bound is kept", strings.Repeat("a", 61) + "€z", 64, strings.Repeat("a", 61) + "€..."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Clip(c.in, c.max)
			if got != c.want {
				t.Fatalf("Clip(%d bytes, %d) = %q, want %q", len(c.in), c.max, got, c.want)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("clipping broke a rune: %q", got)
			}
		})
	}
	short, clipped := strings.Repeat("a", 64), ""
	if n := testing.AllocsPerRun(100, func() { clipped = Clip(short, 64) }); n != 0 || clipped != short {
		t.Errorf("a value within the bound costs %v allocations", n)
	}
}
