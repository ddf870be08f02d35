package web

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/templates"
)

func responder(t *testing.T) *Responder {
	t.Helper()
	pages, err := templates.Parse("", template.FuncMap{"static": func(string) string { return "/s.css" }})
	if err != nil {
		t.Fatal(err)
	}
	return &Responder{Pages: pages, Brand: "edgeq", Lang: "en"}
}

func TestWantsHTML(t *testing.T) {
	cases := []struct {
		method, accept string
		want           bool
	}{
		{"GET", "text/html,application/xhtml+xml,*/*;q=0.8", true},
		{"HEAD", "text/html", true},
		{"GET", "application/json", false},
		{"GET", "", false},
		{"POST", "text/html", false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, "/", nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		if got := WantsHTML(r); got != c.want {
			t.Errorf("%s %q: %v", c.method, c.accept, got)
		}
	}
}

func TestError_JSONBodyFieldsAndRetryAfter(t *testing.T) {
	rs := responder(t)
	rec := httptest.NewRecorder()
	e := Errorf(429, "RATE_LIMITED", "Too many requests.").With("wait_url", "/_edgeq/wait/drop")
	e.RetryAfter = 1500 * time.Millisecond
	rs.Error(rec, httptest.NewRequest("POST", "/", nil), e)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 429 || body["success"] != false || body["error"] != "RATE_LIMITED" || body["wait_url"] != "/_edgeq/wait/drop" {
		t.Fatalf("%d %v", rec.Code, body)
	}
	if rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("Retry-After %q, want whole seconds rounded up", rec.Header().Get("Retry-After"))
	}
	// A plain error is a 500 that shows nothing of its cause.
	rec = httptest.NewRecorder()
	rs.Error(rec, httptest.NewRequest("GET", "/", nil), errors.New("secret database detail"))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "secret") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestRoutes_404And405(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /thing", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("thing")) })
	h := Routes(mux, responder(t))
	cases := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/thing", 200, ""},
		{"POST", "/thing", 405, "METHOD_NOT_ALLOWED"},
		{"GET", "/other", 404, "NOT_FOUND"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.status || (c.code != "" && !strings.Contains(rec.Body.String(), c.code)) {
			t.Errorf("%s %s: %d %s", c.method, c.path, rec.Code, rec.Body)
		}
		if c.status == 405 && rec.Header().Get("Allow") == "" {
			t.Errorf("405 without Allow")
		}
	}
}

func TestCorrelationID(t *testing.T) {
	h := http.Header{}
	h.Set(CorrelationHeader, "ok-id_1.2:3")
	if CorrelationID(h) != "ok-id_1.2:3" {
		t.Fatal("sane id replaced")
	}
	for _, bad := range []string{"", "has space", "a\"b", strings.Repeat("x", 129), "é"} {
		h.Set(CorrelationHeader, bad)
		if got := CorrelationID(h); got == bad || len(got) != 32 {
			t.Errorf("%q -> %q", bad, got)
		}
	}
}

// The waiting page's variant of QUEUE_NOT_FOUND keeps the code (and so the page's texts, msg. and
// head.QUEUE_NOT_FOUND) with its own status and English message.
func TestErrWaitingRoomNotFound_IsQueueNotFoundAsA404(t *testing.T) {
	e := ErrWaitingRoomNotFound
	if e.Code != ErrQueueNotFound.Code || e.Status != http.StatusNotFound || e.Message != "There is no such waiting room." {
		t.Fatalf("ErrWaitingRoomNotFound = %d %s %q", e.Status, e.Code, e.Message)
	}
	if ErrQueueNotFound.Status != http.StatusBadRequest || ErrQueueNotFound.Message != "There is no such queue." {
		t.Fatalf("deriving the variant changed QUEUE_NOT_FOUND: %d %q", ErrQueueNotFound.Status, ErrQueueNotFound.Message)
	}
}
