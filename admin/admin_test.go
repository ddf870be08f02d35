package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
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
	dashboard, err := NewDashboard("edgeq")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Options{
		Dashboard: dashboard,
		APIKey:    key, Gatherer: reg, Ready: ready, Logger: slog.New(slog.DiscardHandler),
		Responder: &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"},
		API: []func(*http.ServeMux){func(mux *http.ServeMux) {
			mux.HandleFunc("GET /api/ping", func(w http.ResponseWriter, r *http.Request) {
				web.WriteJSON(w, 200, map[string]string{"pong": "yes"})
			})
			mux.HandleFunc("POST /api/ping", func(w http.ResponseWriter, r *http.Request) {
				web.WriteJSON(w, 200, map[string]string{"changed": "yes"})
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

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// The dashboard is behind the key: a browser is asked for Basic credentials (the key as password),
// the page and its assets then load with a strict CSP, and the API accepts the same credentials —
// but a change made with them must carry the dashboard's header, which a cross-site form cannot send.
func TestDashboard_BehindTheKey(t *testing.T) {
	srv := newAdmin(t, "s3cret-key", nil)
	resp, err := http.Get(srv.URL + "/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	challenges := strings.Join(resp.Header.Values("WWW-Authenticate"), " | ")
	if resp.StatusCode != 401 || !strings.Contains(challenges, `Basic realm="edgeq admin"`) {
		t.Fatalf("no key: %d, challenges %q", resp.StatusCode, challenges)
	}
	for _, auth := range []string{basic("admin", "wrong"), basic("s3cret-key", ""), "Basic !!!", basic("", "s3cret-ke")} {
		if status, _ := get(t, srv.URL+"/dashboard", auth); status != 401 {
			t.Errorf("%q: %d", auth, status)
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+"/dashboard", nil)
	req.Header.Set("Authorization", basic("anyone", "s3cret-key"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(string(page), `id="queues"`) {
		t.Fatalf("page: %d %v\n%s", resp.StatusCode, resp.Header, page)
	}
	assets := regexp.MustCompile(`/dashboard/static/dashboard\.[0-9a-f]+\.(js|css)`).FindAllString(string(page), -1)
	if len(assets) != 2 {
		t.Fatalf("assets in the page: %v", assets)
	}
	for _, a := range assets {
		if status, _ := get(t, srv.URL+a, ""); status != 401 {
			t.Errorf("asset %s without the key: %d", a, status)
		}
		if status, body := get(t, srv.URL+a, basic("x", "s3cret-key")); status != 200 || len(body) < 100 {
			t.Errorf("asset %s: %d", a, status)
		}
	}

	post := func(auth, header string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/api/ping", nil)
		req.Header.Set("Authorization", auth)
		if header != "" {
			req.Header.Set(DashboardHeader, header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post(basic("x", "s3cret-key"), ""); s != 403 {
		t.Errorf("change with Basic credentials and no dashboard header: %d", s)
	}
	if s := post(basic("x", "s3cret-key"), "1"); s != 200 {
		t.Errorf("change from the dashboard: %d", s)
	}
	if s := post("Bearer s3cret-key", ""); s != 200 {
		t.Errorf("change with the bearer key: %d", s)
	}
	if s := post(basic("x", "wrong"), "1"); s != 401 {
		t.Errorf("change with a wrong key: %d", s)
	}
	if status, _ := get(t, srv.URL+"/api/ping", basic("x", "s3cret-key")); status != 200 {
		t.Errorf("read with Basic credentials: %d", status)
	}
}

func TestDashboard_OffWithoutKey(t *testing.T) {
	srv := newAdmin(t, "", nil)
	if status, _ := get(t, srv.URL+"/dashboard", basic("x", "")); status != 404 {
		t.Fatalf("dashboard without a configured key: %d", status)
	}
}

// The refusal of a change that did not come from the dashboard names the header it lacks.
func TestNotFromDashboard_NamesTheHeader(t *testing.T) {
	if !strings.Contains(web.ErrNotFromDashboard.Message, DashboardHeader) {
		t.Fatalf("%q does not name %s", web.ErrNotFromDashboard.Message, DashboardHeader)
	}
}

// The admin API's calls that change something are logged at info; its reads, which an open
// dashboard makes several times a second, at debug.
func TestRequestLog_ChangesAtInfoReadsAtDebug(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := withRequestInfo(logger, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/queues"}, {"HEAD", "/api/queues"}, {"POST", "/api/queue"}, {"DELETE", "/api/queue/q/invites/secret"},
		{"GET", "/healthz"},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"method":"POST"`) || !strings.Contains(lines[1], `"method":"DELETE"`) ||
		!strings.Contains(lines[1], `"path":"/api/queue/q/invites/{code}"`) || !strings.Contains(lines[0], `"level":"INFO"`) {
		t.Fatalf("want the POST and the DELETE at info, nothing else:\n%s", buf.String())
	}
	buf.Reset()
	debug := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	withRequestInfo(debug, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/queues", nil))
	if !strings.Contains(buf.String(), `"level":"DEBUG","msg":"admin request"`) {
		t.Fatalf("a read at debug: %s", buf.String())
	}
}
