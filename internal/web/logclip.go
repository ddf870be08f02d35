package web

import (
	"strconv"

	"github.com/edgeq/edgeq/internal/vocab"
)

// LogValueMax bounds every visitor-controlled value a log line carries (a path, a method, a refused
// field inside an error's cause), in bytes.
const LogValueMax = 256

// ClipLog returns s as a log line may carry it: unchanged up to LogValueMax bytes, else clipped (vocab.Clip)
// with a marker of the full length. Without it a visitor turns every request into a log line as large
// as the request (a 1 MB amount, a 60 KB path), and the log volume, not the shop, is what gives out.
func ClipLog(s string) string {
	if len(s) <= LogValueMax {
		return s
	}
	return vocab.Clip(s, LogValueMax) + "[clipped, " + strconv.Itoa(len(s)) + " bytes]"
}

// ClipErr is ClipLog of an error's text ("" for nil), for errors that may quote what a visitor sent
// (a field's value, the URL of a request to the origin).
func ClipErr(err error) string {
	if err == nil {
		return ""
	}
	return ClipLog(err.Error())
}
