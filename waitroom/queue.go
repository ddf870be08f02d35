package waitroom

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// queue is what a replica knows about one queue.
type queue struct {
	id   string
	keys []string
	snap atomic.Pointer[snapshot]

	mu             sync.Mutex
	meter          rateMeter
	lastRevocation int64 // ms of the newest revocation seen by the tick
	drawn          drawnSet
	// early is the store's count of sessions that ended before their deadline, and earlyAt when this
	// replica last saw it grow: the waiting time estimate assumes full sessions until someone leaves.
	early   int64
	earlyAt time.Time
	// seen is the highest position this replica knows was handed out in the queue's current epoch: the
	// counter resumes above it after a failover (failover.go).
	seen atomic.Int64
	// restored is the store's count of places restored that way, as last seen (logged when it grows).
	restored int64
	// joins remembers when positions were handed out, for the report's waiting times (report.go).
	joins joinClock
	// joinRate is the recent join rate, for a bot check's adaptive difficulty (joinrate.go).
	joinRate joinMeter
	// ended is the epoch whose line this replica has seen counted at a sell-out (leavers.go), "" while
	// the queue is not sold out.
	ended atomic.Value
}

// floorArg is the scripts' "<epoch>:<floor>" argument (raise_counter); "" before the first snapshot.
func (q *queue) floorArg() string {
	s := q.snap.Load()
	if s == nil {
		return ""
	}
	return s.Epoch + ":" + strconv.FormatInt(q.seen.Load(), 10)
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
	GoneAfter        time.Duration
	Turnstile        bool
	Paused           bool
	Counter          int64 // last assigned position
	Serving          int64 // serving rank: ranks 1..Serving were reached
	Active           int64 // served and unfinished (tokens and unclaimed served positions)
	Unclaimed        int64 // served, no token yet
	// ServingRate is how many waiters were decided (served or skipped) per second, measured over the
	// last minute; 0 unknown.
	ServingRate float64
	Taken       time.Time
	// StoreNow is the store's clock when the snapshot was taken: opening and closing times are
	// compared with it (storeNow).
	StoreNow time.Time
	// readAt is the store's clock, in µs, when the advance script read the queue (queue.newer).
	readAt int64

	// A drop (docs/operations.md "Running a drop").
	Method      string
	OpensAt     time.Time // zero: none
	JoinFrom    time.Time // opens_at - prequeue; zero: none
	ClosesAt    time.Time // zero: none
	Shuffle     bool
	Opened      bool
	Lottery     lottery
	SoldOut     bool
	SoldOutWith []string
	Pool        int64 // method random: the positions a draw picks from (some may have left)
	Drawn       *bitset
	// Deadlines are a sample of the active set's deadlines, oldest first, and FullSessions is whether
	// nobody has left before their deadline for a token lifetime: then the wait is at least what they
	// allow (eta).
	Deadlines    []deadline
	FullSessions bool
	// Moved counts waiters decided (served or skipped), for the rate meter.
	Moved int64
	// OutOfTurn counts the positions behind the serving rank served already: front invitations, and
	// those drawn while the method was random (the fifo method; the random method counts its pool
	// instead). outOfTurnRanks are their ranks, sorted: ahead passes over them.
	OutOfTurn      int64
	outOfTurnRanks []int64

	// Sessions and invitations (docs/operations.md "Sessions, invitations and staff").
	SessionRenewal bool
	MaxSession     time.Duration
	InviteOnly     bool
	Invites        int64 // invitations created and not deleted
	InvitesUsed    int64 // of which used
	// PlacesPerIP bounds the unserved places one client address may hold
	// (queues[].places_per_ip); 0 none.
	PlacesPerIP int64

	// ReportMoves is whether the queue's scripts have counted something for the report since it was
	// last written (r_gave, r_exp): the report flush moves it.
	ReportMoves bool

	// DrawPending: a lottery's draw waits for the store's replicas (redis.wait_replicas, failover.go).
	DrawPending bool
}

