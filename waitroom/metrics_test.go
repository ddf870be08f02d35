package waitroom

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// gauge reads one queue's sample of a room metric, and whether it is there.
func gauge(t *testing.T, room *Room, name, queue string) (float64, bool) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(room.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queue {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// The settings gauges follow the queue: capacity and paused as the admin API changes them, and the
// serving rate once visitors are let in.
func TestMetrics_CapacityPausedAndRate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 2)}, nil)
		rp := h.replicas[0]
		is := func(name string, want float64) func() bool {
			return func() bool { v, ok := gauge(t, rp.room, name, "drop"); return ok && v == want }
		}
		eventually(t, 5*time.Second, "edgeq_queue_capacity 2, not paused", func() bool {
			return is("edgeq_queue_capacity", 2)() && is("edgeq_queue_paused", 0)()
		})
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"drop","capacity":7,"paused":true}`); a.status != 200 {
			t.Fatalf("put: %d %s", a.status, a.body)
		}
		eventually(t, 5*time.Second, "edgeq_queue_capacity 7, paused", func() bool {
			return is("edgeq_queue_capacity", 7)() && is("edgeq_queue_paused", 1)()
		})
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"drop","paused":false}`); a.status != 200 {
			t.Fatalf("resume: %d %s", a.status, a.body)
		}
		for range 3 {
			if a := h.visitor(rp).assign("drop"); a.status != 200 {
				t.Fatalf("join: %d %s", a.status, a.body)
			}
		}
		eventually(t, 5*time.Second, "a serving rate above 0 once visitors are let in", func() bool {
			v, ok := gauge(t, rp.room, "edgeq_queue_serving_rate", "drop")
			return ok && v > 0
		})
	})
}
