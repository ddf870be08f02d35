package compression

import (
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// MinSize is the shortest body compressed: below about a kilobyte the gzip header and trailer (18
// bytes) and the CPU outweigh what is saved, and the answer fits in one packet either way. A status
// poll's JSON is well below it and is sent as it is.
const MinSize = 1024

// Level is the gzip level of answers compressed as they are made. On the waiting page (3 KB, 1.4 KB
// compressed) BestSpeed costs half the CPU of levels 5 to 9 for 5% more bytes: a page is made for
// every visitor who opens it, in the burst of a drop, and its few bytes more fit the same packets.
// The other levels also clear 640 KB of match tables on every reuse. Static assets, compressed once
// at start, use gzip.BestCompression (Precompress).
const Level = gzip.BestSpeed

// gzipWriters holds reset gzip writers at Level: a new one allocates hundreds of kilobytes of
// compression state, far more than the answers it compresses.
var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(io.Discard, Level)
	return gz
}}

// writers holds the response writers of Handler, with their buffers.
var writers = sync.Pool{New: func() any { return &writer{buf: make([]byte, 0, MinSize)} }}

// Handler compresses next's answers when the request accepts gzip (AcceptsGzip) and the answer is
// worth it: a compressible Content-Type, no Content-Encoding already (an answer compressed before,
// such as a precompressed asset or Prometheus's, is never compressed twice), a status with a body of
// its own (not 1xx, 204, 206 or 304), not HEAD, and at least MinSize bytes. Every answer that could be
// compressed says Vary: Accept-Encoding, whatever this request accepted, so a cache keeps the two
// apart. A compressed answer loses its Content-Length (net/http sets the compressed one when the answer
// ends before its first flush, and chunks it otherwise). An answer of unknown length is held until
// MinSize bytes arrive or the handler returns, so a short one still goes out whole with its length; a
// Flush sends what was written at once, compressed or not.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := writers.Get().(*writer)
		cw.ResponseWriter, cw.head, cw.acceptEncoding = w, r.Method == http.MethodHead, r.Header["Accept-Encoding"]
		defer cw.release()
		next.ServeHTTP(cw, r)
		cw.finish()
	})
}

// A writer's states: the answer's fate is decided with its final header.
const (
	undecided  = iota
	identity   // sent as it is
	holding    // compressible, length unknown: held in buf until MinSize or the end
	compressed // going out through gz
)

type writer struct {
	http.ResponseWriter
	// head: a HEAD request, whose headers are GET's but whose answer has no body to compress.
	head bool
	// acceptEncoding is the request's, read only for an answer worth compressing (most of edgeq's
	// answers, status polls among them, are short JSON of known length).
	acceptEncoding []string
	state          int
	status         int
	buf            []byte // a held answer
	gz             *gzip.Writer
}

func (w *writer) WriteHeader(status int) {
	switch {
	case w.state != undecided:
		w.ResponseWriter.WriteHeader(status) // superfluous: net/http logs it
	case status < http.StatusOK:
		w.ResponseWriter.WriteHeader(status) // informational (103 Early Hints): the real answer follows
	default:
		w.status = status
		w.decide()
	}
}

// decide settles the answer's fate from its final status and headers.
func (w *writer) decide() {
	h := w.ResponseWriter.Header()
	length, known := contentLength(h)
	if !worthIt(w.status, h, length, known) {
		w.state = identity
		w.ResponseWriter.WriteHeader(w.status)
		return
	}
	addVary(h) // on HEAD too: its headers are GET's
	switch {
	case w.head || !AcceptsGzip(w.acceptEncoding):
		w.state = identity
		w.ResponseWriter.WriteHeader(w.status)
	case known:
		w.start()
	default:
		w.state = holding
	}
}

// start sends the header of a compressed answer and readies gz.
func (w *writer) start() {
	h := w.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Set("Content-Encoding", "gzip")
	w.ResponseWriter.WriteHeader(w.status)
	w.gz = gzipWriters.Get().(*gzip.Writer)
	w.gz.Reset(w.ResponseWriter)
	w.state = compressed
}

func (w *writer) Write(p []byte) (int, error) {
	if w.state == undecided {
		w.WriteHeader(http.StatusOK)
	}
	switch w.state {
	case compressed:
		return w.gz.Write(p)
	case holding:
		if len(w.buf)+len(p) < MinSize {
			w.buf = append(w.buf, p...)
			return len(p), nil
		}
		w.start()
		if _, err := w.gz.Write(w.buf); err != nil {
			return 0, err
		}
		w.buf = w.buf[:0]
		return w.gz.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends what was written so far: a handler that flushes is streaming, and must not be held back.
func (w *writer) Flush() {
	if w.state == undecided {
		w.WriteHeader(http.StatusOK)
	}
	if w.state == holding {
		w.start()
		_, _ = w.gz.Write(w.buf) // a failure shows in the next write, as the client left
		w.buf = w.buf[:0]
	}
	if w.state == compressed {
		_ = w.gz.Flush()
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer (deadlines).
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish ends the answer once the handler has returned: a short held answer goes out as it is, with
// its length, and a compressed one gets its gzip trailer.
func (w *writer) finish() {
	switch w.state {
	case holding:
		h := w.ResponseWriter.Header()
		h.Set("Content-Length", strconv.Itoa(len(w.buf)))
		w.ResponseWriter.WriteHeader(w.status)
		_, _ = w.ResponseWriter.Write(w.buf)
	case compressed:
		_ = w.gz.Close()
	}
}

// release returns the writer, and its gzip writer, to their pools; deferred, so a handler's panic
// (http.ErrAbortHandler) does not leak them.
func (w *writer) release() {
	if w.gz != nil {
		w.gz.Reset(io.Discard)
		gzipWriters.Put(w.gz)
	}
	*w = writer{buf: w.buf[:0]}
	writers.Put(w)
}

// worthIt reports whether an answer would be compressed for a client that accepts gzip: a status
// whose body may be compressed (not 1xx, 204 and 304, which have none, nor 206, a range of the
// identity body the client asked for), nothing compressed already, a compressible type, and no
// Content-Length below MinSize.
func worthIt(status int, h http.Header, length int, known bool) bool {
	return status >= http.StatusOK && status != http.StatusNoContent && status != http.StatusNotModified &&
		status != http.StatusPartialContent && (!known || length >= MinSize) && first(h, "Content-Encoding") == "" &&
		compressible(first(h, "Content-Type"))
}

// first is h.Get(key) for a canonical key, without Get's canonicalisation: this runs on every answer.
func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// contentLength is the Content-Length a handler set, if any.
func contentLength(h http.Header) (int, bool) {
	v := first(h, "Content-Length")
	if v == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' || n > 1<<40 {
			return 0, false
		}
		n = n*10 + int(v[i]-'0')
	}
	return n, true
}

// addVary says the answer depends on Accept-Encoding, unless a Vary the handler set says so already.
func addVary(h http.Header) {
	for _, v := range h.Values("Vary") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name == "*" || strings.EqualFold(name, "Accept-Encoding") {
				return
			}
		}
	}
	h.Add("Vary", "Accept-Encoding")
}
