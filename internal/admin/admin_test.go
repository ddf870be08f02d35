package admin

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

func newAdmin(t *testing.T, key string, ready func(context.Context) map[string]error) *httptest.Server {
	t.Helper()
	assets := static.New("/_edgeq/static/")
	pages, err := templates.Parse("", template.FuncMap{"static": assets.URL})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	if ready == nil {
		ready = func(context.Context) map[string]error { return map[string]error{"store": nil, "config": nil} }
	}
	srv := httptest.NewServer(Handler(Options{
		APIKey: key, Gatherer: reg, Ready: ready, Logger: slog.New(slog.DiscardHandler),
		Responder: &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"},
		API: []func(*http.ServeMux){func(mux *http.ServeMux) {
			mux.HandleFunc("GET /api/ping", func(w http.ResponseWriter, r *http.Request) {
				web.WriteJSON(w, 200, map[string]string{"pong": "yes"})
			})
		}},
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestAPI_DisabledWithoutKey(t *testing.T) {
	srv := newAdmin(t, "", nil)
	for _, auth := range []string{"", "Bearer ", "Bearer anything"} {
		if status, body := get(t, srv.URL+"/api/ping", auth); status != 404 || !strings.Contains(body, `"NOT_FOUND"`) {
			t.Fatalf("auth %q: %d %s", auth, status, body)
		}
	}
}

func TestAPI_RequiresTheBearerKey(t *testing.T) {
	srv := newAdmin(t, "s3cret-key", nil)
	cases := []struct {
		auth   string
		status int
	}{
		{"", 401},
		{"Bearer", 401},
		{"Bearer wrong", 401},
		{"Bearer s3cret-ke", 401},
		{"Bearer s3cret-key2", 401},
		{"Basic s3cret-key", 401},
		{"s3cret-key", 401},
		{"Bearer s3cret-key", 200},
		{"bearer s3cret-key", 200},
	}
	for _, c := range cases {
		status, body := get(t, srv.URL+"/api/ping", c.auth)
		if status != c.status {
			t.Errorf("auth %q: status %d, want %d (%s)", c.auth, status, c.status, body)
		}
		if status == 401 && !strings.Contains(body, `"UNAUTHORIZED"`) {
			t.Errorf("auth %q: body %s", c.auth, body)
		}
	}
	if status, body := get(t, srv.URL+"/api/nothing-here", "Bearer s3cret-key"); status != 404 || !strings.Contains(body, "NOT_FOUND") {
		t.Fatalf("unknown API path: %d %s", status, body)
	}
	// Without the key, even unknown API paths say 401: the API's shape is not disclosed.
	if status, _ := get(t, srv.URL+"/api/nothing-here", ""); status != 401 {
		t.Fatalf("unknown API path without key: %d", status)
	}
}

func TestProbesAndMetricsNeedNoKey(t *testing.T) {
	storeDown := errors.New("store ping: connection refused")
	var down bool
	srv := newAdmin(t, "k", func(context.Context) map[string]error {
		if down {
			return map[string]error{"store": storeDown, "config": nil}
		}
		return map[string]error{"store": nil, "config": nil}
	})
	if status, body := get(t, srv.URL+"/healthz", ""); status != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthz %d %s", status, body)
	}
	if status, body := get(t, srv.URL+"/readyz", ""); status != 200 || !strings.Contains(body, `"ready"`) {
		t.Fatalf("readyz %d %s", status, body)
	}
	down = true
	status, body := get(t, srv.URL+"/readyz", "")
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	json.Unmarshal([]byte(body), &ready)
	if status != 503 || ready.Status != "not ready" || ready.Checks["store"] != storeDown.Error() || ready.Checks["config"] != "ok" {
		t.Fatalf("readyz with the store down: %d %s", status, body)
	}
	if status, body := get(t, srv.URL+"/metrics", ""); status != 200 || !strings.Contains(body, "edgeq_store_up") {
		t.Fatalf("metrics %d", status)
	}
}
