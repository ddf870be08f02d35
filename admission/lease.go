package admission

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/store"
)

// The liveness lease (docs/reference.md "Failover"): every replica renews a lease (one field per
// replica, keyed by the node number its admission ids carry, holding the store-clock time the lease
// runs out). What a replica admitted is sent to the shop only while its lease holds (the fence), so
// that another replica's sweep can tell a dead replica from a slow one and settle what it left
// (SweepingKind) without a unit sold twice.

const (
	// leaseTTL is how long a replica counts as alive after its last renewal; leaseEvery its renewal.
	leaseTTL   = 15 * time.Second
	leaseEvery = 5 * time.Second
	// sweepBatch bounds the admissions one sweep looks at per owner.
	sweepBatch = 500
	// The fence's margins (docs/reference.md "Failover"): a replica counts its own lease valid until
	// leaseSelfMargin before the lease it wrote runs out, by its own clock from before the renewal was
	// sent; a sweep takes a replica for dead only sweepMargin after its lease ran out, by the store's
	// clock. Between the two, 3 s: far more than clocks drift over a lease (parts per million) and than
	// the time between a fence's check and the write it guards (microseconds).
	leaseSelfMargin = time.Second
	sweepMargin     = 2 * time.Second
)

// lease is this replica's own view of its liveness lease, by its monotonic clock (which runs on while
// the process is stopped): until when the lease it wrote surely holds, and an epoch that changes
// whenever it may have run out between two renewals, so that an admission made before such a gap is
// not sent after it (the sweep of another replica may have given its units back meanwhile).
type lease struct {
	mu     sync.Mutex
	active bool // a renewal has succeeded: admissions are fenced
	epoch  uint64
	until  time.Time
}

// renewed records a renewal sent at sent and answered at answered.
func (l *lease) renewed(sent, answered time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Admissions are fenced from the first renewal on: before it no sweep can take this replica for
	// dead (a node that never held a lease is taken for alive).
	l.active = true
	if !answered.Before(l.until) {
		l.epoch++ // it ran out, or may have, before this renewal landed (or it never held)
	}
	if until := sent.Add(leaseTTL - leaseSelfMargin); until.After(l.until) {
		l.until = until
	}
}

// fence returns the fence of an admission made now: nil when renewals have not begun (admissions are
// not fenced), and whether the lease holds now.
func (l *lease) fence() (*leaseFence, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active || fenceOff {
		return nil, true
	}
	f := &leaseFence{l: l, epoch: l.epoch}
	return f, time.Now().Before(l.until)
}

// leaseFence holds while the lease has held without a gap since the admission: same epoch, and not
// run out now.
type leaseFence struct {
	l     *lease
	epoch uint64
}

// Holds implements web.Fence.
func (f *leaseFence) Holds() bool {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	return f.l.epoch == f.epoch && time.Now().Before(f.l.until)
}

// livenessKey: node number -> when its lease runs out (store clock, ms). One field per replica, not a
// key per admission; the hash outlives the replicas by a day.
func livenessKey(k store.Keys) string { return k.Global("edgeq", "live") }

// renewLease writes this replica's lease, on the store's clock, and from then on fences admissions
// with it.
func (s *Service) renewLease(ctx context.Context) error {
	sent := time.Now()
	if err := leaseScript.Run(ctx, s.client, []string{livenessKey(s.keys)}, s.o.IDs.Node(), leaseTTL.Milliseconds()).Err(); err != nil {
		return err
	}
	s.lease.renewed(sent, time.Now())
	return nil
}

// RenewLease renews the lease once, before the replica serves (a failure is retried by Run).
func (s *Service) RenewLease(ctx context.Context) error { return s.renewLease(ctx) }

// runLease renews this replica's lease until ctx ends. It is not taken back at shutdown: a replica that
// stops cleanly has settled what it admitted.
func (s *Service) runLease(ctx context.Context) {
	for {
		if err := s.renewLease(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("renewing the liveness lease failed: admitted requests are not sent once it runs out", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leaseEvery):
		}
	}
}

// Leases are the replicas' liveness leases as a sweep of what dead replicas left reads them
// (SweepingKind), on the store's clock.
type Leases struct {
	// OlderThan is the store's time less Options.OrphanAfter (origin.timeout): the shop has answered
	// an admission from before it by now, or never will.
	OlderThan time.Time
	now       time.Time // the store's time less sweepMargin
	leases    map[string]string
}

// SweepBatch bounds the admissions one sweep looks at per owner.
const SweepBatch = sweepBatch

// ReadLeases reads every replica's lease and the store's time.
func (s *Service) ReadLeases(ctx context.Context) (*Leases, error) {
	now, err := s.client.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	leases, err := s.client.HGetAll(ctx, livenessKey(s.keys)).Result()
	if err != nil {
		return nil, err
	}
	// A lease counts as run out sweepMargin after it did (its replica stops sending before that).
	return &Leases{OlderThan: now.Add(-s.o.OrphanAfter), now: now.Add(-sweepMargin), leases: leases}, nil
}

// RanOut reports whether node held a lease and it has run out; a node that never held one is taken
// for alive.
func (l *Leases) RanOut(node int64) bool {
	until, ok := l.leases[strconv.FormatInt(node, 10)]
	if !ok {
		return false
	}
	ms, err := strconv.ParseInt(until, 10, 64)
	return err == nil && ms < l.now.UnixMilli()
}
