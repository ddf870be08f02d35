// Package admin is the operator listener (admin.listen): health and readiness probes, Prometheus
// metrics, and the /api/* endpoints behind a bearer key. It is never mounted on the public listener.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgeq/edgeq/internal/web"
)

// Options configures the admin handler.
type Options struct {
	// APIKey guards /api/*; "" disables the API entirely (404), so an unset key never means "open".
	APIKey   string
	Gatherer prometheus.Gatherer
	// Ready reports whether edgeq can serve: store reachable, configuration loaded, not draining.
	Ready     func(context.Context) map[string]error
	Responder *web.Responder
	Logger    *slog.Logger
	// API registers the /api/* endpoints of the features (queues, products, ...) on mux.
	API []func(mux *http.ServeMux)
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
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}))
	if opts.APIKey != "" {
		api := http.NewServeMux()
		for _, register := range opts.API {
			register(api)
		}
		mux.Handle("/api/", RequireKey(opts.APIKey, opts.Responder, web.Routes(api, opts.Responder)))
	}
	return withRequestInfo(opts.Logger, web.Routes(mux, opts.Responder))
}

// RequireKey lets a request through only with "Authorization: Bearer <key>". Both sides are hashed
// before the constant-time comparison, so neither the key's content nor its length leaks through timing.
func RequireKey(key string, rs *web.Responder, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !keyMatches(want, r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgeq admin"`)
			rs.Error(w, r, web.ErrUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// keyMatches reports whether an Authorization header carries the key whose SHA-256 is want. The work
// does not depend on where a wrong key differs, nor on its length beyond hashing it.
func keyMatches(want [sha256.Size]byte, authorization string) bool {
	given, ok := bearer(authorization)
	got := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok
}

func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// withRequestInfo gives admin requests a correlation id and logger like public ones, and logs API calls
// (probes and scrapes are too frequent to be worth a line).
func withRequestInfo(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := web.CorrelationID(r.Header)
		w.Header().Set(web.CorrelationHeader, id)
		info := web.NewRequest(logger.With("listener", "admin"), id)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			info.Logger().Info("admin request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		}
		next.ServeHTTP(w, r.WithContext(web.WithRequest(r.Context(), info)))
	})
}
