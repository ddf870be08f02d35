package templates

import (
	"slices"
	"strconv"
	"strings"
)

// Negotiate picks the language of a page: the built-in language an Accept-Language header prefers
// (RFC 9110 section 12.5.4) among offered, or fallback when it names none of them. No offered
// languages means every built-in one (pages.languages: []).
//
// A range names a built-in language by its primary subtag, whatever region it adds: es-MX reads es,
// fr-CA fr, de-AT de, and every Portuguese (pt, pt-PT, pt-BR) reads pt-BR. Chinese is told apart by
// script or region: Hant, TW, HK and MO read Traditional (zh-TW); Hans, CN, SG and a bare "zh" read
// Simplified (zh-CN). The withdrawn codes iw (Hebrew) and in (Indonesian), which old Java and Android
// versions still send, read he and id. Ranges are taken by falling quality, in header order among
// equals; a range with q=0 ("not this one") or a malformed q is skipped, and "*" leaves the choice to
// fallback.
func Negotiate(acceptLanguage, fallback string, offered ...string) string {
	type choice struct {
		lang string
		q    float64
	}
	var choices []choice
	for part := range strings.SplitSeq(acceptLanguage, ",") {
		tag, params, _ := strings.Cut(part, ";")
		q, ok := quality(params)
		if !ok || q <= 0 {
			continue
		}
		lang := builtinLanguage(tag)
		if lang == "" || (len(offered) > 0 && !slices.Contains(offered, lang)) {
			continue
		}
		choices = append(choices, choice{lang, q})
	}
	if len(choices) == 0 {
		return fallback
	}
	slices.SortStableFunc(choices, func(a, b choice) int {
		switch {
		case a.q > b.q:
			return -1
		case a.q < b.q:
			return 1
		}
		return 0
	})
	return choices[0].lang
}

// quality reads the weight of a language range from its parameters ("q=0.8"); 1 without one, false
// when it is malformed or outside 0..1.
func quality(params string) (float64, bool) {
	for p := range strings.SplitSeq(params, ";") {
		name, value, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || q < 0 || q > 1 {
			return 0, false
		}
		return q, true
	}
	return 1, true
}

// byPrimary maps a primary language subtag to the built-in language that speaks it, for the
// languages with one variant (Chinese has two, told apart in builtinLanguage).
var byPrimary = map[string]string{
	"en": "en", "ja": "ja", "ko": "ko", "es": "es", "fr": "fr", "de": "de", "pt": "pt-BR", "it": "it",
	"nl": "nl", "pl": "pl", "tr": "tr", "id": "id", "th": "th", "vi": "vi", "ar": "ar", "he": "he",
	"iw": "he", "in": "id",
}

// builtinLanguage is the built-in language a language range names, "" for none.
func builtinLanguage(tag string) string {
	subtags := strings.Split(strings.ToLower(strings.TrimSpace(tag)), "-")
	if subtags[0] != "zh" {
		return byPrimary[subtags[0]]
	}
	for _, s := range subtags[1:] {
		switch s {
		case "hant", "tw", "hk", "mo":
			return "zh-TW"
		case "hans", "cn", "sg":
			return "zh-CN"
		}
	}
	return "zh-CN"
}
