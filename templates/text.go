package templates

import (
	"fmt"
	"strings"
)

// Text is one language's strings; templates call {{.Text.T "key"}}.
type Text struct {
	lang    string
	strings map[string]string
}

// For returns the text of a language ("en" for one not built in).
func For(lang string) Text {
	if s, ok := catalog[lang]; ok {
		return Text{lang: lang, strings: s}
	}
	return Text{lang: "en", strings: catalog["en"]}
}

// Lang is the BCP 47 tag of the text's language, for <html lang>.
func (t Text) Lang() string { return t.lang }

// Dir is the writing direction of the text's language, for <html dir>: "rtl" for Arabic and Hebrew,
// "ltr" for the others.
func (t Text) Dir() string {
	if rightToLeft[t.lang] {
		return "rtl"
	}
	return "ltr"
}

// T returns the string for key, formatted with args (fmt verbs); English when the language lacks it,
// and the key itself when no language has it (a missing key shows up on the page, not as a crash).
func (t Text) T(key string, args ...any) string {
	s, ok := t.strings[key]
	if !ok {
		if s, ok = catalog["en"][key]; !ok {
			return key
		}
	}
	if len(args) > 0 {
		return fmt.Sprintf(s, args...)
	}
	return s
}

// Duration renders a wait in seconds for people ("about 4 minutes"); 0 is "any moment", a negative
// wait is unknown. The minutes and hours it counts are at least 2, so a language with a plural for
// "many" and a singular for 1 needs only the plural; languages with more forms (Polish, Arabic) use
// their short unit, which does not change with the number.
func (t Text) Duration(seconds int64) string {
	switch {
	case seconds < 0:
		return t.T("wait.js.eta_unknown")
	case seconds == 0:
		return t.T("wait.js.eta_now")
	case seconds < 60:
		return t.T("wait.js.under_min")
	case seconds < 90:
		return t.T("wait.js.one_min")
	case seconds < 5400:
		return t.T("wait.js.about_min", (seconds+30)/60)
	default:
		return t.T("wait.js.about_hr", (seconds+1800)/3600)
	}
}

// Has reports whether the language (or English) has key.
func (t Text) Has(key string) bool {
	_, ok := t.strings[key]
	if !ok {
		_, ok = catalog["en"][key]
	}
	return ok
}

// Strings returns the strings of keys with a prefix, for the page scripts.
func (t Text) Strings(prefix string) map[string]string {
	out := map[string]string{}
	for k := range catalog["en"] {
		if strings.HasPrefix(k, prefix) {
			out[strings.TrimPrefix(k, prefix)] = t.T(k)
		}
	}
	return out
}
