package compression

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAcceptsGzip(t *testing.T) {
	for _, c := range []struct {
		header []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"gzip"}, true},
		{[]string{"GZip"}, true},
		{[]string{"x-gzip"}, true},
		{[]string{"gzip, deflate, br, zstd"}, true}, // Chromium's and Firefox's
		{[]string{"br;q=1.0, gzip;q=0.8, *;q=0.1"}, true},
		{[]string{"deflate", "gzip"}, true}, // two header lines
		{[]string{"*"}, true},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip; q=0.000"}, false},
		{[]string{"gzip;Q=0"}, false},
		{[]string{"*;q=0"}, false},
		{[]string{"gzip;q=0, *"}, false}, // named: "*" does not stand for it
		{[]string{"identity"}, false},
		{[]string{"identity, *;q=0"}, false},
		{[]string{"br, zstd"}, false},
		{[]string{"gzip;q=0.5, identity"}, false}, // identity preferred
		{[]string{"gzip, identity;q=0.5"}, true},
		{[]string{"gzip;q=0.5"}, true}, // identity not named: acceptable, not preferred
		{[]string{"gzip;q=abc"}, false},
		{[]string{"gzip;q=2"}, false},
		{[]string{"gzipx, xgzip"}, false},
		{[]string{" , ;, gzip ;q=1 , "}, true},
	} {
		if got := AcceptsGzip(c.header); got != c.want {
			t.Errorf("AcceptsGzip(%q) = %v, want %v", c.header, got, c.want)
		}
	}
	header := []string{"gzip, deflate, br, zstd"}
	if n := testing.AllocsPerRun(100, func() { AcceptsGzip(header) }); n != 0 {
		t.Errorf("AcceptsGzip allocates %v times", n)
	}
}

// page is a body worth compressing: about 6 KiB of markup that repeats, as pages do.
var page = []byte(strings.Repeat(`<li class="row"><span>edgeq</span> waiting room</li>`+"\n", 120))

// serve runs h for a GET (or method) with the given Accept-Encoding ("" for none).
func serve(t *testing.T, h http.Handler, method, acceptEncoding string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "/x", nil)
	if acceptEncoding != "" {
		r.Header.Set("Accept-Encoding", acceptEncoding)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("broken gzip: %v", err)
	}
	return out
}

// answer is a handler writing body with the given type and status, and its length when withLength.
func answer(status int, contentType string, body []byte, withLength bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		if withLength {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.WriteHeader(status)
		w.Write(body)
	})
}

func TestHandler_CompressesWhatIsWorthItForClientsThatAcceptGzip(t *testing.T) {
	for _, withLength := range []bool{true, false} {
		h := Handler(answer(200, "text/html; charset=utf-8", page, withLength))
		w := serve(t, h, "GET", "gzip, deflate, br, zstd")
		if w.Header().Get("Content-Encoding") != "gzip" || w.Header().Get("Vary") != "Accept-Encoding" {
			t.Fatalf("length %v: headers %v", withLength, w.Header())
		}
		if cl := w.Header().Get("Content-Length"); cl != "" {
			t.Errorf("length %v: the identity Content-Length %s was kept on a compressed body", withLength, cl)
		}
		if got := gunzip(t, w.Body.Bytes()); !bytes.Equal(got, page) {
			t.Fatalf("length %v: decodes to %d bytes, want the %d sent", withLength, len(got), len(page))
		}
		if w.Body.Len() > len(page)/5 {
			t.Errorf("length %v: %d bytes compressed from %d", withLength, w.Body.Len(), len(page))
		}
	}
}

