package static

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
)

func TestVersionedURLsAndCaching(t *testing.T) {
	a := New("/_edgeq/static/")
	url := a.URL("edgeq.css")
	if !regexp.MustCompile(`^/_edgeq/static/edgeq\.[0-9a-f]{10}\.css$`).MatchString(url) {
		t.Fatalf("URL = %q", url)
	}
	if a.URL("nope.css") != "" {
		t.Fatal("unknown asset got a URL")
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || len(body) == 0 {
		t.Fatalf("status %d, %d bytes", rec.Code, len(body))
	}
	h := rec.Header()
	if h.Get("Cache-Control") != "public, max-age=31536000, immutable" || h.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Fatalf("headers %v", h)
	}
	for _, path := range []string{"/_edgeq/static/edgeq.css", "/_edgeq/static/edgeq.0000000000.css", "/_edgeq/static/../static.go"} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d", path, rec.Code)
		}
	}
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest("POST", url, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("POST: %d", rec.Code)
	}
}

// The pages' icon is edgeq's own, served as SVG with the other assets.
func TestIcon(t *testing.T) {
	a := New("/_edgeq/static/")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest("GET", a.URL("favicon.svg"), nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("favicon: %d %v", rec.Code, rec.Header())
	}
}
