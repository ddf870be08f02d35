package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/inflight"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// answerBytes is a deterministic answer of n bytes, different at every offset of a chunk.
func answerBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Answers of a max_in_flight route reach the visitor byte for byte, whether held in memory (up to
// spool_bytes, across chunk boundaries) or copied from the shop (longer), and every slot is free
// afterwards.
func TestSpool_AnswersArriveWholeWhateverTheirSize(t *testing.T) {
	const limit = 100 << 10
	limiter := inflight.New(inflight.Options{Store: storetest.Embedded(t), Poll: 20 * time.Millisecond})
	rg := newRig(t, rigOptions{
		inflight: limiter, spoolBytes: limit, writeTimeout: 5 * time.Second,
		routes: []config.Route{{Name: "bytes", Match: "/bytes", MaxInFlight: 1, Hold: 5 * time.Second}},
		originHandler: func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Length", strconv.Itoa(n))
			w.Write(answerBytes(n))
		},
	})
	for _, n := range []int{0, 1, copyBufferSize - 1, copyBufferSize, copyBufferSize + 1, limit, limit + 1, 3 * limit} {
		for _, method := range []string{"GET", "HEAD"} {
			req, _ := http.NewRequest(method, rg.server.URL+"/bytes?n="+strconv.Itoa(n), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := answerBytes(n)
			if method == "HEAD" {
				want = nil
			}
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, want) || resp.ContentLength != int64(n) {
				t.Fatalf("%s %d bytes: %d, Content-Length %d, %d bytes read (%v), equal %v",
					method, n, resp.StatusCode, resp.ContentLength, len(got), err, bytes.Equal(got, want))
			}
		}
	}
	if now := testutil.ToFloat64(rg.metrics.RouteInFlight.WithLabelValues("bytes")); now != 0 {
		t.Fatalf("edgeq_route_in_flight = %v after every answer", now)
	}
	if held := rg.proxy.spool.held.Load(); held != 0 {
		t.Fatalf("%d bytes still counted as held", held)
	}
}

