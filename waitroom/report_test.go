package waitroom

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/report"
)

// An idle queue costs the store a report call every reportIdleEvery per replica, not one every tick
// (the tick, 20 ms here, still runs its inlet); what its scripts count for the report (r_gave,
// r_exp) is still moved into it at the next tick, and what a visitor does is written at once.
func TestReport_AnIdleQueueIsWrittenRarely(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		h := newHarness(t, s, []config.Queue{testQueue("drop", 5)}, nil)
		flushes := storetest.CountCommands(s.Client, func(cmd redis.Cmder) bool {
			args := cmd.Args()
			return cmd.Name() == "evalsha" && len(args) > 3 && strings.Contains(args[3].(string), "}:rep@")
		})
		ticks := storetest.CountCommands(s.Client, func(cmd redis.Cmder) bool {
			args := cmd.Args()
			return cmd.Name() == "evalsha" && len(args) > 3 && strings.HasSuffix(args[3].(string), "{q:drop}:meta")
		})
		time.Sleep(time.Second)
		if n, t0 := flushes.Load(), ticks.Load(); n > 2 || t0 < 10 {
			t.Fatalf("an idle second: %d report calls over %d ticks' calls; want at most 2", n, t0)
		}
		// What the scripts count is moved at the next tick, long before reportIdleEvery.
		if err := s.Client.HIncrBy(ctx, s.Keys.Queue("drop", "meta"), "r_gave", 3).Err(); err != nil {
			t.Fatal(err)
		}
		read := func() report.Summary {
			rep, err := report.Reader{Client: s.Client, Keys: s.Keys, Retention: time.Hour}.Read(ctx,
				report.Query{Queue: "drop", From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			return rep.Summary
		}
		eventually(t, 2*time.Second, "the scripts' count moved into the report", func() bool { return read().GaveUp == 3 })
		// A visitor's join is written at the next tick too.
		v := h.visitor(h.replicas[0])
		if r := v.assign("drop"); r.status != 200 {
			t.Fatal(r.body)
		}
		eventually(t, 2*time.Second, "the join in the report", func() bool { return read().Joined == 1 })
	})
}

// reportMarks: unchanged gauges without moves are written again only after reportIdleEvery; a change
// or a move is written at once.
func TestReportMarks_WriteWhatChangedAndEveryFewSeconds(t *testing.T) {
	var m reportMarks
	t0 := time.Unix(1000, 0)
	steps := []struct {
		gauges string
		moves  bool
		at     time.Duration
		want   bool
	}{
		{"w=1", false, 0, true},                                                  // first
		{"w=1", false, time.Second, false},                                       // unchanged
		{"w=2", false, 2 * time.Second, true},                                    // changed
		{"w=2", true, 2*time.Second + time.Millisecond, true},                    // the scripts counted something
		{"w=2", false, 3 * time.Second, false},                                   // unchanged again
		{"w=2", false, 2*time.Second + time.Millisecond + reportIdleEvery, true}, // due again
		{"w=2", false, 3*time.Second + reportIdleEvery, false},                   // and quiet after
	}
	for i, s := range steps {
		if got := m.due("q", s.gauges, s.moves, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d (%+v): due %v", i, s, got)
		}
	}
	m.forget("q")
	if !m.due("q", "w=2", false, t0.Add(4*time.Second+reportIdleEvery)) {
		t.Fatal("a forgotten queue is not written at once")
	}
}
