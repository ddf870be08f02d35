package admission

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// syncBuffer is a log sink safe for the worker's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// When a replica stops, a release that is still pending gets one more try: with the store reachable
// the unit goes back and nothing is reported lost.
func TestCompensation_ShutdownGivesBackWhatItCan(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 5, 1))
		logs := &syncBuffer{}
		st.svc.logger = slog.New(slog.NewTextHandler(logs, nil))
		ctx := context.Background()
		if res, err := reserveNow(ctx, st.svc, "p", []Claim{{Owner: "p", User: "u", ID: "800", Value: 1}}); err != nil || res[0].code != 0 {
			t.Fatalf("reserve: %v %v", res, err)
		}
		if n := st.remaining("p"); n != 4 {
			t.Fatalf("stock after the reserve: %d", n)
		}
		st.svc.compensateLater(stockOf(st.svc), Claim{Owner: "p", User: "u", ID: "800"})
		stopped, stop := context.WithCancel(ctx)
		stop() // the replica is already shutting down when the loop looks
		st.svc.runCompensations(stopped, time.Hour)
		if n := st.svc.PendingCompensations(); n != 0 {
			t.Fatalf("%d compensations pending after the stop", n)
		}
		if n := st.remaining("p"); n != 5 {
			t.Fatalf("stock after the stop: %d, want the unit back (5)", n)
		}
		if strings.Contains(logs.String(), "lost at shutdown") {
			t.Fatalf("a compensation that landed is reported lost:\n%s", logs)
		}
	})
}

// With the store gone, what is still pending at the stop is logged, one line per admission or bid,
// so that an operator can give it back by hand (it lived only in this process).
func TestCompensation_ShutdownLogsWhatIsLost(t *testing.T) {
	dead := store.Wrap(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond}),
		store.Keys{Prefix: "edgeq"})
	st := newStack(t, dead)
	logs := &syncBuffer{}
	st.svc.logger = slog.New(slog.NewTextHandler(logs, nil))
	st.svc.compensateLater(stockOf(st.svc), Claim{Owner: "sneaker", User: "u", ID: "801"})
	st.svc.compensateLater(st.bids(), Claim{Owner: "lot", ID: "802"})
	st.svc.finishCompensations(500 * time.Millisecond)
	out := logs.String()
	for _, want := range []string{"id=801 type=stock product=sneaker", "id=802 type=bid auction=lot"} {
		if !strings.Contains(out, "compensation lost at shutdown") || !strings.Contains(out, want) {
			t.Fatalf("the log does not report %q as lost:\n%s", want, out)
		}
	}
	if n := st.svc.PendingCompensations(); n != 0 {
		t.Fatalf("%d compensations still pending", n)
	}
}
