package vocab

import (
	"testing"
	"time"
)

// A record's time is written to the millisecond in UTC, fixed width, and read back to the same
// instant; a time not known yet is "" both ways, and a text that is not one reads as not known.
func TestMilliTime_WrittenAndReadBack(t *testing.T) {
	at := time.Date(2026, 5, 1, 11, 0, 0, 7_000_000, time.FixedZone("CEST", 2*3600))
	text := FormatMilli(at)
	if text != "2026-05-01T09:00:00.007Z" {
		t.Fatalf("FormatMilli = %q", text)
	}
	if got := FormatUnixMilli(at.UnixMilli()); got != text {
		t.Fatalf("FormatUnixMilli = %q, want %q", got, text)
	}
	if back := ParseMilli(text); !back.Equal(at) || back.Location() != time.UTC {
		t.Fatalf("ParseMilli(%q) = %v, want %v in UTC", text, back, at)
	}
	if FormatMilli(time.Time{}) != "" {
		t.Fatalf("the zero time is written as %q, want \"\"", FormatMilli(time.Time{}))
	}
	for _, bad := range []string{"", "yesterday", "2026-05-01"} {
		if got := ParseMilli(bad); !got.IsZero() {
			t.Errorf("ParseMilli(%q) = %v, want the zero time", bad, got)
		}
	}
}
