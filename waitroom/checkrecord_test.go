package waitroom

import (
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// A passed bot check's single-use record rides in the join's own script call: its bit is set with
// the place, so the same solution takes no second place, in the same grouped call or a later one, and
// neither does one whose challenge has expired by the store's clock (a replica paused after it checked
// the solution, whose record may be gone with its bitmap). On the cluster too: the bitmap carries the
// queue's hash tag.
func TestCheckRecords_OneSolutionOnePlace(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 0)}, nil)
		room := h.replicas[0].room
		series := checkRecordKey(room.keys, "drop", "0123456789abcdef")
		later := time.Now().Add(time.Minute).UnixMilli()
		rec := func(bit, until int64) assignReq {
			return assignReq{record: series, recordBit: bit, recordUntil: until}
		}
		out, err := room.assignNow(t.Context(), "drop", []assignReq{rec(1, later), rec(2, later), rec(1, later), {}, rec(3, time.Now().Add(-time.Second).UnixMilli())})
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ pos, code int64 }{{1, 0}, {2, 0}, {0, codeClaimed}, {3, 0}, {0, codeClaimed}}
		for i, p := range out {
			if p.pos != want[i].pos || p.code != want[i].code {
				t.Fatalf("join %d: position %d code %d, want %+v", i, p.pos, p.code, want[i])
			}
		}
		out, err = room.assignNow(t.Context(), "drop", []assignReq{rec(2, later), rec(4, later)})
		if err != nil || out[0].code != codeClaimed || out[1].code != 0 || out[1].pos != 4 {
			t.Fatalf("a later call: %+v %v", out, err)
		}
		if ttl := s.Client.PTTL(t.Context(), series).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("the bitmap's time to live: %s", ttl)
		}
	})
}
