package admission

import (
	"strconv"
	"testing"
	"time"
)

// The settlement log keeps the last replayWindow in chunks: a chunk goes once its newest entry is out
// of the window (its memory is used again for the next), nothing in the window is lost, and
// remembering never copies the log.
func TestSettlementLog_KeepsTheWindowInChunks(t *testing.T) {
	s := &Service{}
	for i := range 3 * settledChunk {
		s.remember(nil, Claim{ID: strconv.Itoa(i)}, false)
	}
	l := &s.replay
	if len(l.chunks) != 3 || len(l.chunks[2]) != settledChunk {
		t.Fatalf("%d settlements in %d chunks, want 3 full ones", 3*settledChunk, len(l.chunks))
	}
	// The first two chunks age out of the window, all but the last entry of the third too.
	old := time.Now().Add(-replayWindow - time.Second)
	for _, chunk := range l.chunks[:2] {
		for i := range chunk {
			chunk[i].at = old
		}
	}
	third := l.chunks[2]
	for i := range third[:settledChunk-1] {
		third[i].at = old
	}
	reused := &l.chunks[1][:1][0] // the spare is the last chunk that went
	s.remember(nil, Claim{ID: "new"}, true)
	if len(l.chunks) != 2 {
		t.Fatalf("%d chunks after two went out of the window, want 2", len(l.chunks))
	}
	if last := l.chunks[0][settledChunk-1]; last.c.ID != strconv.Itoa(3*settledChunk-1) {
		t.Fatalf("the chunk whose newest entry is in the window went (its last entry %q)", last.c.ID)
	}
	if got := l.chunks[1]; len(got) != 1 || got[0].c.ID != "new" || !got[0].release {
		t.Fatalf("the new settlement: %+v", got)
	}
	if &l.chunks[1][:1][0] != reused {
		t.Fatal("the new chunk did not reuse the memory of one that went")
	}
	// A chunk holds settledChunk entries: the next ones fill it, then a new one starts.
	for i := range settledChunk {
		s.remember(nil, Claim{ID: "more-" + strconv.Itoa(i)}, false)
	}
	if len(l.chunks) != 3 || len(l.chunks[1]) != settledChunk || len(l.chunks[2]) != 1 {
		t.Fatalf("chunks of %d, %d, %d entries", len(l.chunks[0]), len(l.chunks[1]), len(l.chunks[len(l.chunks)-1]))
	}
}

// BenchmarkRemember: a settlement remembered by 16 goroutines at once, past the first window's worth
// (85,000 a second for 10 s would be a hot product's whole sale on one replica).
func BenchmarkRemember(b *testing.B) {
	s := &Service{}
	c := Claim{Owner: "p", User: "u", ID: "id", Value: 1, Route: "r"}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.remember(nil, c, false)
		}
	})
}
