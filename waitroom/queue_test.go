package waitroom

import (
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// A snapshot the store answered earlier never replaces one it answered later (a tick and a refresh
// race to store what they read); within another epoch, or when the store's clock stepped back by more
// than a second (a failover to another machine), the new one is stored.
func TestSnapshot_AnEarlierReadNeverReplacesALaterOne(t *testing.T) {
	q := &queue{id: "q"}
	later := &snapshot{Epoch: "e", Serving: 5, readAt: 2_000_000}
	earlier := &snapshot{Epoch: "e", Serving: 4, readAt: 1_999_990}
	if got := q.newer(later); got != later {
		t.Fatal("the first snapshot did not stand")
	}
	if got := q.newer(earlier); got != later || q.snap.Load() != later {
		t.Fatalf("a read 10 µs earlier replaced the later one: serving %d", q.snap.Load().Serving)
	}
	same := &snapshot{Epoch: "e", Serving: 5, readAt: 2_000_000}
	if got := q.newer(same); got != same {
		t.Fatal("a read at the same instant did not stand")
	}
	stepped := &snapshot{Epoch: "e", Serving: 6, readAt: 0} // 2 s before the standing one
	if got := q.newer(stepped); got != stepped {
		t.Fatal("after the store's clock stepped back 2 s, the new snapshot did not stand")
	}
	other := &snapshot{Epoch: "f", Serving: 0, readAt: 1}
	if got := q.newer(other); got != other {
		t.Fatal("a snapshot of a new epoch did not stand")
	}
}

// Under real concurrency — the replica's 1 ms tick beside admin increments that each refresh the
// snapshot — the serving position a replica shows never goes back.
func TestSnapshot_TheServingPositionShownNeverGoesBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := buildHarness(t, s, []config.Queue{testQueue("q", 0)}, nil)
		h.tick = time.Millisecond
		rp := h.addReplica()
		h.joinAll("q", 40, 1)
		var done atomic.Bool
		var back atomic.Int64
		var watching sync.WaitGroup
		watching.Go(func() {
			last := int64(0)
			for !done.Load() {
				if sn := rp.room.tracked("q").snap.Load(); sn != nil {
					if sn.Serving < last {
						back.Add(1)
					}
					last = max(last, sn.Serving)
				}
			}
		})
		for i := 1; i <= 30; i++ {
			if a := h.adminForm(rp, "/api/queue/increment_serving_position", url.Values{"queue_id": {"q"}, "increment_by": {"1"}}); a.status != 200 {
				t.Fatalf("increment %d: %d %s", i, a.status, a.body)
			}
			if got := rp.room.tracked("q").snap.Load().Serving; got < int64(i) {
				t.Fatalf("after increment %d the snapshot serves %d", i, got)
			}
		}
		done.Store(true)
		watching.Wait()
		if n := back.Load(); n != 0 {
			t.Fatalf("the serving position shown went back %d times", n)
		}
	})
}
