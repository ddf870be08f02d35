package config

import (
	"strings"
	"testing"
)

func TestParseByteSize_UnitsAndTheirString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ByteSize
		text string // String() of the result
	}{
		{"8MiB", 8 << 20, "8MiB"},
		{" 512 KiB ", 512 << 10, "512KiB"},
		{"1gib", 1 << 30, "1GiB"},
		{"1048576", 1 << 20, "1MiB"},
		{"1000", 1000, "1000"},
		{"2MB", 2_000_000, "2000000"},
		{"3kB", 3000, "3000"},
		{"10B", 10, "10"},
		{"0", 0, "0"},
	} {
		got, err := ParseByteSize(tc.in)
		if err != nil || got != tc.want || got.String() != tc.text {
			t.Errorf("%q: %d (%q), %v; want %d (%q)", tc.in, got, got.String(), err, tc.want, tc.text)
		}
		if again, err := ParseByteSize(got.String()); err != nil || again != got {
			t.Errorf("%q does not read back: %d, %v", got.String(), again, err)
		}
	}
	for in, want := range map[string]string{
		"":                       "invalid size",
		"MiB":                    "invalid size",
		"-1MiB":                  "invalid size",
		"1.5MiB":                 "unknown unit",
		"8 TiB":                  "unknown unit",
		"9999999999999999999":    "too large",
		"9999999999999GiB":       "too large",
		"8MiB of memory, please": "unknown unit",
	} {
		if _, err := ParseByteSize(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", in, err, want)
		}
	}
}

// spool_bytes comes from the environment as text and from the file as text or a number.
func TestLoad_SpoolBytesFromTheEnvironment(t *testing.T) {
	t.Setenv("EDGEQ_SERVER_SPOOL_BYTES", "2MiB")
	cfg, err := Load("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.SpoolBytes != 2<<20 {
		t.Fatalf("spool_bytes %d", cfg.Server.SpoolBytes)
	}
}
