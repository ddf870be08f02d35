package web

import (
	"errors"
	"log/slog"
	"net/http"
	"testing"
)

type countInc struct{ n int }

func (c *countInc) Inc() { c.n++ }

// StoreDegraded: a store counted as available is tried (no answer, nothing counted); a degraded one is
// not, and the answer is the route's policy for ErrDegraded: 503 closed, on (counted) open.
func TestStoreDegraded_AnswersForThePolicyOnlyWhenDegraded(t *testing.T) {
	cases := []struct {
		name             string
		degraded, open   bool
		wantDegraded     bool
		wantStatus       int // 0: no refusal (nil)
		wantBypassCounts int
	}{
		{"available, closed", false, false, false, 0, 0},
		{"available, open", false, true, false, 0, 0},
		{"degraded, closed", true, false, true, http.StatusServiceUnavailable, 0},
		{"degraded, open", true, true, true, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bypassed := &countInc{}
			r := NewRequest(slog.New(slog.DiscardHandler), "test")
			r.Store = StorePolicy{Degraded: c.degraded, Open: c.open, Bypassed: bypassed}
			e, degraded := r.StoreDegraded("queue")
			if degraded != c.wantDegraded {
				t.Fatalf("degraded = %v, want %v", degraded, c.wantDegraded)
			}
			switch {
			case c.wantStatus == 0 && e != nil:
				t.Fatalf("answer %v, want none", e)
			case c.wantStatus != 0 && (e == nil || e.Status != c.wantStatus || e.Code != ErrStoreUnavailable.Code ||
				!errors.Is(e, ErrDegraded) || e.RetryAfter == 0):
				t.Fatalf("answer %v, want %d %s caused by ErrDegraded with Retry-After", e, c.wantStatus, ErrStoreUnavailable.Code)
			}
			if bypassed.n != c.wantBypassCounts {
				t.Fatalf("bypasses counted: %d, want %d", bypassed.n, c.wantBypassCounts)
			}
		})
	}
}
