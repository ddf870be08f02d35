package web

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClipLog_BoundsLongValuesOnARuneBoundary(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "/checkout/1", "/checkout/1"},
		{"at the bound", strings.Repeat("a", LogValueMax), strings.Repeat("a", LogValueMax)},
		{"one over", strings.Repeat("a", LogValueMax+1), strings.Repeat("a", LogValueMax) + "...[clipped, 257 bytes]"},
		// "é" is two bytes: the cut falls inside one, which is left out whole.
		{"multi-byte rune at the cut", strings.Repeat("a", LogValueMax-1) + "é" + "zz",
			strings.Repeat("a", LogValueMax-1) + "...[clipped, 259 bytes]"},
		{"1 MB", strings.Repeat("€", 1<<20/3), strings.Repeat("€", LogValueMax/3) + "...[clipped, 1048575 bytes]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ClipLog(c.in)
			if got != c.want {
				t.Fatalf("ClipLog = %.80q... (%d bytes), want %.80q... (%d bytes)", got, len(got), c.want, len(c.want))
			}
			if utf8.ValidString(c.in) && !utf8.ValidString(got) {
				t.Fatalf("clipping broke a rune: %q", got)
			}
		})
	}
	short := strings.Repeat("a", LogValueMax)
	if n := testing.AllocsPerRun(100, func() { ClipLog(short) }); n != 0 {
		t.Errorf("a value within the bound costs %v allocations", n)
	}
}