// deadline is the index-th oldest deadline of the active set.
type deadline struct {
	index int64
	at    time.Time
}

// storeNow estimates the store's clock now.
func (s *snapshot) storeNow() time.Time { return s.StoreNow.Add(time.Since(s.Taken)) }

// behind is the number of positions not reached yet (some of them may have left).
func (s *snapshot) behind() int64 {
	if s.Method == config.MethodRandom {
		return s.Pool
	}
	return max(0, s.Counter-s.Serving-s.OutOfTurn)
}

// Waiting is the number of visitors not yet inside: not reached yet, or reached but without a token
// (what GET waiting_num answers).
func (s *snapshot) Waiting() int64 { return s.behind() + s.Unclaimed }

// Tokens is the number of live tokens (the admin API's active_token_num).
func (s *snapshot) Tokens() int64 { return max(0, s.Active-s.Unclaimed) }

// reached reports whether a position has been reached: by the serving rank, or by a draw.
func (s *snapshot) reached(pos int64) bool {
	return s.Lottery.rank(pos) <= s.Serving || s.Drawn.has(pos)
}

// ahead is how many visitors before pos in serving order are still to be served (those served out of
// turn, by a front invitation or an earlier draw, are passed over); for the random method, everyone else
// waiting (any of them may be drawn first).
func (s *snapshot) ahead(pos int64) int64 {
	if s.Method == config.MethodRandom {
		return max(0, s.Pool-1)
	}
	rank := s.Lottery.rank(pos)
	passed, _ := slices.BinarySearch(s.outOfTurnRanks, rank) // served out of turn before it
	return max(0, rank-s.Serving-1-int64(passed))
}

// joinable says whether a newcomer may take a place now, and if not why: web.ErrNotOpen before the
// pre-queue (or the opening, without one), web.ErrSoldOut, web.ErrClosed.
func (s *snapshot) joinable() *web.Error {
	now := s.storeNow()
	switch {
	case !s.Opened && !s.JoinFrom.IsZero() && now.Before(s.JoinFrom):
		return web.ErrNotOpen.With("opens_at", vocab.FormatTime(s.OpensAt)).
			With("opens_in", secondsUntil(now, s.OpensAt)).With("joins_from", vocab.FormatTime(s.JoinFrom))
	case s.SoldOut:
		return web.ErrSoldOut
	case s.Method == config.MethodReject || (!s.ClosesAt.IsZero() && !now.Before(s.ClosesAt)):
		return web.ErrQueueClosed
	}
	return nil
}

// open reports whether the queue has opened (it serves, unless paused or sold out).
func (s *snapshot) open() bool {
	return s.Opened || s.OpensAt.IsZero() || !s.storeNow().Before(s.OpensAt)
}

// hasRoom reports whether a newcomer would be served at once: room inside and nobody waiting.
func (s *snapshot) hasRoom() bool {
	if s.Paused || !s.Opened || s.joinable() != nil { // joinable: not sold out, not closed
		return false
	}
	return s.Method == config.MethodPassthrough || (s.behind() == 0 && s.Active < s.Capacity)
}

// secondsUntil is whole seconds from now to t, rounded up, at least 0.
func secondsUntil(now, t time.Time) int64 {
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
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
		if s := r.advance(ctx, q, r.soldOut(ctx, q)); s != nil && s.DrawPending {
			r.ackDraw(ctx, q)
		}
	}
}

// soldOut is the advance script's sold-out argument for q: "1" when every product of its sold_out_with
// has no stock left, "0" when some has, "" when unknown (no such list, no stock reader, a store error).
func (r *Room) soldOut(ctx context.Context, q *queue) string {
	s := q.snap.Load()
	if s == nil || len(s.SoldOutWith) == 0 || r.opts.Stock == nil {
		return ""
	}
	out, err := r.opts.Stock(ctx, s.SoldOutWith)
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Debug("reading the stock of sold_out_with failed", "queue", q.id, "error", err.Error())
		}
		return ""
	}
	if out {
		return "1"
	}
	return "0"
}

