package proxy

import "time"

// server.write_timeout (docs/reference.md "Proxying"): a client that takes nothing of an answer for
// this long is cut off. http.Server's WriteTimeout cannot say that: it bounds the whole answer, and
// would cut every stream, long poll and large download that takes longer. Here each write of an answer
// gets its own deadline, renewed as the answer goes out: a write that the client's connection does not
// take within write_timeout fails, net/http closes the connection, and the handler's copy ends (an
// in-flight slot or spooled answer is given back with it). A client that reads, however slowly, and a
// stream that is quiet between its writes are not cut: the clock only runs while a write waits for the
// client.
//
// Writes are cut into pieces of at most writePiece bytes, each with a fresh deadline, so that "takes
// nothing" means "took less than a piece in write_timeout" whatever the size of one Write (a rendered
// page, a static file handed over whole): 32 KiB in 30 s by default, about 1 KiB/s. The proxy's own
// copies write at most this much at a time, so they are never cut into more writes. After the handler,
// net/http writes what is still buffered (the end of a chunked answer): finishDeadline gives that a
// fresh deadline too, and net/http clears it once the answer is done.
//
// An upgraded connection (101, a WebSocket) is the client's and the shop's once hijacked: net/http
// clears its deadlines then, and write_timeout does not apply to it.

// writePiece is the most written with one deadline: the size of the proxy's copy buffers.
const writePiece = copyBufferSize

// writeDeadliner is a ResponseWriter with per-write deadlines: net/http's HTTP/1 and HTTP/2 writers.
type writeDeadliner interface {
	SetWriteDeadline(time.Time) error
}

// write writes b, piece by piece, each with write_timeout to go out.
func (r *recorder) write(b []byte) (int, error) {
	if r.writeTimeout <= 0 || len(b) <= writePiece {
		r.renewDeadline()
		return r.ResponseWriter.Write(b)
	}
	written := 0
	for written < len(b) {
		r.renewDeadline()
		n, err := r.ResponseWriter.Write(b[written:min(len(b), written+writePiece)])
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// renewDeadline gives the next write to the client write_timeout from now.
func (r *recorder) renewDeadline() {
	if r.writeTimeout <= 0 {
		return
	}
	if d, ok := r.ResponseWriter.(writeDeadliner); ok {
		r.deadline = time.Now().Add(r.writeTimeout)
		// An error means a writer whose connection is gone or hijacked: its next write fails anyway.
		_ = d.SetWriteDeadline(r.deadline)
	}
}

// finishDeadline runs when the handler returns: what net/http writes after it (the buffered rest of
// the answer, the end of a chunked one) gets write_timeout too, unless a write of this answer set a
// deadline recently enough. (A hijacked connection is closed by then: the proxy's upgrade copy ends
// before its handler does.)
func (r *recorder) finishDeadline() {
	if r.writeTimeout <= 0 {
		return
	}
	if r.deadline.IsZero() || time.Until(r.deadline) < r.writeTimeout/2 {
		r.renewDeadline()
	}
}
