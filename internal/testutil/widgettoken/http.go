package widgettoken

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Hold holds a siteverify answer for the delay a test set (nanoseconds, none at 0); false when the
// request ended first, and there is nothing to answer.
func Hold(r *http.Request, delay *atomic.Int64) bool {
	d := time.Duration(delay.Load())
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	}
}

// Preflight lets the protected site's pages (another origin) ask the token endpoint for a token, and
// answers a CORS preflight; true when r was one, and has been answered.
func Preflight(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method != http.MethodOptions {
		return false
	}
	w.Header().Set("Access-Control-Allow-Methods", "POST")
	w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	return true
}
