// Package admin is the operator listener (admin.listen): health and readiness probes, Prometheus
// metrics, and the /api/* endpoints behind a bearer key. It is never mounted on the public listener.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgeq/edgeq/internal/compression"
	"github.com/edgeq/edgeq/internal/web"
)

// Options configures the admin handler.
type Options struct {
	// APIKey guards /api/*; "" disables the API entirely (404), so an unset key never means "open".
	APIKey   string
	Gatherer prometheus.Gatherer
	// Misdirected counts the 421 answers to a Host the listener does not answer to (nil: not counted).
	Misdirected interface{ Inc() }
	// Ready reports whether edgeq can serve: store reachable, configuration loaded, not draining.
	Ready     func(context.Context) map[string]error
	Responder *web.Responder
	Logger    *slog.Logger
	// API registers the /api/* endpoints of the features (queues, products, ...) on mux.
	API []func(mux *http.ServeMux)
	// Dashboard serves GET /dashboard and its assets below /dashboard/ (see NewDashboard); nil leaves it
	// out. Like the API it needs the key, and is off without one.
	Dashboard http.Handler
	// Report serves GET /report (the report after a drop, report); nil leaves it out. It signs
	// in like the dashboard.
	Report http.Handler
	// AllowedHosts are the Host names answered besides IP literals and localhost (admin.allowed_hosts);
	// any other gets 421 MISDIRECTED_REQUEST (allowHosts).
	AllowedHosts []string
	// OpenMetrics serves /metrics in the OpenMetrics format to scrapers that ask for it: the format
	// that carries exemplars (trace ids on the latency histograms, while tracing is on).
	OpenMetrics bool
}

// Handler builds the admin handler.
func Handler(opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		web.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		checks := map[string]string{}
		status, state := http.StatusOK, "ready"
		for name, err := range opts.Ready(ctx) {
			checks[name] = "ok"
			if err != nil {
				checks[name] = err.Error()
				status, state = http.StatusServiceUnavailable, "not ready"
			}
		}
		web.WriteJSON(w, status, map[string]any{"status": state, "checks": checks})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
		EnableOpenMetrics: opts.OpenMetrics,
	}))
	if opts.APIKey != "" {
		api := http.NewServeMux()
		for _, register := range opts.API {
			register(api)
		}
		mux.Handle("/api/", RequireKey(opts.APIKey, opts.Responder, web.Routes(api, opts.Responder)))
		if opts.Dashboard != nil {
			page := requireKey(opts.APIKey, opts.Responder, opts.Dashboard, true)
			mux.Handle("GET /dashboard", page)
			mux.Handle("GET /dashboard/", page)
		}
		if opts.Report != nil {
			mux.Handle("GET /report", requireKey(opts.APIKey, opts.Responder, opts.Report, true))
		}
	}
	// Compressed: the dashboard's and report's pages and scripts, the API's lists (/metrics compresses
	// itself, and passes as it is).
	return compression.Handler(withRequestInfo(opts.Logger, allowHosts(opts.AllowedHosts, opts.Misdirected, opts.Responder, web.Routes(mux, opts.Responder))))
}

// DashboardHeader must accompany every state-changing API call authenticated with Basic credentials.
// Browsers attach cached Basic credentials to any request for the admin origin, including one forged
// by another site's form; such a form cannot set a custom header (and a cross-site script cannot
// without a CORS preflight edgeq never grants), so the header proves the call came from the dashboard.
const DashboardHeader = "X-Edgeq-Dashboard"

// RequireKey lets a request through only with the admin key: "Authorization: Bearer <key>", or HTTP
// Basic with the key as password (any user name: what a browser sends for the dashboard). Both sides are
// hashed before the constant-time comparison, so neither the key's content nor its length leaks through
// timing.
func RequireKey(key string, rs *web.Responder, next http.Handler) http.Handler {
	return requireKey(key, rs, next, false)
}

// requireKey is RequireKey; challengeBasic makes a refusal ask the browser for Basic credentials (the
// dashboard page), instead of only naming the Bearer scheme (the API).
func requireKey(key string, rs *web.Responder, next http.Handler, challengeBasic bool) http.Handler {
	want := sha256.Sum256([]byte(key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, basic := keyMatches(want, r.Header.Get("Authorization"))
		if !ok {
			if challengeBasic {
				// Basic only: Chromium refuses a 401 that also names a scheme it cannot answer.
				w.Header().Set("WWW-Authenticate", `Basic realm="edgeq admin", charset="UTF-8"`)
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="edgeq admin"`)
			}
			rs.Error(w, r, web.ErrUnauthorized)
			return
		}
		if basic && !safeMethod(r.Method) && r.Header.Get(DashboardHeader) != "1" {
			rs.Error(w, r, web.ErrNotFromDashboard)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// keyMatches reports whether an Authorization header carries the key whose SHA-256 is want, and
// whether it came as Basic credentials. The work does not depend on where a wrong key differs, nor on
// its length beyond hashing it.
func keyMatches(want [sha256.Size]byte, authorization string) (ok, basic bool) {
	given, ok, basic := credential(authorization)
	got := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok, basic
}

// credential extracts the key from "Bearer <key>" or "Basic base64(<user>:<key>)".
func credential(header string) (key string, ok, basic bool) {
	scheme, value, found := strings.Cut(header, " ")
	if !found {
		return "", false, false
	}
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return strings.TrimSpace(value), true, false
	case strings.EqualFold(scheme, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
		if err != nil {
			return "", false, true
		}
		_, password, found := strings.Cut(string(raw), ":")
		return password, found, true
	}
	return "", false, false
}

// withRequestInfo gives admin requests a correlation id and logger like public ones, and logs API calls:
// those that change something at info, reads at debug (an open dashboard reads half a dozen every
// second; probes and scrapes are too frequent to be worth a line at all).
func withRequestInfo(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := web.CorrelationID(r.Header)
		w.Header().Set(web.CorrelationHeader, id)
		info := web.NewRequest(logger.With("listener", "admin"), id)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			level := slog.LevelInfo
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				level = slog.LevelDebug
			}
			info.Logger().Log(r.Context(), level, "admin request", "method", web.ClipLog(r.Method),
				"path", web.ClipLog(loggedPath(r.URL.Path)), "remote", r.RemoteAddr)
		}
		next.ServeHTTP(w, r.WithContext(web.WithRequest(r.Context(), info)))
	})
}

// loggedPath is an admin request's path as the log shows it: an invitation code in
// /api/queue/{id}/invites/{code} works until it is deleted, so it is logged as "{code}".
func loggedPath(path string) string {
	if head, _, found := strings.Cut(path, "/invites/"); found && strings.HasPrefix(path, "/api/queue/") {
		return head + "/invites/{code}"
	}
	return path
}
