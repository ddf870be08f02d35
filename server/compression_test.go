package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rawClient sees answers as they travel: no gzip asked for or decoded behind the test's back, no
// redirect followed.
var rawClient = &http.Client{
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

func fetchRaw(t *testing.T, method, url string, header http.Header) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{resp.StatusCode, resp.Header, body}
}

// decoded is the body as the client reads it, checking that a compressed one says so with its length.
func (r rawResponse) decoded(t *testing.T, what string) string {
	t.Helper()
	if r.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("%s: not compressed: %d %v", what, r.status, r.header)
	}
	if !strings.Contains(strings.Join(r.header.Values("Vary"), ","), "Accept-Encoding") {
		t.Errorf("%s: Vary %q", what, r.header.Values("Vary"))
	}
	if cl := r.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(r.body)) {
		t.Errorf("%s: Content-Length %s for %d bytes", what, cl, len(r.body))
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return string(plain)
}

// browser is what Chromium sends with a page load.
var browser = http.Header{
	"Accept":          {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
	"Accept-Encoding": {"gzip, deflate, br, zstd"},
	"Accept-Language": {"en"},
}

// edgeq compresses its own answers — the waiting page, scripts and styles, error pages (on the shop's
// routes too), the dashboard — for clients that accept gzip, and leaves short JSON such as a status
// poll as it is. The shop's answers pass exactly as the shop sent them, plain or already compressed,
// whatever the client accepts.
func TestCompression_OwnAnswersCompressedShopsAnswersUntouched(t *testing.T) {
	page := []byte(strings.Repeat("<p>The shop's own page, which it chose not to compress.</p>\n", 100))
	var gzipped bytes.Buffer
	zw := gzip.NewWriter(&gzipped)
	zw.Write(page)
	zw.Close()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "public, max-age=60")
		h.Set("ETag", `"v1"`)
		switch r.URL.Path {
		case "/plain":
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Content-Length", strconv.Itoa(len(page)))
			w.Write(page)
		case "/gzipped":
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Content-Encoding", "gzip")
			h.Set("Vary", "Accept-Encoding")
			h.Set("Content-Length", strconv.Itoa(gzipped.Len()))
			w.Write(gzipped.Bytes())
		case "/streamed":
			h.Set("Content-Type", "application/json")
			for i := range 200 {
				fmt.Fprintf(w, `{"line":%d,"text":"a streamed answer without a length"}`+"\n", i)
				if i%50 == 0 {
					w.(http.Flusher).Flush()
				}
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(origin.Close)
	in := start(t, configText(origin.URL, `  - { name: gated, match: "GET /gated", host: "shop.example", queue: drop }`)+`queues:
  - { id: drop, capacity: 0 }
limits: { join_per_ip_per_minute: 0, status_per_ip_per_minute: 0 }
`)

	for _, path := range []string{"/plain", "/gzipped", "/streamed"} {
		for _, accept := range []string{"gzip, deflate, br, zstd", ""} {
			header := http.Header{"Accept-Encoding": {accept}, "Host": {"shop.example"}}
			direct := fetchRaw(t, "GET", origin.URL+path, header)
			proxied := fetchRaw(t, "GET", in.public+path, header)
			if !bytes.Equal(direct.body, proxied.body) || direct.status != proxied.status {
				t.Errorf("%s (%q): %d bytes through edgeq, the shop sent %d", path, accept, len(proxied.body), len(direct.body))
			}
			for name := range direct.header {
				if name != "Date" && strings.Join(direct.header[name], "|") != strings.Join(proxied.header[name], "|") {
					t.Errorf("%s (%q): %s %q through edgeq, the shop sent %q", path, accept, name, proxied.header[name], direct.header[name])
				}
			}
			for _, name := range []string{"Content-Encoding", "Vary", "Content-Length"} {
				if _, sent := direct.header[name]; !sent && proxied.header[name] != nil {
					t.Errorf("%s (%q): edgeq added %s %q", path, accept, name, proxied.header[name])
				}
			}
		}
	}

	// The waiting page: a place taken, the page compressed with its exact length.
	wait := fetchRaw(t, "GET", in.public+"/_edgeq/wait/drop?return=%2Fgated", browser)
	html := wait.decoded(t, "the waiting page")
	if wait.status != 200 || !strings.Contains(html, "<html") || len(wait.body) > len(html)/2 {
		t.Fatalf("waiting page: %d, %d bytes for %d", wait.status, len(wait.body), len(html))
	}
	// Its status poll is short JSON: sent as it is, with its length.
	statusURL := regexp.MustCompile(`/_edgeq/status/drop/[0-9a-f-]+`).FindString(html)
	poll := fetchRaw(t, "GET", in.public+statusURL, http.Header{"Accept-Encoding": {"gzip"}})
	if poll.status != 200 || poll.header.Get("Content-Encoding") != "" || poll.header.Get("Content-Length") != strconv.Itoa(len(poll.body)) ||
		!bytes.Contains(poll.body, []byte(`"queue_status":"waiting"`)) {
		t.Fatalf("status poll %s: %d %v %s", statusURL, poll.status, poll.header, poll.body)
	}
	// HEAD of the page: its headers, nothing compressed.
	head := fetchRaw(t, "HEAD", in.public+"/_edgeq/wait/drop?return=%2Fgated", browser)
	if head.status != 200 || head.header.Get("Content-Encoding") != "" || head.header.Get("Vary") != "Accept-Encoding" || len(head.body) != 0 {
		t.Fatalf("HEAD: %d %v", head.status, head.header)
	}
	// Its script, compressed once at start.
	script := regexp.MustCompile(`/_edgeq/static/wait\.[0-9a-f]{10}\.js`).FindString(html)
	js := fetchRaw(t, "GET", in.public+script, browser)
	if !strings.Contains(js.decoded(t, "wait.js"), "function") || js.header.Get("Content-Length") == "" {
		t.Fatalf("wait.js: %v", js.header)
	}
	// An error page edgeq sends in place of the shop (every route names a host, and 127.0.0.1 is none)
	// is under a kilobyte: sent as it is, with its length.
	misdirected := fetchRaw(t, "GET", in.public+"/", browser)
	if misdirected.status != http.StatusMisdirectedRequest || misdirected.header.Get("Content-Encoding") != "" ||
		misdirected.header.Get("Content-Length") != strconv.Itoa(len(misdirected.body)) || !bytes.Contains(misdirected.body, []byte("Unknown site")) {
		t.Fatalf("421 page: %d %v", misdirected.status, misdirected.header)
	}
	// The admin listener: the dashboard compressed; Prometheus compresses /metrics itself, once.
	dashboard := fetchRaw(t, "GET", in.admin+"/dashboard", http.Header{"Accept-Encoding": {"gzip"},
		"Authorization": {"Bearer test-key"}})
	if !strings.Contains(dashboard.decoded(t, "the dashboard"), "<html") {
		t.Fatal("the dashboard did not decode to a page")
	}
	metrics := fetchRaw(t, "GET", in.admin+"/metrics", http.Header{"Accept-Encoding": {"gzip"}})
	if text := metrics.decoded(t, "/metrics"); !strings.Contains(text, "edgeq_http_requests_total") {
		t.Fatalf("/metrics is not Prometheus text once decoded: %.200q", text)
	}
}
