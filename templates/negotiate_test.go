package templates

import (
	"slices"
	"testing"
)

func TestNegotiate(t *testing.T) {
	cases := []struct {
		header, fallback string
		offered          []string
		want             string
	}{
		{"", "en", nil, "en"},
		{"", "ja", nil, "ja"},
		{"en-US,en;q=0.9", "ja", nil, "en"},
		// Chinese by script or region.
		{"zh-TW,zh;q=0.9,en;q=0.8", "en", nil, "zh-TW"},
		{"zh-Hant-HK", "en", nil, "zh-TW"},
		{"zh-HK", "en", nil, "zh-TW"},
		{"zh-MO", "en", nil, "zh-TW"},
		{"zh-CN", "en", nil, "zh-CN"},
		{"zh-Hans,en;q=0.5", "en", nil, "zh-CN"},
		{"zh-SG", "en", nil, "zh-CN"},
		{"zh", "en", nil, "zh-CN"},
		// Every Portuguese reads Brazilian Portuguese.
		{"pt", "en", nil, "pt-BR"},
		{"pt-PT", "en", nil, "pt-BR"},
		{"pt-BR,pt;q=0.9", "en", nil, "pt-BR"},
		// The withdrawn codes of Hebrew and Indonesian.
		{"iw", "en", nil, "he"},
		{"iw-IL,en;q=0.5", "en", nil, "he"},
		{"in", "en", nil, "id"},
		{"in-ID", "en", nil, "id"},
		// A region reads the language.
		{"es-MX,es;q=0.9", "en", nil, "es"},
		{"es-419", "en", nil, "es"},
		{"fr-CA", "en", nil, "fr"},
		{"de-AT", "en", nil, "de"},
		{"de-CH,en;q=0.5", "en", nil, "de"},
		{"ar-EG", "en", nil, "ar"},
		{"ar-SA,ar;q=0.9,en;q=0.8", "en", nil, "ar"},
		{"he-IL", "en", nil, "he"},
		{"ja-JP", "en", nil, "ja"},
		{"ko-KR", "en", nil, "ko"},
		{"it-CH", "en", nil, "it"},
		{"nl-BE", "en", nil, "nl"},
		{"pl-PL", "en", nil, "pl"},
		{"tr-TR", "en", nil, "tr"},
		{"id-ID", "en", nil, "id"},
		{"th-TH", "en", nil, "th"},
		{"vi-VN", "en", nil, "vi"},
		{"JA-jp", "en", nil, "ja"},
		// Quality values: the highest wins, header order among equals, q=0 means "not this one".
		{"en;q=0.3,ja;q=0.8", "en", nil, "ja"},
		{"de;q=0.5,fr;q=0.5", "en", nil, "de"},
		{"ja;q=0,en", "ko", nil, "en"},
		{"ja;q=0", "ko", nil, "ko"},
		{"ja;q=0.000", "ko", nil, "ko"},
		{"zh-TW;q=0", "en", nil, "en"},
		{"ru,de;q=0.5", "en", nil, "de"},
		{" ja ; q = 0.5 , en ; q=0.4", "ko", nil, "ja"},
		{"ja;level=1;q=0.9,ko;q=0.8", "en", nil, "ja"},
		// Malformed or out-of-range weights are skipped.
		{"fr;q=abc,de;q=0.1", "en", nil, "de"},
		{"fr;q=1.5,de;q=0.1", "en", nil, "de"},
		{"fr;q=-1", "en", nil, "en"},
		// Nothing built in: the fallback.
		{"*", "en", nil, "en"},
		{"ru,uk;q=0.9", "ja", nil, "ja"},
		{"x-klingon", "en", nil, "en"},
		{",,;q=1,", "en", nil, "en"},
		// pages.languages: only the offered ones are chosen.
		{"ja,en;q=0.5", "en", []string{"en", "ko"}, "en"},
		{"ja", "en", []string{"en", "ko"}, "en"},
		{"ja", "ko", []string{"en", "ko"}, "ko"},
		{"zh-TW", "en", []string{"en", "zh-CN"}, "en"},
		{"fr-CA,fr;q=0.9,de;q=0.8,en;q=0.7", "en", []string{"en", "de"}, "de"},
		{"ar", "en", []string{"ar", "en"}, "ar"},
	}
	for _, c := range cases {
		if got := Negotiate(c.header, c.fallback, c.offered...); got != c.want {
			t.Errorf("Negotiate(%q, %q, %v) = %s, want %s", c.header, c.fallback, c.offered, got, c.want)
		}
	}
}

// Every built-in language can be chosen by its own tag, and every tag Negotiate maps to is built in.
func TestNegotiate_EveryBuiltinLanguageIsReachable(t *testing.T) {
	for _, lang := range Languages {
		if got := Negotiate(lang, "none"); got != lang {
			t.Errorf("Negotiate(%q) = %s", lang, got)
		}
	}
	for primary, lang := range byPrimary {
		if !slices.Contains(Languages, lang) {
			t.Errorf("byPrimary[%s] = %s, which is not built in", primary, lang)
		}
	}
}
