package admission

import (
	"context"
	"sync"
	"time"
)

// Settlements after a failover (docs/reference.md "What a failover can still bring back"). With
// redis.wait_replicas a reservation is on the replicas before the shop sees it, but what settles it
// afterwards (a commit, a release) is not waited for: a failover can lose one. A lost commit leaves
// the admission unsettled on the new master (listed, and its user's claim counts until ClaimTTL:
// the kind's busy refusal); a lost release brings the unit back as taken, held for
// nobody. So each replica remembers what it settled in the last replayWindow and, once it sees the
// store's master change (store.Generation), sends it all again: every settlement script is idempotent
// per id, and on a master that has the settlement already it changes nothing. What a replica settled
// and then lost with its own death is what `edgeq reconcile` and the unsettled list show.

// replayWindow is how far back settlements are sent again after a master change: far longer than any
// replication lag a deployment keeps (a replica further behind than this is out of date anyway).
const replayWindow = 10 * time.Second

type settled struct {
	kind    Kind
	c       Claim
	release bool
	at      time.Time
}

type settlementLog struct {
	mu sync.Mutex
	// chunks hold the settlements, oldest first, settledChunk to a chunk (the last one filling): a
	// chunk goes once its newest entry is out of the window, so remembering costs an append under
	// the lock and never a copy of the log.
	chunks [][]settled
	spare  []settled // a chunk that went, kept for the next
	gen    uint64    // the store generation replayed last
}

// settledChunk is the settlements one chunk of the log holds.
const settledChunk = 1024

// remember notes a settlement this replica made (or handed to the committer).
func (s *Service) remember(k Kind, c Claim, release bool) {
	now := time.Now()
	l := &s.replay
	l.mu.Lock()
	for len(l.chunks) > 1 {
		first := l.chunks[0]
		if now.Sub(first[len(first)-1].at) <= replayWindow {
			break
		}
		clear(first)
		l.spare, l.chunks[0], l.chunks = first[:0], nil, l.chunks[1:]
	}
	if n := len(l.chunks); n == 0 || len(l.chunks[n-1]) == settledChunk {
		next := l.spare
		if next == nil {
			next = make([]settled, 0, settledChunk)
		}
		l.spare, l.chunks = nil, append(l.chunks, next)
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, settled{kind: k, c: c, release: release, at: now})
	l.mu.Unlock()
}

// replayAfterFailover sends the recent settlements again when the store's master changed since the
// last look; the compensation loop calls it every second.
func (s *Service) replayAfterFailover(ctx context.Context) {
	gen := s.o.Store.Generation()
	l := &s.replay
	l.mu.Lock()
	if gen == l.gen {
		l.mu.Unlock()
		return
	}
	l.gen = gen
	cutoff := time.Now().Add(-replayWindow)
	var recent []settled
	for _, chunk := range l.chunks {
		for _, e := range chunk {
			if e.at.After(cutoff) {
				recent = append(recent, e)
			}
		}
	}
	l.mu.Unlock()
	if len(recent) == 0 {
		return
	}
	var commits []pendingCommit
	released := 0
	for _, e := range recent {
		if e.release {
			// A release the store never saw (or saw and lost) gives the units back now; one it has is a no-op.
			if _, err := e.kind.Release(ctx, e.c); err != nil {
				s.compensateLater(e.kind, e.c)
			}
			released++
			continue
		}
		commits = append(commits, pendingCommit{kind: e.kind, c: e.c, st: &settling{done: make(chan struct{})}})
	}
	s.applyCommits(ctx, commits)
	s.logger.Warn("the store's master changed: the settlements of the last seconds were sent again, in case it lost them",
		"commits", len(commits), "releases", released, "window", replayWindow.String())
}
