package web

import (
	"strconv"
	"unicode/utf8"
)

// LogValueMax bounds every visitor-controlled value a log line carries (a path, a method, a refused
// field inside an error's cause), in bytes.
const LogValueMax = 256

// Clip is the one way edgeq shortens what a visitor sent before quoting it: s unchanged up to max
// bytes, else its first max bytes, cut on a UTF-8 boundary (a rune the cut falls inside is left out
// whole), and "...". Each caller keeps its own bound: ClipLog's LogValueMax for log lines, fields.Clip's
// fields.ValueMax for a field quoted in an answer. Short values, the common case, cost nothing.
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

// ClipLog returns s as a log line may carry it: unchanged up to LogValueMax bytes, else clipped (Clip)
// with a marker of the full length. Without it a visitor turns every request into a log line as large
// as the request (a 1 MB amount, a 60 KB path), and the log volume, not the shop, is what gives out.
func ClipLog(s string) string {
	if len(s) <= LogValueMax {
		return s
	}
	return Clip(s, LogValueMax) + "[clipped, " + strconv.Itoa(len(s)) + " bytes]"
}

// ClipErr is ClipLog of an error's text ("" for nil), for errors that may quote what a visitor sent
// (a field's value, the URL of a request to the origin).
func ClipErr(err error) string {
	if err == nil {
		return ""
	}
	return ClipLog(err.Error())
}