func TestHandler_LeavesAnswersAsTheyAre(t *testing.T) {
	small := []byte(`{"queue_status":"waiting","queue_position":42}`)
	for _, c := range []struct {
		name           string
		h              http.Handler
		method, accept string
		body           []byte
		vary           bool
	}{
		{"no Accept-Encoding", answer(200, "text/html", page, true), "GET", "", page, true},
		{"gzip;q=0", answer(200, "text/html", page, true), "GET", "gzip;q=0, deflate", page, true},
		{"identity only", answer(200, "text/html", page, true), "GET", "identity", page, true},
		{"below MinSize, length known", answer(200, "application/json", small, true), "GET", "gzip", small, false},
		{"below MinSize, length unknown", answer(200, "application/json", small, false), "GET", "gzip", small, true},
		{"not compressible", answer(200, "image/png", page, true), "GET", "gzip", page, false},
		{"no Content-Type", answer(200, "", page, true), "GET", "gzip", page, false},
		{"server-sent events", answer(200, "text/event-stream", page, false), "GET", "gzip", page, false},
		{"already encoded", answer(200, "text/html", page, true), "GET", "gzip", page, false},
		{"206", answer(206, "text/html", page, true), "GET", "gzip", page, false},
		{"HEAD", answer(200, "text/html", page, true), "HEAD", "gzip", page, true},
	} {
		h := c.h
		if c.name == "already encoded" {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "br")
				c.h.ServeHTTP(w, r)
			})
		}
		w := serve(t, Handler(h), c.method, c.accept)
		if ce := w.Header().Get("Content-Encoding"); ce != "" && ce != "br" {
			t.Errorf("%s: Content-Encoding %q", c.name, ce)
		}
		if !bytes.Equal(w.Body.Bytes(), c.body) {
			t.Errorf("%s: body changed (%d bytes, sent %d)", c.name, w.Body.Len(), len(c.body))
		}
		// A stream has no length; every other answer keeps (or, held, gets) its own.
		if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(len(c.body)) && c.name != "server-sent events" {
			t.Errorf("%s: Content-Length %q, want %d", c.name, cl, len(c.body))
		}
		if vary := w.Header().Get("Vary") == "Accept-Encoding"; vary != c.vary {
			t.Errorf("%s: Vary %q, want it %v", c.name, w.Header().Get("Vary"), c.vary)
		}
	}
	for _, status := range []int{http.StatusNoContent, http.StatusNotModified} {
		w := serve(t, Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
		})), "GET", "gzip")
		if w.Code != status || w.Header().Get("Content-Encoding") != "" || w.Header().Get("Vary") != "" || w.Body.Len() != 0 {
			t.Errorf("%d: %d %v %q", status, w.Code, w.Header(), w.Body)
		}
	}
}

// A Vary the handler set is kept, and Accept-Encoding is not named twice.
func TestHandler_VaryIsAddedToOnce(t *testing.T) {
	for given, want := range map[string][]string{
		"Accept-Language":                  {"Accept-Language", "Accept-Encoding"},
		"accept-encoding":                  {"accept-encoding"},
		"Accept-Language, Accept-Encoding": {"Accept-Language, Accept-Encoding"},
		"*":                                {"*"},
	} {
		h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Vary", given)
			answer(200, "text/html", page, true).ServeHTTP(w, r)
		}))
		if got := serve(t, h, "GET", "gzip").Header().Values("Vary"); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Vary %q: %q, want %q", given, got, want)
		}
	}
}

// An answer written in small pieces, of unknown length, is held until it is known to be worth
// compressing; a short one goes out whole, with its length.
func TestHandler_PiecesOfUnknownLength(t *testing.T) {
	pieces := func(n int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			for range n {
				w.Write([]byte(`{"a":1},`))
			}
		})
	}
	w := serve(t, Handler(pieces(10)), "GET", "gzip")
	if w.Code != 200 || w.Header().Get("Content-Encoding") != "" || w.Header().Get("Content-Length") != "80" || w.Body.Len() != 80 {
		t.Errorf("80 bytes: %d %v %d", w.Code, w.Header(), w.Body.Len())
	}
	w = serve(t, Handler(pieces(1000)), "GET", "gzip")
	if got := gunzip(t, w.Body.Bytes()); w.Code != 200 || len(got) != 8000 || w.Header().Get("Content-Length") != "" {
		t.Errorf("8000 bytes: %d %v %d", w.Code, w.Header(), len(got))
	}
}

// Through a real connection: net/http gives a compressed answer that ends before its first flush
// its compressed length, and a client's gzip decoding gets the page back.
func TestHandler_OverHTTP(t *testing.T) {
	srv := httptest.NewServer(Handler(answer(200, "text/html; charset=utf-8", page, true)))
	defer srv.Close()
	raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := raw.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength != int64(len(body)) {
		t.Fatalf("%v, Content-Length %d for %d bytes", resp.Header, resp.ContentLength, len(body))
	}
	if !bytes.Equal(gunzip(t, body), page) {
		t.Fatal("the page did not survive")
	}
	// Go's client asks for gzip itself and decodes it, as browsers do.
	resp, err = http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !resp.Uncompressed || !bytes.Equal(body, page) {
		t.Fatalf("uncompressed %v, %d bytes", resp.Uncompressed, len(body))
	}
}

