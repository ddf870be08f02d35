package proxy

import (
	"bufio"
	"net"
	"net/http"
	"time"

	"github.com/edgeq/edgeq/internal/web"
)

// recorder notes the final status and body size of a response for the access log and metrics. It keeps
// every capability of the underlying writer: Flush for streaming, Hijack (through Unwrap and
// http.ResponseController) for Upgrade.
//
// It is also where an answer that carries a credential edgeq added is made uncacheable (info's
// CredentialAdded): whether the shop's answer or edgeq's own (a redirect, an endpoint), its headers
// pass here last.
type recorder struct {
	http.ResponseWriter
	info   *web.Request
	status int
	bytes  int64
	// writeTimeout is server.write_timeout, and deadline the last write deadline set with it
	// (writetimeout.go).
	writeTimeout time.Duration
	deadline     time.Time
	// visitors, when set, gives the client a new visitor id with the final header: it came without
	// one (visitor.go).
	visitors *Visitors
}

func (r *recorder) WriteHeader(code int) {
	// 1xx answers other than 101 are informational and may precede the real one.
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
		r.final()
	} else if code < 200 {
		r.renewDeadline() // an informational answer goes out at once
	}
	r.ResponseWriter.WriteHeader(code)
}

// final runs once, before the final header is written.
func (r *recorder) final() {
	if r.status == http.StatusSwitchingProtocols {
		return // the connection is the client's and the shop's from here
	}
	if r.visitors != nil {
		r.visitors.issue(r.ResponseWriter.Header(), r.info)
	}
	if r.info != nil && r.info.CredentialAdded {
		uncacheable(r.ResponseWriter.Header())
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
		r.final()
	}
	n, err := r.write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush lets handlers that test for http.Flusher stream through the recorder.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
		r.final()
	}
	r.renewDeadline()
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack hands the connection over (Upgrade); the status is then 101 as far as edgeq is concerned.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
