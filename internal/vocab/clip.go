package vocab

import "unicode/utf8"

// Clip is the one way edgeq shortens what a visitor sent before quoting it: s unchanged up to max
// bytes, else its first max bytes, cut on a UTF-8 boundary (a rune the cut falls inside is left out
// whole), and "...". Each caller keeps its own bound (a log line's, a field quoted in an answer, a
// sample of a template's output). Short values, the common case, cost nothing.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
