package ids

import (
	"sync"
	"testing"
	"time"
)

func TestNext_UniqueAndOrderedUnderConcurrency(t *testing.T) {
	g := New(7)
	const workers, each = 8, 20000
	results := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				results[w] = append(results[w], g.Next())
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, r := range results {
		for i, id := range r {
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
			if i > 0 && id <= r[i-1] {
				t.Fatalf("ids of one caller went down: %d after %d", id, r[i-1])
			}
			if id>>seqBits&maxNode != 7 {
				t.Fatalf("node bits of %d", id)
			}
		}
	}
}

func TestNext_ClockBackwardsNeverRepeats(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	g := New(1)
	g.now = func() time.Time { return now }
	a := g.Next()
	now = now.Add(-time.Second)
	b := g.Next()
	if b <= a {
		t.Fatalf("after the clock stepped back: %d <= %d", b, a)
	}
	if got := Time(a); !got.Equal(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("Time = %s", got)
	}
}

func TestNodesDiffer(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := New(1), New(2)
	a.now = func() time.Time { return now }
	b.now = a.now
	if a.Next() == b.Next() {
		t.Fatal("two nodes made the same id in the same millisecond")
	}
}

func TestNodeOf_NamesTheGeneratorsNode(t *testing.T) {
	for _, node := range []int64{0, 7, 1023} {
		g := New(node)
		if got := NodeOf(g.Next()); got != node || g.Node() != node {
			t.Fatalf("node %d: NodeOf %d, Node %d", node, got, g.Node())
		}
	}
}
