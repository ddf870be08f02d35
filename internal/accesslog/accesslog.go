// Package accesslog writes the proxy's access-log line — one per request — exactly as log/slog's JSON
// or text handler writes the same record, for a fraction of the cost.
//
// Through slog, the line took about a tenth of the CPU of edgeq's handler on a gated GET (records of eight
// attributes spill to the heap, the caller's program counter is captured, every value goes through
// the generic encoder and the float through encoding/json). Handler is slog's own handler for every
// record, and Write formats the access line directly when every string in it is plain ASCII (no
// quoting or escaping needed in either format); any other line goes through slog as before, so the
// output is slog's in every case (FuzzSameAsSlog holds the two to byte equality).
package accesslog

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
)

// Handler is slog's JSON or text handler writing to w, with Write for the access-log line.
type Handler struct {
	slog.Handler
	out  *lockedWriter
	json bool
}

// NewHandler returns a handler writing to w in format ("json" or "text") at level.
func NewHandler(w io.Writer, format string, level slog.Leveler) *Handler {
	out := &lockedWriter{w: w}
	opts := &slog.HandlerOptions{Level: level}
	h := &Handler{out: out, json: format != "text"}
	if h.json {
		h.Handler = slog.NewJSONHandler(out, opts)
	} else {
		h.Handler = slog.NewTextHandler(out, opts)
	}
	return h
}

// lockedWriter serialises the writes of slog's handler and of Write, so lines never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Line is one access-log line: the message "request" at level info and these attributes, in this order.
type Line struct {
	Time          time.Time
	CorrelationID string
	Method        string
	Path          string
	Route         string
	Status        int
	Bytes         int64
	DurationMS    float64
	ClientIP      netip.Addr
	// TraceID is the request's trace id while it is traced and sampled; the line has no trace_id
	// without one.
	TraceID string
}

// Record is l as a slog record, for a logger whose handler is not a Handler or a line Write declines.
func (l *Line) Record() slog.Record {
	r := slog.NewRecord(l.Time, slog.LevelInfo, Message, 0)
	r.AddAttrs(
		slog.String("correlation_id", l.CorrelationID),
		slog.String("method", l.Method),
		slog.String("path", l.Path),
		slog.String("route", l.Route),
		slog.Int("status", l.Status),
		slog.Int64("bytes", l.Bytes),
		slog.Float64("duration_ms", l.DurationMS),
		slog.String("client_ip", l.ClientIP.String()),
	)
	if l.TraceID != "" {
		r.AddAttrs(slog.String("trace_id", l.TraceID))
	}
	return r
}

// Log writes l at level info through logger: with Write when logger's handler is a Handler and l is
// plain, through the handler's Handle otherwise. The caller checks that info is enabled.
func Log(ctx context.Context, logger *slog.Logger, l *Line) {
	h := logger.Handler()
	if fast, ok := h.(*Handler); ok && fast.Write(l) {
		return
	}
	_ = h.Handle(ctx, l.Record()) // as slog.Logger does: a log line has no one to report to
}

// Message is the access line's message.
const Message = "request"

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Write writes l and reports true, or writes nothing and reports false when a value of l would need
// quoting or escaping (then log l through slog: l.Record). The caller checks that info is enabled.
func (h *Handler) Write(l *Line) bool {
	if y := l.Time.Year(); l.Time.IsZero() || y < 0 || y > 9999 || l.DurationMS < 0 || l.DurationMS >= 1e21 ||
		(l.DurationMS != 0 && l.DurationMS < 1e-6) || math.IsNaN(l.DurationMS) {
		return false
	}
	p := buffers.Get().(*[]byte)
	defer buffers.Put(p)
	b, ok := h.appendLine((*p)[:0], l)
	*p = b[:0]
	if !ok {
		return false
	}
	_, _ = h.out.Write(b)
	return true
}

func (h *Handler) appendLine(b []byte, l *Line) ([]byte, bool) {
	ok := true
	str := func(key, value string) {
		b = h.key(b, key)
		if h.json {
			b = append(b, '"')
		}
		start := len(b)
		b = append(b, value...)
		ok = ok && plain(b[start:])
		if h.json {
			b = append(b, '"')
		}
	}
	if h.json {
		b = append(b, `{"time":"`...)
		b = l.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","level":"INFO","msg":"`+Message+`"`...)
	} else {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, l.Time)
		b = append(b, " level=INFO msg="+Message...)
	}
	str("correlation_id", l.CorrelationID)
	str("method", l.Method)
	str("path", l.Path)
	str("route", l.Route)
	b = strconv.AppendInt(h.key(b, "status"), int64(l.Status), 10)
	b = strconv.AppendInt(h.key(b, "bytes"), l.Bytes, 10)
	b = h.key(b, "duration_ms")
	if h.json {
		// encoding/json's form of a float in [1e-6, 1e21) and of 0, which slog's JSON handler uses.
		b = strconv.AppendFloat(b, l.DurationMS, 'f', -1, 64)
	} else {
		b = strconv.AppendFloat(b, l.DurationMS, 'g', -1, 64)
	}
	b = h.key(b, "client_ip")
	if h.json {
		b = append(b, '"')
	}
	start := len(b)
	b = l.ClientIP.AppendTo(b)
	ok = ok && plain(b[start:]) // the zero Addr is "invalid IP": not plain, slog writes it
	if h.json {
		b = append(b, '"')
	}
	if l.TraceID != "" {
		str("trace_id", l.TraceID)
	}
	if h.json {
		b = append(b, '}')
	}
	return append(b, '\n'), ok
}

// key appends the separator before an attribute and its key.
func (h *Handler) key(b []byte, key string) []byte {
	if h.json {
		b = append(b, ',', '"')
		b = append(b, key...)
		return append(b, '"', ':')
	}
	b = append(b, ' ')
	b = append(b, key...)
	return append(b, '=')
}

// plain says whether s needs neither JSON escaping nor text-format quoting: not empty, and only
// printable ASCII other than space, '"', '\\' and '='.
func plain(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '=' {
			return false
		}
	}
	return true
}

// appendRFC3339Millis is the text handler's time: RFC 3339 with exactly three digits of fraction.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	return t.AppendFormat(b, vocab.MilliTime)
}
