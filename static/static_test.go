package static

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
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

// Files added at start-up (the operator's logo and accent) are served like the embedded ones: a
// content hash in the name, cached for a year; an SVG gets a policy that keeps its script from running.
func TestAdd_ServedWithHashAndSVGPolicy(t *testing.T) {
	a := New("/_edgeq/static/")
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><script>alert(1)</script></svg>`)
	logo := a.Add("logo.svg", svg, "image/svg+xml")
	if !regexp.MustCompile(`^/_edgeq/static/logo\.[0-9a-f]{10}\.svg$`).MatchString(logo) || a.URL("logo.svg") != logo {
		t.Fatalf("URL = %q, URL(logo.svg) = %q", logo, a.URL("logo.svg"))
	}
	get := func(url string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
		return rec
	}
	rec := get(logo)
	h := rec.Header()
	if rec.Code != 200 || rec.Body.String() != string(svg) || h.Get("Content-Type") != "image/svg+xml" ||
		h.Get("Content-Security-Policy") != "default-src 'none'; style-src 'unsafe-inline'" ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("logo: %d %v", rec.Code, h)
	}
	// edgeq's own icon is an SVG too.
	if get(a.URL("favicon.svg")).Header().Get("Content-Security-Policy") == "" {
		t.Error("the icon is served without the SVG policy")
	}
	css := a.Add("accent.css", []byte(":root { --accent: #0a7c42; }"), "text/css; charset=utf-8")
	if rec := get(css); rec.Code != 200 || rec.Header().Get("Content-Security-Policy") != "" || rec.Header().Get("Content-Type") != "text/css; charset=utf-8" {
		t.Fatalf("accent.css: %d %v", rec.Code, rec.Header())
	}
	// Another body under the same name has another URL, and the old one is gone.
	again := a.Add("logo.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 2 2"/>`), "image/svg+xml")
	if again == logo || get(logo).Code != http.StatusNotFound || get(again).Code != 200 {
		t.Fatalf("replaced logo: %s then %s", logo, again)
	}
}

// Scripts and styles are compressed once, when added, and served compressed to clients that accept
// gzip, with the compressed length; HEAD, a Range and clients without gzip get the file as it is. Each
// of them says Vary: Accept-Encoding, since a cache in front of edgeq keeps these a year. A file too
// short to be worth it (the icon) is served as it is to everyone, without Vary.
func TestCompressedOnceAndServedByAcceptEncoding(t *testing.T) {
	a := New("/_edgeq/static/")
	plain, _ := files.ReadFile("wait.js")
	serve := func(method, url string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, url, nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, r)
		return rec
	}
	rec := serve("GET", a.URL("wait.js"), map[string]string{"Accept-Encoding": "gzip, deflate, br, zstd"})
	h := rec.Header()
	if rec.Code != 200 || h.Get("Content-Encoding") != "gzip" || h.Get("Vary") != "Accept-Encoding" ||
		h.Get("Content-Length") != strconv.Itoa(rec.Body.Len()) || h.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("gzip: %d %v", rec.Code, h)
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(zr); !bytes.Equal(got, plain) || rec.Body.Len() > len(plain)/2 {
		t.Fatalf("decodes to %d bytes (file %d), sent %d", len(got), len(plain), rec.Body.Len())
	}
	for _, c := range []struct {
		method string
		header map[string]string
		status int
	}{
		{"GET", nil, 200},
		{"GET", map[string]string{"Accept-Encoding": "gzip;q=0"}, 200},
		{"GET", map[string]string{"Accept-Encoding": "identity"}, 200},
		{"HEAD", map[string]string{"Accept-Encoding": "gzip"}, 200},
		{"GET", map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-99"}, 206},
	} {
		rec := serve(c.method, a.URL("wait.js"), c.header)
		want := plain
		switch {
		case c.method == "HEAD":
			want = nil
		case c.status == 206:
			want = plain[:100]
		}
		if rec.Code != c.status || rec.Header().Get("Content-Encoding") != "" || rec.Header().Get("Vary") != "Accept-Encoding" ||
			!bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("%s %v: %d %v, %d bytes", c.method, c.header, rec.Code, rec.Header(), rec.Body.Len())
		}
	}
	rec = serve("GET", a.URL("favicon.svg"), map[string]string{"Accept-Encoding": "gzip"})
	if rec.Header().Get("Content-Encoding") != "" || rec.Header().Get("Vary") != "" {
		t.Errorf("the icon: %v", rec.Header())
	}
}
