package compression

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"sync"
)

// buffers hold the compressed copies WriteBody sends.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// WriteBody answers with a body made whole in memory (a rendered page), compressed by the rules of
// Handler, and with its exact Content-Length either way. The caller has set every other header. Under
// Handler the answer passes it as it is: it says Content-Encoding already, or is sent the same way.
func WriteBody(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	if !worthIt(status, h, len(body), true) {
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	addVary(h)
	if r.Method == http.MethodHead || !AcceptsGzip(r.Header["Accept-Encoding"]) {
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	buf := buffers.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); buffers.Put(buf) }()
	gz := gzipWriters.Get().(*gzip.Writer)
	gz.Reset(buf)
	_, _ = gz.Write(body) // writes to a bytes.Buffer do not fail
	_ = gz.Close()
	gzipWriters.Put(gz)
	h.Set("Content-Encoding", "gzip")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// Precompress returns body compressed at gzip.BestCompression, for a file served many times from
// memory (static assets: their slower compression is paid once, at start); nil when it is not worth
// it: a type that is not compressible, a body shorter than MinSize, or no smaller compressed.
func Precompress(body []byte, contentType string) []byte {
	if len(body) < MinSize || !compressible(contentType) {
		return nil
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = gz.Write(body)
	_ = gz.Close()
	if buf.Len() >= len(body) {
		return nil
	}
	return buf.Bytes()
}

// Negotiated reports whether the answer to r may be a precompressed body (Precompress): the client
// accepts gzip, and asked for the whole body of a GET (a Range is served from the identity body,
// whose byte offsets the client means). The caller sends Vary: Accept-Encoding (AddVary) either way.
func Negotiated(r *http.Request) bool {
	return r.Method == http.MethodGet && len(r.Header["Range"]) == 0 && AcceptsGzip(r.Header["Accept-Encoding"])
}

// AddVary says an answer depends on Accept-Encoding, unless its Vary says so already.
func AddVary(h http.Header) { addVary(h) }