// A stream is not held back: what the handler flushed reaches the client before the handler ends,
// compressed or not (server-sent events are never compressed).
func TestHandler_FlushedWritesArriveAtOnce(t *testing.T) {
	for _, contentType := range []string{"text/event-stream", "text/plain"} {
		release := make(chan struct{})
		srv := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Write([]byte("data: first\n\n"))
			http.NewResponseController(w).Flush()
			<-release
			w.Write([]byte("data: second\n\n"))
		})))
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			if contentType == "text/event-stream" {
				t.Errorf("server-sent events were compressed")
			}
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		line := make(chan string, 1)
		go func() {
			s, _ := bufio.NewReader(r).ReadString('\n')
			line <- s
		}()
		select {
		case got := <-line:
			if got != "data: first\n" {
				t.Errorf("%s: first line %q", contentType, got)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the flushed event did not arrive", contentType)
		}
		close(release)
		resp.Body.Close()
		srv.Close()
	}
}

func TestWriteBody(t *testing.T) {
	write := func(method, accept string, body []byte) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/", nil)
		r.Header.Set("Accept-Encoding", accept)
		w := httptest.NewRecorder()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		WriteBody(w, r, 403, body)
		return w
	}
	w := write("GET", "gzip", page)
	if w.Code != 403 || w.Header().Get("Content-Encoding") != "gzip" || w.Header().Get("Vary") != "Accept-Encoding" ||
		w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) || !bytes.Equal(gunzip(t, w.Body.Bytes()), page) {
		t.Errorf("gzip: %d %v", w.Code, w.Header())
	}
	for _, c := range []struct {
		method, accept string
		body           []byte
	}{{"GET", "", page}, {"GET", "gzip;q=0", page}, {"HEAD", "gzip", page}, {"GET", "gzip", page[:100]}} {
		w := write(c.method, c.accept, c.body)
		if w.Header().Get("Content-Encoding") != "" || w.Header().Get("Content-Length") != strconv.Itoa(len(c.body)) ||
			!bytes.Equal(w.Body.Bytes(), c.body) {
			t.Errorf("%s %q %d bytes: %v", c.method, c.accept, len(c.body), w.Header())
		}
	}
	// Under Handler, compressed once.
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		WriteBody(w, r, 200, page)
	}))
	w = serve(t, h, "GET", "gzip")
	if got := gunzip(t, w.Body.Bytes()); !bytes.Equal(got, page) || len(w.Header().Values("Vary")) != 1 {
		t.Errorf("under Handler: %v", w.Header())
	}
}

func TestPrecompress(t *testing.T) {
	if got := Precompress(page, "text/css; charset=utf-8"); got == nil || !bytes.Equal(gunzip(t, got), page) {
		t.Error("a stylesheet was not compressed")
	}
	for _, c := range []struct {
		body []byte
		typ  string
	}{{page[:MinSize-1], "text/css"}, {page, "image/png"}, {bytes.Repeat([]byte{0}, 0), "text/css"}} {
		if Precompress(c.body, c.typ) != nil {
			t.Errorf("%d bytes of %s compressed", len(c.body), c.typ)
		}
	}
}

// BenchmarkHandler is the cost of the handler on an answer it leaves alone (a status poll's JSON,
// below MinSize) and on a page it compresses, beside the same handler unwrapped.
func BenchmarkHandler(b *testing.B) {
	poll := []byte(`{"success":true,"queue_status":"waiting","queue_position":4182,"serving_position":3977,"ahead":204,"estimated_wait_time":61}` + "\n")
	for _, c := range []struct {
		name string
		body []byte
		h    http.Handler
	}{
		{"poll/plain", poll, answer(200, "application/json", poll, true)},
		{"poll/wrapped", poll, Handler(answer(200, "application/json", poll, true))},
		{"page/plain", page, answer(200, "text/html", page, true)},
		{"page/wrapped", page, Handler(answer(200, "text/html", page, true))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
			w := &discard{header: http.Header{}}
			for b.Loop() {
				clear(w.header)
				w.n = 0
				c.h.ServeHTTP(w, r)
			}
			b.ReportMetric(float64(w.n), "bytes/op")
		})
	}
}

type discard struct {
	header http.Header
	n      int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
