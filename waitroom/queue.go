package waitroom

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/config"
)

// queue is what a replica knows about one queue.
type queue struct {
	id   string
	keys []string
	snap atomic.Pointer[snapshot]

	mu             sync.Mutex
	meter          rateMeter
	lastRevocation int64 // ms of the newest revocation seen by the tick
}

// snapshot is a queue as of the last tick: what polls are answered from.
type snapshot struct {
	Epoch            string
	Title            string
	Capacity         int64
	ReleasePerMinute int64
	TokenTTL         time.Duration
	PositionExpiry   time.Duration
	AbandonAfter     time.Duration
	Turnstile        bool
	Paused           bool
	Counter          int64 // last assigned position
	Serving          int64
	Active           int64   // served and unfinished (tokens and unclaimed served positions)
	Unclaimed        int64   // served, no token yet
	ServingRate      float64 // positions per second, measured over the last minute; 0 unknown
	Taken            time.Time
}

// Waiting is the number of visitors not yet inside: behind the serving position, or reached but
// without a token (seed 004's waiting_num).
func (s *snapshot) Waiting() int64 { return max(0, s.Counter-s.Serving) + s.Unclaimed }

// Tokens is the number of live tokens (seed 004's active_token_num).
func (s *snapshot) Tokens() int64 { return max(0, s.Active-s.Unclaimed) }

// hasRoom reports whether a newcomer would be served at once: room inside and nobody waiting.
func (s *snapshot) hasRoom() bool {
	return !s.Paused && s.Counter == s.Serving && s.Active < s.Capacity
}

// track starts ticking a queue on this replica.
func (r *Room) track(id string) *queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok := r.queues[id]
	if !ok {
		q = &queue{id: id, keys: queueKeys(r.keys, id)}
		r.queues[id] = q
	}
	return q
}

func (r *Room) tracked(id string) *queue {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.queues[id]
}

func (r *Room) untrack(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.queues, id)
}

func (r *Room) all() []*queue {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*queue, 0, len(r.queues))
	for _, q := range r.queues {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *queue) int { return strings.Compare(a.id, b.id) })
	return out
}

// snapshotOf returns the current snapshot of a queue, looking the queue up in the store the first
// time this replica hears of it. nil means no such queue.
func (r *Room) snapshotOf(ctx context.Context, id string) *snapshot {
	if q := r.tracked(id); q != nil {
		if s := q.snap.Load(); s != nil {
			return s
		}
		return r.refresh(ctx, q)
	}
	if r.missing.Contains(id) {
		return nil
	}
	q := &queue{id: id, keys: queueKeys(r.keys, id)}
	if s := r.refresh(ctx, q); s != nil {
		r.mu.Lock()
		if existing, ok := r.queues[id]; ok {
			q = existing
		} else {
			r.queues[id] = q
		}
		r.mu.Unlock()
		return q.snap.Load()
	}
	r.missing.Add(id, struct{}{})
	return nil
}

func (r *Room) tickAll(ctx context.Context) {
	for _, q := range r.all() {
		r.refresh(ctx, q)
	}
}

// refresh runs the inlet of q and stores the snapshot it returns. A queue of the configuration file
// that has vanished from the store (Redis restarted empty, or deleted through the API) is recreated.
func (r *Room) refresh(ctx context.Context, q *queue) *snapshot {
	q.mu.Lock()
	since := q.lastRevocation
	q.mu.Unlock()
	res := r.scripts.run(ctx, r.client, r.scripts.advance, q.keys, since)
	if res.err != nil {
		if ctx.Err() == nil {
			r.logger.Debug("queue tick failed", "queue", q.id, "error", res.err.Error())
		}
		return q.snap.Load() // keep serving the last snapshot while the store is away
	}
	if res.int(0) == 1 {
		if cq, ok := (*r.configured.Load())[q.id]; ok {
			r.logger.Warn("queue of the configuration file missing from the store: recreating it", "queue", q.id)
			if _, err := r.upsert(ctx, "file", settingsOf(cq)); err != nil {
				r.logger.Warn("recreating queue failed", "queue", q.id, "error", err.Error())
			}
			return q.snap.Load()
		}
		q.snap.Store(nil)
		r.untrack(q.id)
		return nil
	}
	set := res.list(6)
	s := &snapshot{
		Counter: res.int(1), Serving: res.int(2), Active: res.int(3), Unclaimed: res.int(4),
		Epoch: set.str(0), Capacity: set.int(1), ReleasePerMinute: set.int(2),
		TokenTTL: time.Duration(set.int(3)) * time.Second, PositionExpiry: time.Duration(set.int(4)) * time.Second,
		AbandonAfter: time.Duration(set.int(5)) * time.Second, Turnstile: set.int(6) == 1, Paused: set.int(7) == 1,
		Title: set.str(8), Taken: time.Now(),
	}
	revs := res.list(7)
	if err := errors.Join(res.err, set.err, revs.err); err != nil {
		r.logger.Warn("queue tick: bad reply", "queue", q.id, "error", err.Error())
		return q.snap.Load()
	}
	q.mu.Lock()
	for i := 0; i+1 < revs.len(); i += 2 {
		pos, at := revs.int(i), revs.int(i+1)
		r.revoked.Add(revocation{queue: q.id, epoch: s.Epoch, position: pos}, struct{}{})
		q.lastRevocation = max(q.lastRevocation, at)
	}
	s.ServingRate = q.meter.observe(s.Taken, s.Serving)
	q.mu.Unlock()
	q.snap.Store(s)
	return s
}

// discover tracks queues created through the admin API of any replica.
func (r *Room) discover(ctx context.Context) {
	ids, err := r.client.SMembers(ctx, queueIndexKey(r.keys)).Result()
	if err != nil {
		return
	}
	for _, id := range ids {
		if config.ID.MatchString(id) && r.tracked(id) == nil {
			r.snapshotOf(ctx, id)
		}
	}
}
