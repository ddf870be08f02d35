package admission

import (
	"context"
	"sync"
	"time"
)

// A compensation is a release (Kind.Release) the store has not confirmed yet: the origin failed an
// admission while the store was unreachable, or a reserve call failed without an answer, so the
// script may have run. Compensations are retried until the store answers; nothing an admission took
// is left behind because the store was briefly away.
//
// For an id the store never saw, the retried script leaves a tombstone (the record, marked given
// back, with the record TTL), and every kind's admit script refuses an id that has a record: a
// reserve call still on its way when the compensation ran can no longer take anything.
type compensation struct {
	kind  Kind
	claim Claim // its owner, user and id name every key the release touches
	since time.Time
}

// maxPending bounds the compensations a replica remembers; beyond it the oldest are dropped with an
// error log (their records expire after recordTTL, which frees nothing: an operator must look).
const maxPending = 100_000

type compensations struct {
	mu      sync.Mutex
	pending []compensation
	wake    chan struct{}
}

// compensateLater queues the release of an admission of kind k for the retry loop.
func (s *Service) compensateLater(k Kind, c Claim) {
	s.queueCompensation(compensation{kind: k, claim: c, since: time.Now()})
}

func (s *Service) queueCompensation(c compensation) {
	s.comp.mu.Lock()
	if len(s.comp.pending) >= maxPending {
		dropped := s.comp.pending[0]
		s.comp.pending = s.comp.pending[1:]
		s.logger.Error("too many pending compensations: one is dropped and needs an operator", dropped.attrs()...)
	}
	s.comp.pending = append(s.comp.pending, c)
	n := len(s.comp.pending)
	s.comp.mu.Unlock()
	s.metrics.compensations.Set(float64(n))
	select {
	case s.comp.wake <- struct{}{}:
	default:
	}
}

// runCompensations retries pending compensations until ctx ends: at once when one is queued, then
// every retry interval while some remain. When ctx ends it makes a last attempt (the process is
// shutting down after draining its requests, and the store is still open) and logs what is left.
func (s *Service) runCompensations(ctx context.Context, retry time.Duration) {
	timer := time.NewTimer(retry)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.finishCompensations(FinalAttempt)
			return
		case <-s.comp.wake:
		case <-timer.C:
		}
		s.compensateOnce(ctx)
		s.replayAfterFailover(ctx)
		timer.Reset(retry)
	}
}

// compensateOnce tries every pending compensation once and keeps those that failed.
func (s *Service) compensateOnce(ctx context.Context) {
	s.comp.mu.Lock()
	batch := s.comp.pending
	s.comp.pending = nil
	s.comp.mu.Unlock()
	var failed []compensation
	for i, c := range batch {
		if ctx.Err() != nil {
			failed = append(failed, batch[i:]...)
			break
		}
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.compensate(callCtx, c)
		cancel()
		if err != nil {
			failed = append(failed, c)
			continue
		}
		s.remember(c.kind, c.claim, true)
		s.logger.Info("compensation applied", append(c.attrs(), "after", time.Since(c.since).Round(time.Millisecond).String())...)
	}
	s.comp.mu.Lock()
	s.comp.pending = append(failed, s.comp.pending...)
	n := len(s.comp.pending)
	s.comp.mu.Unlock()
	s.metrics.compensations.Set(float64(n))
}

// FinalAttempt bounds the last try at pending compensations when a replica stops, after it has
// drained its requests: process supervisors must allow for it on top of server.shutdown_timeout.
const FinalAttempt = 5 * time.Second

// finishCompensations tries the pending compensations once more within limit and logs each one that
// is still pending: it lives only in this process, so an operator must give it back by hand.
func (s *Service) finishCompensations(limit time.Duration) {
	if s.PendingCompensations() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	s.compensateOnce(ctx)
	cancel()
	s.comp.mu.Lock()
	left := s.comp.pending
	s.comp.pending = nil
	s.comp.mu.Unlock()
	s.metrics.compensations.Set(0)
	const listed = 1000
	for i, c := range left {
		if i == listed {
			s.logger.Error("more compensations were lost at shutdown", "count", len(left)-listed)
			break
		}
		s.logger.Error("compensation lost at shutdown: the store did not answer; give it back by hand", c.attrs()...)
	}
}

// compensate runs the release of c, leaving a tombstone for an id the store never saw.
func (s *Service) compensate(ctx context.Context, c compensation) error {
	if _, err := c.kind.Release(ctx, c.claim); err != nil {
		return err
	}
	forget(c.kind, c.claim.Owner)
	return nil
}

// attrs name a compensation in the log: what an operator needs to give it back by hand.
func (c compensation) attrs() []any {
	return []any{"id", c.claim.ID, "type", c.kind.Name(), c.kind.Owner(), c.claim.Owner}
}

// PendingCompensations reports how many releases and withdrawals wait for the store (for tests and
// the admin view).
func (s *Service) PendingCompensations() int {
	s.comp.mu.Lock()
	defer s.comp.mu.Unlock()
	return len(s.comp.pending)
}