// The slot of an answer is free at its headers (streams, empty answers), once it is held (up to
// spool_bytes), or once it is copied (longer; any answer when spool_bytes is 0).
func TestSpooler_WhenTheSlotIsFree(t *testing.T) {
	body := io.NopCloser(strings.NewReader("x"))
	answer := func(status int, length int64, contentType string, b io.ReadCloser) *http.Response {
		return &http.Response{StatusCode: status, ContentLength: length, Header: http.Header{"Content-Type": {contentType}}, Body: b}
	}
	for _, tc := range []struct {
		name  string
		resp  *http.Response
		limit int64
		want  slotFree
	}{
		{"upgrade", answer(101, 0, "", body), 1024, atHeaders},
		{"server-sent events", answer(200, -1, "text/event-stream", body), 1024, atHeaders},
		{"server-sent events of a length", answer(200, 10, "Text/Event-Stream; charset=utf-8", body), 1024, atHeaders},
		{"no length (chunked)", answer(200, -1, "text/html", body), 1024, atHeaders},
		{"HEAD", answer(200, 4096, "text/html", http.NoBody), 1024, atHeaders},
		{"empty", answer(204, 0, "", http.NoBody), 1024, atHeaders},
		{"up to spool_bytes", answer(200, 1024, "application/json", body), 1024, whenHeld},
		{"longer", answer(200, 1025, "application/json", body), 1024, whenCopied},
		{"spool_bytes 0", answer(200, 1, "application/json", body), 0, whenCopied},
	} {
		if got := newSpooler(tc.limit, NewBufferPool()).freeAt(tc.resp); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A replica holds at most spoolBudgetAnswers × spool_bytes: past it an answer is not held (its body is
// left to be copied from the shop). What a visitor has taken is given back chunk by chunk, the rest on
// Close.
func TestSpooler_TheBudgetBoundsWhatIsHeld(t *testing.T) {
	const limit = 2 * copyBufferSize
	sp := newSpooler(limit, NewBufferPool())
	var held []*spooled
	for range spoolBudgetAnswers {
		s := sp.hold(io.NopCloser(bytes.NewReader(answerBytes(limit))), limit)
		if s == nil {
			t.Fatalf("answer %d of %d not held", len(held)+1, spoolBudgetAnswers)
		}
		held = append(held, s)
	}
	if got := sp.held.Load(); got != spoolBudgetAnswers*limit {
		t.Fatalf("held %d, want %d", got, spoolBudgetAnswers*limit)
	}
	over := io.NopCloser(bytes.NewReader(answerBytes(1)))
	if s := sp.hold(over, 1); s != nil {
		t.Fatal("an answer past the budget was held")
	}
	if b, _ := io.ReadAll(over); len(b) != 1 {
		t.Fatalf("the body of the answer not held was read: %d bytes left", len(b))
	}
	first := make([]byte, copyBufferSize)
	if _, err := io.ReadFull(held[0], first); err != nil {
		t.Fatal(err)
	}
	if got := sp.held.Load(); got != spoolBudgetAnswers*limit-copyBufferSize {
		t.Fatalf("after one chunk was taken: held %d", got)
	}
	for _, s := range held {
		s.Close()
	}
	if got := sp.held.Load(); got != 0 {
		t.Fatalf("after every answer closed: held %d", got)
	}
	if _, err := held[0].Read(first); !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Fatalf("read after close: %v", err)
	}
}

type brokenBody struct {
	io.Reader
	closed bool
}

func (b *brokenBody) Close() error { b.closed = true; return nil }

// A shop that breaks off in the middle of an answer edgeq holds: the visitor gets what came, then the
// error, as it would without spooling; the shop's connection is closed and nothing stays counted.
func TestSpooler_AnAnswerThatBreaksOffEndsWithTheShopsError(t *testing.T) {
	reset := errors.New("connection reset by peer")
	for name, tc := range map[string]struct {
		body io.Reader
		want error
	}{
		"reset":              {io.MultiReader(bytes.NewReader(answerBytes(40<<10)), iotestErr(reset)), reset},
		"shorter than said":  {bytes.NewReader(answerBytes(40 << 10)), io.ErrUnexpectedEOF},
		"the visitor leaves": {io.MultiReader(bytes.NewReader(answerBytes(40<<10)), iotestErr(context.Canceled)), context.Canceled},
	} {
		sp := newSpooler(1<<20, NewBufferPool())
		body := &brokenBody{Reader: tc.body}
		s := sp.hold(body, 100<<10)
		if s == nil || !body.closed {
			t.Fatalf("%s: held %v, shop's body closed %v", name, s != nil, body.closed)
		}
		got, err := io.ReadAll(s)
		if !errors.Is(err, tc.want) || !bytes.Equal(got, answerBytes(40<<10)) {
			t.Errorf("%s: %d bytes, %v; want the 40 KiB that came, then %v", name, len(got), err, tc.want)
		}
		s.Close()
		if held := sp.held.Load(); held != 0 {
			t.Errorf("%s: %d bytes still counted", name, held)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func iotestErr(err error) io.Reader { return errReader{err} }

// deadlineWriter records the write deadlines set on it and the size of each write.
type deadlineWriter struct {
	httptest.ResponseRecorder
	deadlines []time.Time
	writes    []int
}

func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.writes = append(d.writes, len(b))
	return len(b), nil
}

// write_timeout: each piece of a write (at most writePiece bytes) gets a deadline of its own, write_timeout
// ahead; after the handler, what net/http still writes gets one unless a recent write set it.
func TestRecorder_EachPieceOfAWriteGetsItsOwnDeadline(t *testing.T) {
	w := &deadlineWriter{}
	rec := &recorder{ResponseWriter: w, writeTimeout: 10 * time.Second}
	began := time.Now()
	if n, err := rec.Write(make([]byte, 3*writePiece+100)); n != 3*writePiece+100 || err != nil {
		t.Fatalf("wrote %d, %v", n, err)
	}
	if want := []int{writePiece, writePiece, writePiece, 100}; !slices.Equal(w.writes, want) || len(w.deadlines) != 4 {
		t.Fatalf("writes %v with %d deadlines, want %v with 4", w.writes, len(w.deadlines), want)
	}
	for _, d := range w.deadlines {
		if d.Before(began.Add(10*time.Second)) || d.After(time.Now().Add(10*time.Second)) {
			t.Fatalf("deadline %v, want write_timeout after the write began", d.Sub(began))
		}
	}
	rec.finishDeadline()
	if len(w.deadlines) != 4 {
		t.Fatal("finishDeadline renewed a deadline set just now")
	}
	rec.deadline = time.Now().Add(time.Second) // the last write was 9 s ago (a quiet stream)
	rec.finishDeadline()
	if len(w.deadlines) != 5 {
		t.Fatal("finishDeadline kept a deadline about to pass")
	}

	quiet := &deadlineWriter{}
	rec = &recorder{ResponseWriter: quiet, writeTimeout: 10 * time.Second}
	rec.WriteHeader(http.StatusNoContent)
	rec.finishDeadline()
	if len(quiet.deadlines) != 1 {
		t.Fatalf("an answer with no write: %d deadlines, want 1 for net/http's own", len(quiet.deadlines))
	}

	off := &deadlineWriter{}
	rec = &recorder{ResponseWriter: off}
	rec.Write(make([]byte, 3*writePiece))
	rec.Flush()
	rec.finishDeadline()
	if len(off.deadlines) != 0 || !slices.Equal(off.writes, []int{3 * writePiece}) {
		t.Fatalf("without write_timeout: %d deadlines, writes %v", len(off.deadlines), off.writes)
	}
}

// uncacheable deletes the shared-cache headers by their map keys: each must be written canonically,
// or it would silently stay.
func TestSharedCacheHeaders_AreCanonical(t *testing.T) {
	for _, name := range sharedCacheHeaders {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q): uncacheable would not drop it", name, c)
		}
	}
	h := http.Header{}
	h.Set("CDN-Cache-Control", "max-age=600")
	h.Set("Cloudflare-CDN-Cache-Control", "max-age=600")
	h.Set("Cache-Control", "public, s-maxage=600")
	uncacheable(h)
	if len(h) != 1 || h.Get("Cache-Control") != "private, no-store" {
		t.Errorf("after uncacheable: %v", h)
	}
}
