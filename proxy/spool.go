package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/inflight"
)

// A max_in_flight slot bounds what the shop works on at once, not how fast visitors read
// (docs/reference.md "In-flight limits"): it is given back as soon as edgeq has the shop's whole
// answer, not when the visitor has taken it. The in-flight stage puts the request's slot in its
// context; modifyResponse, which sees the answer's headers, hands it to spoolAnswer, which decides when
// the slot is free:
//
//   - a streamed answer (101 Switching Protocols, text/event-stream, no Content-Length) at its headers:
//     the shop may go on sending for as long as it likes, and nothing can be held for it;
//   - an answer with nothing after its headers (HEAD, 204, 304, Content-Length: 0) at once;
//   - an answer of at most server.spool_bytes once it has been read from the shop into memory: the
//     visitor is then served from there, at its own pace, bounded by server.write_timeout;
//   - a longer one (or one that does not fit the replica's spool budget) when the copy to the visitor
//     ends: the visitor reads it from the shop, and write_timeout cuts one that takes nothing.
//
// Memory is bounded twice: one answer holds at most spool_bytes, in pooled chunks given back as the
// visitor takes them, and a replica holds at most spoolBudgetAnswers × spool_bytes in all, whatever
// the number of slow readers. Nothing is written to disk (the Kubernetes manifest's root file system
// is read-only). Routes without max_in_flight never spool: their answers stream through as before.

// spoolBudgetAnswers is how many answers of spool_bytes a replica may hold at once: 128 MiB at the
// default 8 MiB, well inside the Kubernetes manifest's GOMEMLIMIT of 450 MiB. Past it an answer keeps
// its slot while it is copied, as a longer one does: many slow readers at once cost the route its
// throughput for up to write_timeout, never the replica its memory.
const spoolBudgetAnswers = 16

// spooler holds answers of max_in_flight routes for visitors who have not taken them yet.
type spooler struct {
	limit  int64        // server.spool_bytes: the longest answer held
	budget int64        // the most held at once, in chunk bytes
	held   atomic.Int64 // chunk bytes held now
	chunks *bufferPool  // shared with the proxy's copy buffers
}

func newSpooler(limit int64, chunks *bufferPool) *spooler {
	return &spooler{limit: limit, budget: spoolBudgetAnswers * chunkBytes(limit), chunks: chunks}
}

// chunkBytes is what an answer of n bytes takes in whole chunks.
func chunkBytes(n int64) int64 {
	return (n + copyBufferSize - 1) / copyBufferSize * copyBufferSize
}

// slot is a request's in-flight slot, given back once: when the shop's answer is in (spoolAnswer) or
// when the request ends, whichever comes first; a second release waits for the first to be done.
type slot struct {
	lease *inflight.Lease
	gauge prometheus.Gauge // edgeq_route_in_flight{route}
	once  sync.Once
}

func (s *slot) release() {
	s.once.Do(func() {
		s.lease.Release()
		s.gauge.Dec()
	})
}

type slotKey struct{}

// withSlot returns r on a context that carries its slot to modifyResponse.
func withSlot(r *http.Request, s *slot) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), slotKey{}, s))
}

func slotFrom(ctx context.Context) *slot {
	s, _ := ctx.Value(slotKey{}).(*slot)
	return s
}

// spoolAnswer frees the slot of an answer as early as the answer allows (see above), reading an answer
// of at most spool_bytes into memory first. A shop that breaks off in the middle of such an answer is
// not an error here: the visitor gets what came and then the same broken-off answer it would have got
// without spooling (the body's error), and the request's outcome stays the shop's status.
//
// The slot goes back to the store on a goroutine of its own: the visitor's answer does not wait for
// that round trip (nor, while the store is slow, for its timeout). The in-flight stage's own release,
// when the request ends, waits for it.
func (p *Proxy) spoolAnswer(resp *http.Response, s *slot) {
	switch p.spool.freeAt(resp) {
	case atHeaders:
		go s.release()
	case whenHeld:
		if body := p.spool.hold(resp.Body, resp.ContentLength); body != nil {
			resp.Body = body
			go s.release()
		}
		// nil: the replica's budget is spent; the slot is kept while the visitor reads.
	case whenCopied:
	}
}

// When an answer's slot is free.
type slotFree int

const (
	atHeaders  slotFree = iota // a stream, or nothing after the headers
	whenHeld                   // once the answer is in memory (up to spool_bytes)
	whenCopied                 // once the visitor has it: longer than spool_bytes
)

func (sp *spooler) freeAt(resp *http.Response) slotFree {
	switch {
	case streamed(resp), resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0:
		return atHeaders
	case resp.ContentLength <= sp.limit:
		return whenHeld
	}
	return whenCopied
}

// streamed reports whether an answer is a stream whose end edgeq cannot wait for: an upgrade, server-
// sent events, or an answer of no announced length.
func streamed(resp *http.Response) bool {
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.ContentLength < 0 {
		return true
	}
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mediaType), "text/event-stream")
}

// hold reads body, of length n (<= limit), into pooled chunks and returns it as a body that serves
// them, giving each chunk back once read; nil, with body untouched, when n does not fit the budget.
func (sp *spooler) hold(body io.ReadCloser, n int64) *spooled {
	reserve := chunkBytes(n)
	if sp.held.Add(reserve) > sp.budget {
		sp.held.Add(-reserve)
		return nil
	}
	s := &spooled{sp: sp, chunks: make([][]byte, 0, reserve/copyBufferSize)}
	for left := n; left > 0; {
		chunk := sp.chunks.Get()
		k, err := io.ReadFull(body, chunk[:min(left, copyBufferSize)])
		if k > 0 {
			s.chunks = append(s.chunks, chunk[:k])
		} else {
			sp.chunks.Put(chunk)
		}
		left -= int64(k)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // fewer bytes than the shop's Content-Length
			}
			s.err = err
			break
		}
	}
	if s.err == nil {
		// Read to its end, so that the shop's connection goes back to the pool: a body of known length
		// says io.EOF here without reading the connection.
		var probe [1]byte
		_, _ = body.Read(probe[:])
	}
	_ = body.Close()
	// The share of the budget of chunks an answer that broke off never filled.
	sp.held.Add(-(reserve - int64(len(s.chunks))*copyBufferSize))
	return s
}

// spooled is an answer held in memory, read by the proxy's copy to the visitor. Each chunk (and its
// share of the budget) is given back as soon as it has been read; Close gives back the rest.
type spooled struct {
	sp     *spooler
	chunks [][]byte // what the visitor has not taken yet; chunks[0] partly read
	read   int      // bytes of chunks[0] already read
	err    error    // how the shop's answer ended early, after the chunks; nil: whole
	closed bool
}

func (s *spooled) Read(p []byte) (int, error) {
	if s.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if len(s.chunks) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0][s.read:])
	s.read += n
	if s.read == len(s.chunks[0]) {
		s.giveBack(s.chunks[0])
		s.chunks[0] = nil
		s.chunks, s.read = s.chunks[1:], 0
	}
	return n, nil
}

func (s *spooled) Close() error {
	if !s.closed {
		s.closed = true
		for _, chunk := range s.chunks {
			s.giveBack(chunk)
		}
		s.chunks = nil
	}
	return nil
}

func (s *spooled) giveBack(chunk []byte) {
	s.sp.chunks.Put(chunk[:copyBufferSize])
	s.sp.held.Add(-copyBufferSize)
}
