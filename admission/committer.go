package admission

import (
	"context"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/web"
	"github.com/redis/go-redis/v9"
)

// Commits off the request path. When the origin accepts an admission, the visitor's answer does not
// wait for the store. A grouped kind's commit rides the owner's next grouped call (its batcher sends
// one at once when none is on its way, so a commit alone is a call alone): no call or round trip of
// its own. Other commits go to the committer, which sends at once whatever is queued, one commits.lua
// call per owner in one pipeline (a group commit: under load the batches grow by themselves, and one
// round trip carries many commits, which is what Redis CPU per admission is made of); so does a
// grouped commit the grouped call could not apply, and replay.go's. A grouped kind's commit only
// takes the admission out of its owner's unsettled set (its record, "admitted" outside the set, is
// committed), which ends the user's in-flight claim; another kind's marks its record committed (a
// kind may commit for the ledger only: Kind.Commits). What the admission took was taken at
// admission, so a batch lost with its replica loses nothing and sells nothing twice: the claim stops
// counting after ClaimTTL and the admission stays unsettled. While the committer is not running
// (tests, shutdown), commits run on the request path as before.
//
// The user's next admission may arrive before the commit of the last one is applied: once the shop
// has answered the last one, while its answer is still being passed on or its commit is on its way.
// On the same replica it waits for that settlement (waitCommit) and is admitted; on another replica,
// inside that window of about one store round trip, it is refused with the kind's busy refusal
// (BusyKind), as an admission still at the shop is.

// commitBatchMax bounds one batch.
const commitBatchMax = 512

type pendingCommit struct {
	kind Kind
	c    Claim
	st   *settling // ended once the commit's batch was sent and answered (or failed)
}

// settling is an admission of this replica from the moment it is forwarded until it is settled.
type settling struct {
	answered <-chan struct{} // closed when the shop answered (or failed): nil, never
	done     chan struct{}   // closed when settled: released, or committed (or the commit failed)
}

type commitKey struct{ kind, owner, user string }

type committer struct {
	mu      sync.RWMutex
	running bool
	queue   chan pendingCommit
	// inFlight holds, per user of an owner, this replica's last admission not settled yet.
	inFlight sync.Map // commitKey -> *settling
}

// startSettling registers an admission about to be forwarded; endSettling must follow.
func (s *Service) startSettling(k Kind, c Claim, o *web.Outcome) *settling {
	st := &settling{done: make(chan struct{})}
	if o != nil {
		st.answered = o.WatchAnswer()
	}
	s.commits.inFlight.Store(commitKey{k.Name(), c.Owner, c.User}, st)
	return st
}

// endSettling says an admission is settled.
func (s *Service) endSettling(k Kind, c Claim, st *settling) {
	s.commits.inFlight.CompareAndDelete(commitKey{k.Name(), c.Owner, c.User}, st)
	close(st.done)
}

// commitLater hands a commit over, to be applied off the request path, and ends st once applied;
// false when nothing takes it (then the caller commits now). A grouped kind's commit rides the
// owner's next grouped call (GroupedKind.RideCommit): no call or round trip of its own. Other
// commits, and one the grouped call could not apply, go to the committer.
func (s *Service) commitLater(k Kind, c Claim, st *settling) bool {
	if g, grouped := k.(GroupedKind); grouped && g.RideCommit(c, func(applied bool) {
		if applied {
			s.endSettling(k, c, st)
			return
		}
		if !s.queueCommit(k, c, st) {
			go s.applyCommits(context.Background(), []pendingCommit{{kind: k, c: c, st: st}})
		}
	}) {
		return true
	}
	return s.queueCommit(k, c, st)
}

// queueCommit hands a commit to the committer, which ends st once applied; false when it is not
// running or is full.
func (s *Service) queueCommit(k Kind, c Claim, st *settling) bool {
	s.commits.mu.RLock()
	defer s.commits.mu.RUnlock()
	if !s.commits.running {
		return false
	}
	select {
	case s.commits.queue <- pendingCommit{kind: k, c: c, st: st}:
		return true
	default:
		return false
	}
}

