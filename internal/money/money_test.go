package money

import "testing"

func TestParse(t *testing.T) {
	valid := map[string]int64{
		"0": 0, "1": 100, "1.5": 150, "1.05": 105, "123.45": 12345, "007.10": 710,
		"999999999999.99": MaxCents,
	}
	for in, want := range valid {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	invalid := []string{
		"", "abc", "1.234", "-5", "+5", "1e9", "1.", ".5", " 1", "1 ", "1,000", "0x10", "1.2.3",
		"1234567890123", "1234567890123456789012345678901234567890", "１",
	}
	for _, in := range invalid {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormat(t *testing.T) {
	for cents, want := range map[int64]string{0: "0.00", 5: "0.05", 150: "1.50", 12345: "123.45", -150: "-1.50"} {
		if got := Format(cents); got != want {
			t.Errorf("Format(%d) = %q, want %q", cents, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "1.5", "123.45", "abc", "-5", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cents, err := Parse(s)
		if err != nil {
			return
		}
		if cents < 0 || cents > MaxCents {
			t.Fatalf("Parse(%q) = %d, out of range", s, cents)
		}
		back, err := Parse(Format(cents))
		if err != nil || back != cents {
			t.Fatalf("round trip of %q: %d -> %q -> %d, %v", s, cents, Format(cents), back, err)
		}
	})
}