// refresh runs the inlet of q and stores the snapshot it returns (advance, without news of stock).
func (r *Room) refresh(ctx context.Context, q *queue) *snapshot { return r.advance(ctx, q, "") }

// advance runs the inlet of q and stores the snapshot it returns. A queue of the configuration file
// that has vanished from the store (Redis restarted empty, or deleted through the API) is recreated.
func (r *Room) advance(ctx context.Context, q *queue, soldOut string) *snapshot {
	q.mu.Lock()
	since, offset := q.lastRevocation, q.drawn.offset
	q.mu.Unlock()
	res := r.scripts.run(ctx, r.client, r.scripts.advance, q.keys, since, offset, soldOut, randomHex(),
		q.floorArg(), flag(r.opts.Store.WaitReplicas() > 0))
	if res.Err() != nil {
		if ctx.Err() == nil {
			r.logger.Debug("queue tick failed", "queue", q.id, "error", res.Err().Error())
		}
		return q.snap.Load() // keep serving the last snapshot while the store is away
	}
	if res.Int(0) == 1 {
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
	set := res.List(6)
	now := time.Now()
	s := &snapshot{
		Counter: res.Int(1), Serving: res.Int(2), Active: res.Int(3), Unclaimed: res.Int(4),
		StoreNow: time.UnixMilli(res.Int(5)), Taken: now, readAt: res.Int(10),
		Epoch: set.Str(0), Capacity: set.Int(1), ReleasePerMinute: set.Int(2),
		TokenTTL: time.Duration(set.Int(3)) * time.Second, PositionExpiry: time.Duration(set.Int(4)) * time.Second,
		AbandonAfter: time.Duration(set.Int(5)) * time.Second, Turnstile: set.Int(6) == 1, Paused: set.Int(7) == 1,
		Title: set.Str(8), Method: set.Str(9), OpensAt: msTime(set.Int(10)), JoinFrom: msTime(set.Int(11)),
		ClosesAt: msTime(set.Int(12)), Shuffle: set.Int(13) == 1, Opened: set.Int(14) > 0,
		Lottery: lottery{lo: set.Int(15), n: set.Int(16), seed: set.Str(17)},
		SoldOut: set.Int(18) == 1, SoldOutWith: splitList(set.Str(19)), Pool: set.Int(20), Moved: set.Int(21),
		SessionRenewal: set.Int(23) == 1, MaxSession: time.Duration(set.Int(24)) * time.Second,
		InviteOnly: set.Int(25) == 1, Invites: set.Int(26), InvitesUsed: set.Int(27),
		DrawPending: set.Str(28) == "0", PlacesPerIP: set.Int(30),
		ReportMoves: set.Int(31) != 0 || set.Int(32) != 0, GoneAfter: time.Duration(set.Int(33)) * time.Second,
	}
	restored := set.Int(29)
	if s.MaxSession < s.TokenTTL {
		s.MaxSession = s.TokenTTL // a queue written before sessions existed
	}
	if s.Method == "" {
		s.Method = config.MethodFIFO
	}
	early := set.Int(22)
	revs, dls := res.List(7), res.List(8)
	drawn := res.Str(9)
	for i := 0; i+1 < dls.Len(); i += 2 {
		at := s.StoreNow.Add(s.TokenTTL) // +inf: served, not claimed, no position expiry
		if f, err := strconv.ParseFloat(dls.Str(i+1), 64); err == nil && !math.IsInf(f, 0) {
			at = time.UnixMilli(int64(f))
		}
		s.Deadlines = append(s.Deadlines, deadline{index: dls.Int(i), at: at})
	}
	if err := errors.Join(res.Err(), set.Err(), revs.Err(), dls.Err()); err != nil {
		r.logger.Warn("queue tick: bad reply", "queue", q.id, "error", err.Error())
		return q.snap.Load()
	}
	q.mu.Lock()
	for i := 0; i+1 < revs.Len(); i += 2 {
		pos, at := revs.Int(i), revs.Int(i+1)
		r.revoked.Add(revocation{queue: q.id, epoch: s.Epoch, position: pos}, struct{}{})
		q.lastRevocation = max(q.lastRevocation, at)
	}
	q.drawn.add(s.Epoch, offset, drawn)
	s.Drawn = q.drawn.set
	if s.Method != config.MethodRandom {
		var ranks []int64
		s.Drawn.each(func(pos int64) {
			if r := s.Lottery.rank(pos); r > s.Serving {
				ranks = append(ranks, r)
			}
		})
		slices.Sort(ranks) // in position order already, unless a lottery reordered them
		s.OutOfTurn, s.outOfTurnRanks = int64(len(ranks)), ranks
	}
	if early != q.early {
		q.early, q.earlyAt = early, now
	}
	previous := q.snap.Load()
	grew := restored - q.restored
	q.restored = restored
	s.FullSessions = q.earlyAt.IsZero() || now.Sub(q.earlyAt) > s.TokenTTL
	s.ServingRate = q.meter.observe(s.Taken, s.Moved)
	q.mu.Unlock()
	q.joins.observe(s.Epoch, s.StoreNow.UnixMilli(), s.Counter)
	q.joinRate.observe(s.Epoch, s.StoreNow.UnixMilli(), s.Counter)
	if previous == nil {
		//nolint:gosec // a background read for the queue, not for the tick's caller
		go r.seedJoins(q, s.Epoch, s.Counter)
	}
	// What this replica knows was handed out: at least the counter it just read, within one epoch.
	if previous == nil || previous.Epoch != s.Epoch {
		q.seen.Store(s.Counter)
	} else {
		r.saw(q.id, s.Epoch, s.Counter)
	}
	if kept := q.newer(s); kept != s {
		return kept
	}
	if grew > 0 && previous != nil && previous.Epoch == s.Epoch {
		r.logger.Warn("queue positions were restored after the store lost them (a failover or a restart): "+
			"the counter resumes above the highest position a replica had seen", "queue", q.id, "positions", grew)
	}
	if s.Lottery.n > 0 && (previous == nil || previous.Lottery.seed != s.Lottery.seed) && previous != nil && !previous.Opened {
		sum := sha256.Sum256([]byte(s.Lottery.seed))
		r.logger.Info("queue opened: the pre-queue's order was drawn by lot", "queue", q.id,
			"prequeue", s.Lottery.n, "seed_sha256", hex.EncodeToString(sum[:]))
	}
	return s
}

// newer stores s as q's snapshot unless one the store answered later stands already, and returns the
// snapshot that stands. A tick and a refresh (an admin change, an invitation used) run their scripts
// in one order and may store what they read in the other: without this, the earlier read could
// stand until the next tick, and a visitor polling in between see their place served, then waiting
// again. A snapshot read more than a second before the standing one is stored all the same: the
// store's clock stepped back (a failover to another machine), and a race is microseconds apart.
func (q *queue) newer(s *snapshot) *snapshot {
	for {
		cur := q.snap.Load()
		if cur != nil && cur.Epoch == s.Epoch && s.readAt < cur.readAt && cur.readAt-s.readAt < int64(time.Second/time.Microsecond) {
			return cur
		}
		if q.snap.CompareAndSwap(cur, s) {
			return s
		}
	}
}

// msTime is a time stored in milliseconds; 0 is the zero time (none).
func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// splitList reads a list stored joined by ",".
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// randomHex is 32 random bytes in hex: a queue's secret (lib.lua), sent by every call that may create
// one.
func randomHex() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