// waitCommit waits, briefly, for the settlement of this replica's last admission of the user for an
// owner, when the shop has answered it; true when there was one to wait for (the caller tries its
// reservation again). An admission the shop has not answered yet is in progress.
func (s *Service) waitCommit(k Kind, c Claim) bool {
	v, ok := s.commits.inFlight.Load(commitKey{k.Name(), c.Owner, c.User})
	if !ok {
		return false
	}
	st := v.(*settling)
	select {
	case <-st.answered:
	default:
		return false
	}
	select {
	case <-st.done:
	case <-time.After(time.Second):
	}
	return true
}

// runCommitter applies queued commits in batches until ctx ends, then applies what is left.
func (s *Service) runCommitter(ctx context.Context) {
	s.commits.mu.Lock()
	s.commits.queue = make(chan pendingCommit, 4*commitBatchMax)
	s.commits.running = true
	s.commits.mu.Unlock()
	batch := make([]pendingCommit, 0, commitBatchMax)
	for {
		select {
		case <-ctx.Done():
			s.commits.mu.Lock()
			s.commits.running = false // from here settle commits on the request path
			s.commits.mu.Unlock()
			batch = batch[:0]
			for {
				select {
				case p := <-s.commits.queue:
					batch = append(batch, p)
					continue
				default:
				}
				break
			}
			s.applyCommits(context.WithoutCancel(ctx), batch)
			return
		case p := <-s.commits.queue:
			// Whatever queued up while the last batch was on its way goes in this one.
			batch = append(batch[:0], p)
		gather:
			for len(batch) < commitBatchMax {
				select {
				case p := <-s.commits.queue:
					batch = append(batch, p)
				default:
					break gather
				}
			}
			s.applyCommits(ctx, batch)
		}
	}
}

// applyCommits runs one commits.lua per owner of a batch, pipelined. A failure is logged: the units
// are kept either way and the claims expire by themselves.
func (s *Service) applyCommits(ctx context.Context, batch []pendingCommit) {
	if len(batch) == 0 {
		return
	}
	defer func() {
		for _, p := range batch {
			s.endSettling(p.kind, p.c, p.st)
		}
	}()
	type group struct {
		keys []string
		args []any
	}
	groups := map[[2]string]*group{}
	for _, p := range batch {
		if !p.kind.Commits() {
			continue // settled as it is (a kind that commits only for the ledger, with the ledger off)
		}
		key := [2]string{p.kind.Name(), p.c.Owner}
		g := groups[key]
		grouped, isGrouped := p.kind.(GroupedKind)
		if g == nil {
			// A grouped kind's commit is leaving its unsettled set (commits.lua), told to the ledger
			// on the grouped stream, and its claims end with it (pairs of id and user); another
			// kind's is its record's state, on its event stream.
			keys := []string{p.kind.Stream(p.c.Owner), p.kind.Stream(p.c.Owner)}
			if isGrouped {
				keys = []string{grouped.AdmitsStream(p.c.Owner), grouped.UnsettledSet(p.c.Owner), grouped.Claims(p.c.Owner)}
			}
			g = &group{keys: keys, args: []any{Flag(s.o.Ledger != nil), Flag(isGrouped)}}
			groups[key] = g
		}
		if !isGrouped {
			g.keys = append(g.keys, p.kind.Record(p.c))
			g.args = append(g.args, p.c.ID)
		} else {
			g.args = append(g.args, p.c.ID, p.c.User)
		}
	}
	if len(groups) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, g := range groups {
				commitsScript.EvalSha(ctx, p, g.keys, g.args...)
			}
			return nil
		})
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The first batch after a store restart: load the script and send the batch again.
			if err = commitsScript.Load(ctx, s.client).Err(); err == nil {
				continue
			}
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil || attempt == 2 {
			s.logger.Warn("committing a batch of admissions failed; their units are kept and their claims expire by themselves",
				"admissions", len(batch), "error", err.Error())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Flag is a script's boolean argument: "1" or "0".
func Flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
