package waitroom

import (
	"context"
	"errors"
	"sync"

	"github.com/edgeq/edgeq/internal/store/luascript"
)

// heartbeatBatch collects the positions that polled since the last flush, per queue.
type heartbeatBatch struct {
	mu      sync.Mutex
	pending map[string]map[int64]struct{}
}

// heartbeat records that a waiting visitor is still there; only queues that skip abandoned waiters
// need it. It is written to the store in batches, once a second per replica.
func (r *Room) heartbeat(queueID string, s *snapshot, pos int64) {
	if s.AbandonAfter <= 0 || s.reached(pos) {
		return
	}
	r.heartbeats.mu.Lock()
	defer r.heartbeats.mu.Unlock()
	set, ok := r.heartbeats.pending[queueID]
	if !ok {
		set = map[int64]struct{}{}
		r.heartbeats.pending[queueID] = set
	}
	set[pos] = struct{}{}
}

const heartbeatChunk = 5000

func (r *Room) flushHeartbeats(ctx context.Context) {
	r.heartbeats.mu.Lock()
	pending := r.heartbeats.pending
	r.heartbeats.pending = map[string]map[int64]struct{}{}
	r.heartbeats.mu.Unlock()
	for id, set := range pending {
		args := make([]any, 0, min(len(set), heartbeatChunk))
		send := func() {
			if len(args) == 0 {
				return
			}
			if res := r.scripts.run(ctx, r.client, r.scripts.heartbeat, queueKeys(r.keys, id), args...); res.Err() != nil &&
				!errors.Is(res.Err(), luascript.ErrReply) {
				r.logger.Debug("heartbeat flush failed", "queue", id, "error", res.Err().Error())
			}
			args = args[:0]
		}
		for pos := range set {
			args = append(args, pos)
			if len(args) == heartbeatChunk {
				send()
			}
		}
		send()
	}
}
