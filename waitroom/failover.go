package waitroom

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/luascript"
)

// Failover (docs/reference.md "Queue positions after a failover"). Redis replicates asynchronously: a
// failover (or a restart that lost its last second) can take away the last positions a queue handed
// out, while their visitors still hold them — a request id carries its position. A counter that went
// back would hand those places out again, to others: two visitors in one place, with one request id.
//
// Positions therefore resume above the highest any replica has seen. Each replica keeps, per queue,
// the highest position it knows was handed out in the queue's current incarnation (its own joins,
// the counter its snapshots read, and every genuine request id a visitor shows it: saw), and every
// call that may hand out a place or that ticks passes it along (the scripts' raise_counter). That
// covers what a replica saw itself. For what another replica handed out in the moments before the
// failover, a replica that notices the master changed (store.Generation: a new connection found
// another run_id) pushes its own floor at once (a tick of every queue) and holds its joins for
// failoverHold, time for every other replica, which noticed the same failover, to push theirs. A join
// whose call crossed the change (the generation moved during it) is made again after that.
//
// With redis.wait_replicas > 0, what must not be lost is also waited for (store.RunAcked): a lottery's
// draw serves nobody until the tick has seen it on the replicas (ackDraw), an invitation's use that the
// replicas did not confirm is undone and answered 503, and so is a revocation (finish).

// failoverHold is how long joins wait after this replica noticed a new master, for every replica to
// raise the counters to what it has seen.
const failoverHold = 2 * time.Second

// saw records a position known to be handed out in the current epoch of a queue this replica tracks.
func (r *Room) saw(queueID, epoch string, pos int64) {
	q := r.tracked(queueID)
	if q == nil {
		return
	}
	if s := q.snap.Load(); s == nil || s.Epoch != epoch {
		return
	}
	for {
		seen := q.seen.Load()
		if pos <= seen || q.seen.CompareAndSwap(seen, pos) {
			return
		}
	}
}

// positionOf is the position of a request id genuine for the queue's epoch in snapshot s, noting it
// when it is above the counter s read: a place the store may have lost (saw). A position at or below
// s.Counter is noted already, so the gate's path costs one comparison.
func (r *Room) positionOf(queueID string, s *snapshot, id string) (int64, bool) {
	pos, ok := r.ids.position(queueID, s.Epoch, id)
	if ok && pos > s.Counter {
		r.saw(queueID, s.Epoch, pos)
	}
	return pos, ok
}

// floor is the highest position of q this replica knows was handed out.
func (q *queue) floor() int64 { return q.seen.Load() }

// settleFailover runs when this replica noticed a new master: it raises every queue's counter to what
// it has seen, then waits until failoverHold after the change, while the other replicas do the same.
// Calls during the wait wait with it; the wait is bounded by ctx.
func (r *Room) settleFailover(ctx context.Context) {
	st := r.opts.Store
	r.settle.Lock()
	defer r.settle.Unlock()
	gen := st.Generation()
	if gen == r.settled.Load() {
		return
	}
	r.tickAll(ctx)
	if wait := time.Until(st.ChangedAt().Add(failoverHold)); wait > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	r.settled.Store(gen)
	r.logger.Info("joins resume after the store's master changed: positions continue above the highest any replica has seen")
}

// afterFailover is true when the store's master changed since this replica last settled.
func (r *Room) afterFailover() bool { return r.opts.Store.Generation() != r.settled.Load() }

// errDrawUnconfirmed: the operator asked to serve while a lottery's draw waits for the replicas.
var errDrawUnconfirmed = errors.New("the lottery's draw is not on the store's replicas yet: nobody is served until it is")

// errNotAcked is a waiting-room write the replicas did not confirm in time (redis.wait_replicas).
var errNotAcked = store.ErrNotAcked

// runAcked runs a queue script and, with redis.wait_replicas > 0, waits for the replicas on the same
// connection. The reply is the script's even when the replicas did not confirm it (err errNotAcked).
func (r *Room) runAcked(ctx context.Context, script *redis.Script, keys []string, args ...any) (*luascript.Reply, error) {
	cmd, err := r.opts.Store.RunAcked(ctx, script, keys, args...)
	if err != nil && !errors.Is(err, store.ErrNotAcked) {
		return luascript.Failed(err), err
	}
	var res *luascript.Reply
	if cmd != nil {
		res = luascript.NewReply(cmd.Result())
		if errors.Is(err, store.ErrNotAcked) && res.Err() != nil {
			return res, res.Err()
		}
	} else {
		res = luascript.Failed(err)
	}
	return res, err
}

// ackDraw waits for the replicas to hold a queue's lottery draw (open_if_due left draw_ack "0") and
// then lets the queue serve. The write before the WAIT makes it cover the draw, whichever connection
// made that (the replication stream is ordered). A replica without redis.wait_replicas (restarted
// without it while a draw waited) lets it serve at once.
func (r *Room) ackDraw(ctx context.Context, q *queue) {
	st := r.opts.Store
	meta := q.keys[0]
	var err error
	if st.WaitReplicas() > 0 {
		err = st.Acked(ctx, meta, func(p redis.Pipeliner) { p.HSet(ctx, meta, "draw_seen", 1) })
	}
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Warn("the lottery's draw is not on the store's replicas yet: nobody is served until it is",
				"queue", q.id, "error", err.Error())
		}
		return
	}
	// Not waited for: a failover that loses this finds the draw there and waits for it again.
	if err := r.client.HSet(ctx, meta, "draw_ack", "1").Err(); err == nil {
		r.logger.Info("the lottery's draw is on the store's replicas: serving starts", "queue", q.id)
	}
}
