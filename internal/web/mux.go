package web

import "net/http"

// Routes wraps a ServeMux so that requests it has no pattern for get edgeq's own 404 or 405 answer (JSON
// or page) instead of ServeMux's plain-text ones.
func Routes(mux *http.ServeMux, rs *Responder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// ServeMux answers 405 with an Allow header when another method matches: keep that distinction.
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.header.Get("Allow"))
			rs.Error(w, r, ErrMethodNotAllowed)
			return
		}
		rs.Error(w, r, ErrNotFound)
	})
}

// statusProbe captures what ServeMux's fallback handler would answer without sending it.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }
