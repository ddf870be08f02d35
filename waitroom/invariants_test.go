package waitroom

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// The waiting room's invariants under real concurrency, with three replicas ticking the same queue:
// served-and-unfinished never exceeds capacity, the serving position never decreases, and no token is
// ever issued to a position above it.
func TestInvariants_ThreeReplicasUnderConcurrency(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		const capacity, visitors = 5, 150
		h := newHarness(t, s, []config.Queue{testQueue("drop", capacity)}, nil)
		replicas := []*replica{h.replicas[0], h.addReplica(), h.addReplica()}
		ctx := context.Background()
		keys := queueKeys(s.Keys, "drop")

		ids := make([]string, visitors)
		var wg sync.WaitGroup
		for i := range visitors {
			wg.Go(func() {
				ids[i] = str(h.visitor(replicas[i%3]).assign("drop").json["request_id"])
			})
		}
		wg.Wait()

		// A watcher samples the store while visitors claim tokens and complete on random replicas.
		stop := make(chan struct{})
		var violations atomic.Int64
		var lastServing atomic.Int64
		watcher := sync.WaitGroup{}
		watcher.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				active, err := s.Client.ZCard(ctx, keys[3]).Result()
				serving, err2 := s.Client.Get(ctx, keys[2]).Int64()
				if err != nil || err2 != nil {
					continue
				}
				if active > capacity {
					t.Errorf("served-and-unfinished %d > capacity %d", active, capacity)
					violations.Add(1)
				}
				if prev := lastServing.Swap(serving); serving < prev {
					t.Errorf("serving went back from %d to %d", prev, serving)
					violations.Add(1)
				}
			}
		})

		var issued sync.Map // request id -> position of the token
		var completed atomic.Int64
		for i := range visitors {
			wg.Go(func() {
				v := h.visitor(replicas[(i+1)%3])
				deadline := time.Now().Add(60 * time.Second)
				for time.Now().Before(deadline) {
					a := v.generate("drop", ids[i])
					if a.status == http.StatusAccepted {
						time.Sleep(2 * time.Millisecond)
						continue
					}
					if a.status != 200 {
						t.Errorf("visitor %d: %d %s", i, a.status, a.body)
						return
					}
					snap := replicas[0].room.snapshotOf(ctx, "drop")
					pos, _ := replicas[0].room.ids.position("drop", snap.Epoch, ids[i])
					issued.Store(ids[i], pos)
					done := h.adminForm(replicas[(i+2)%3], "/api/queue/update_token_status",
						url.Values{"queue_id": {"drop"}, "request_id": {ids[i]}, "status": {"1"}})
					if done.status != 200 {
						t.Errorf("complete %d: %d %s", i, done.status, done.body)
					}
					completed.Add(1)
					return
				}
				t.Errorf("visitor %d never served", i)
			})
		}
		wg.Wait()
		close(stop)
		watcher.Wait()

		if completed.Load() != visitors {
			t.Fatalf("%d of %d visitors completed", completed.Load(), visitors)
		}
		serving, _ := s.Client.Get(ctx, keys[2]).Int64()
		issued.Range(func(_, pos any) bool {
			if pos.(int64) > serving {
				t.Errorf("token issued to position %d above serving %d", pos, serving)
			}
			return true
		})
		if active, _ := s.Client.ZCard(ctx, keys[3]).Result(); active != 0 {
			t.Fatalf("%d positions still active after every visitor completed", active)
		}
	})
}

func TestRateMeterAndETA(t *testing.T) {
	var m rateMeter
	start := time.Unix(1000, 0)
	if r := m.observe(start, 0); r != 0 {
		t.Fatalf("first sample: %v", r)
	}
	if r := m.observe(start.Add(time.Second), 5); r != 0 {
		t.Fatalf("under two seconds of history must be unknown: %v", r)
	}
	r := m.observe(start.Add(10*time.Second), 50)
	if r != 5 {
		t.Fatalf("rate = %v, want 5/s", r)
	}
	// Samples older than the window are dropped.
	r = m.observe(start.Add(100*time.Second), 50)
	if r != 0 || len(m.samples) > 2 {
		t.Fatalf("after a minute without movement: rate %v, %d samples", r, len(m.samples))
	}
	s := &snapshot{ServingRate: 5}
	if s.eta(0) != 0 || s.eta(10) != 2 || s.eta(11) != 3 {
		t.Fatalf("eta: %d %d %d", s.eta(0), s.eta(10), s.eta(11))
	}
	if (&snapshot{}).eta(3) != -1 {
		t.Fatal("unknown rate must give -1")
	}
}
