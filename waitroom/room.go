// Package waitroom is edgeq's virtual waiting room: queue positions handed out in arrival order, a
// serving position advanced by a capacity inlet, signed access tokens, and the gate step that requires
// one (seed 004's waiting room with seed 000's capacity-limited active zone).
//
// All shared state lives in Redis and changes only inside Lua scripts (scripts/*.lua). Each replica
// keeps a per-queue snapshot, refreshed by its inlet tick every ~250 ms, and answers polling from it;
// request ids carry their position (requestid.go), so a waiting visitor's poll costs no Redis call.
package waitroom

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ratelimit"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/turnstile"
	"github.com/edgeq/edgeq/internal/web"
)

// Options configures a Room.
type Options struct {
	Store     *store.Store
	Keyring   *token.Keyring
	Verifier  *token.Verifier
	Issuer    string
	IDKey     []byte // MAC key of request ids (derived from identity.secret, else from the signing key)
	Prefix    string // server.prefix
	Cookies   web.Cookies
	Limits    config.Limits
	Responder *web.Responder
	Logger    *slog.Logger
	// Turnstile checks joins of queues with turnstile: true; nil when Turnstile is not configured.
	Turnstile *turnstile.Client
	// MaxTokenTTL bounds how long a revocation must be remembered (validation caps token_ttl).
	MaxTokenTTL time.Duration
	// Tick is the inlet and snapshot period; 0 means DefaultTick.
	Tick time.Duration
}

// DefaultTick is how often every replica runs the inlet and refreshes its snapshots.
const DefaultTick = 250 * time.Millisecond

// Room runs the queues.
type Room struct {
	opts      Options
	client    redis.UniversalClient
	keys      store.Keys
	scripts   scriptSet
	ids       requestIDs
	logger    *slog.Logger
	responder *web.Responder

	mu     sync.RWMutex
	queues map[string]*queue // tracked queues
	// missing remembers ids looked up and not found, briefly, so random ids cannot make every request
	// a Redis call.
	missing *expirable.LRU[string, struct{}]
	// configured are the queues of the configuration file: recreated if they vanish from the store.
	configured atomic.Pointer[map[string]config.Queue]

	revoked    *expirable.LRU[revocation, struct{}]
	heartbeats heartbeatBatch
	joins      *ratelimit.Redis
	polls      *ratelimit.Local
	limits     config.Limits

	tokensIssued *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec // by limit: join, status
}

// revocation names one revoked token: the queue, the queue's epoch and the position.
type revocation struct {
	queue, epoch string
	position     int64
}

// New builds a room. Run must be running for queues to advance.
func New(opts Options) *Room {
	if opts.Tick == 0 {
		opts.Tick = DefaultTick
	}
	if opts.MaxTokenTTL == 0 {
		opts.MaxTokenTTL = config.MaxTokenTTL
	}
	r := &Room{
		opts:      opts,
		client:    opts.Store.Client,
		keys:      opts.Store.Keys,
		scripts:   loadScripts(),
		ids:       newRequestIDs(opts.IDKey),
		logger:    opts.Logger,
		responder: opts.Responder,
		queues:    map[string]*queue{},
		missing:   expirable.NewLRU[string, struct{}](10_000, nil, time.Second),
		// A revocation must outlive the token it revokes; the bound on size keeps memory in check.
		revoked: expirable.NewLRU[revocation, struct{}](200_000, nil, opts.MaxTokenTTL+time.Minute),
		joins:   ratelimit.NewRedis(opts.Store.Client),
		polls:   ratelimit.NewLocal(100_000),
		tokensIssued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgeq", Name: "tokens_issued_total", Help: "Access tokens issued, by queue.",
		}, []string{"queue"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgeq", Name: "rate_limited_total", Help: "Requests refused 429 by a per-IP limit, by limit (join, status).",
		}, []string{"limit"}),
	}
	for _, limit := range []string{"join", "status"} {
		r.rateLimited.WithLabelValues(limit) // present at 0, so rate() and alerts see the series
	}
	r.heartbeats.pending = map[string]map[int64]struct{}{}
	r.limits = opts.Limits
	empty := map[string]config.Queue{}
	r.configured.Store(&empty)
	return r
}

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

// Run drives every tracked queue until ctx ends: the inlet tick, heartbeat flushes, discovery of
// queues created on other replicas, and the revocation subscription.
func (r *Room) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { r.subscribeRevocations(ctx) })
	tick := time.NewTicker(r.opts.Tick)
	defer tick.Stop()
	flush := time.NewTicker(time.Second)
	defer flush.Stop()
	discover := time.NewTicker(5 * time.Second)
	defer discover.Stop()
	r.discover(ctx)
	r.tickAll(ctx)
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
			r.tickAll(ctx)
		case <-flush.C:
			r.flushHeartbeats(ctx)
		case <-discover.C:
			r.discover(ctx)
		}
	}
}

// Apply makes the store match the configuration file's queues: at start every queue is written, on a
// reload only those whose settings changed (so a change made through the admin API survives a reload
// that did not touch that queue). Routes are checked against the file, so its queues always exist.
func (r *Room) Apply(ctx context.Context, queues []config.Queue, previous []config.Queue) error {
	byID := make(map[string]config.Queue, len(queues))
	for _, q := range queues {
		byID[q.ID] = q
	}
	r.configured.Store(&byID)
	var errs []error
	for _, q := range queues {
		if i := slices.IndexFunc(previous, func(p config.Queue) bool { return p.ID == q.ID }); i >= 0 && previous[i] == q {
			r.track(q.ID)
			continue
		}
		if _, err := r.upsert(ctx, "file", settingsOf(q)); err != nil {
			errs = append(errs, fmt.Errorf("queue %s: %w", q.ID, err))
			continue
		}
		r.track(q.ID)
	}
	return errors.Join(errs...)
}

// settings are a queue's settings as the scripts store them.
type settings struct {
	ID               string
	Title            string
	Capacity         int64
	ReleasePerMinute int64
	TokenTTL         int64 // seconds
	PositionExpiry   int64 // seconds, 0 never
	AbandonAfter     int64 // seconds, 0 off
	Turnstile        bool
	// Pause is "" to keep the queue's paused state (the configuration file never changes it), "1" to
	// pause (nobody new is served; joins and tokens already issued go on) or "0" to resume.
	Pause string
}

func settingsOf(q config.Queue) settings {
	return settings{
		ID: q.ID, Title: q.Title, Capacity: int64(q.Capacity), ReleasePerMinute: int64(q.ReleasePerMinute),
		TokenTTL: int64(q.TokenTTL / time.Second), PositionExpiry: int64(q.PositionExpiry / time.Second),
		AbandonAfter: int64(q.AbandonAfter / time.Second), Turnstile: q.Turnstile,
	}
}

var (
	errQueueExists   = errors.New("waitroom: queue exists")
	errQueueNotFound = errors.New("waitroom: queue not found")
)

// fingerprint identifies a configuration file's entry for a queue: the file's settings are written
// again only when it changes, so a replica that starts does not undo what the admin API set.
func (s settings) fingerprint() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%q|%d|%d|%d|%d|%d|%t|%q", s.ID, s.Capacity, s.ReleasePerMinute,
		s.TokenTTL, s.PositionExpiry, s.AbandonAfter, s.Turnstile, s.Title))
	return hex.EncodeToString(sum[:16])
}

// upsert writes a queue's settings (mode create, update or file, see upsert.lua) and returns its
// epoch.
func (r *Room) upsert(ctx context.Context, mode string, s settings) (string, error) {
	var epoch [8]byte
	rand.Read(epoch[:])
	turnstile := 0
	if s.Turnstile {
		turnstile = 1
	}
	fingerprint := ""
	if mode == "file" {
		fingerprint = s.fingerprint()
	}
	res := r.scripts.run(ctx, r.client, r.scripts.upsert, queueKeys(r.keys, s.ID), mode, s.Capacity,
		s.ReleasePerMinute, s.TokenTTL, s.PositionExpiry, s.AbandonAfter, turnstile, s.Title, hex.EncodeToString(epoch[:]), s.Pause,
		fingerprint)
	code, gotEpoch, created := res.int(0), res.str(1), res.int(2)
	if res.err != nil {
		return "", res.err
	}
	switch code {
	case 1:
		return "", errQueueExists
	case 2:
		return "", errQueueNotFound
	}
	if created == 1 {
		// Outside the queue's hash tag, so not in the script: the index only helps listing, and a
		// listing checks each queue still exists.
		if err := r.client.SAdd(ctx, queueIndexKey(r.keys), s.ID).Err(); err != nil {
			return gotEpoch, err
		}
	}
	r.track(s.ID)
	r.refresh(ctx, r.tracked(s.ID))
	return gotEpoch, nil
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

// rateMeter measures how fast the serving position moves, over the last minute.
type rateMeter struct {
	samples []rateSample
}

type rateSample struct {
	at      time.Time
	serving int64
}

const rateWindow = time.Minute

// observe records a sample and returns positions per second over the window (0 when unknown).
func (m *rateMeter) observe(at time.Time, serving int64) float64 {
	m.samples = append(m.samples, rateSample{at, serving})
	cut := 0
	for cut < len(m.samples)-1 && at.Sub(m.samples[cut].at) > rateWindow {
		cut++
	}
	m.samples = m.samples[cut:]
	first := m.samples[0]
	elapsed := at.Sub(first.at).Seconds()
	if elapsed < 2 || serving < first.serving {
		return 0
	}
	return float64(serving-first.serving) / elapsed
}

// eta estimates the seconds until a visitor with ahead visitors in front is served; -1 when unknown.
func (s *snapshot) eta(ahead int64) int64 {
	if ahead <= 0 {
		return 0
	}
	if s.ServingRate <= 0 {
		return -1
	}
	return int64(float64(ahead)/s.ServingRate + 0.999)
}

// heartbeatBatch collects the positions that polled since the last flush, per queue.
type heartbeatBatch struct {
	mu      sync.Mutex
	pending map[string]map[int64]struct{}
}

// heartbeat records that a waiting visitor is still there; only queues that skip abandoned waiters
// need it. It is written to the store in batches, once a second per replica.
func (r *Room) heartbeat(queueID string, s *snapshot, pos int64) {
	if s.AbandonAfter <= 0 || pos <= s.Serving {
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
			if res := r.scripts.run(ctx, r.client, r.scripts.heartbeat, queueKeys(r.keys, id), args...); res.err != nil &&
				!errors.Is(res.err, errReply) {
				r.logger.Debug("heartbeat flush failed", "queue", id, "error", res.err.Error())
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

// subscribeRevocations listens for finished tokens announced by any replica. Messages lost while
// disconnected are caught up by the inlet tick, which reads the queue's revocation set.
func (r *Room) subscribeRevocations(ctx context.Context) {
	sub := r.client.Subscribe(ctx, revocationChannel(r.keys))
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			if rev, ok := parseRevocation(msg.Payload); ok {
				r.revoked.Add(rev, struct{}{})
			}
		}
	}
}

func formatRevocation(rev revocation) string {
	return rev.queue + " " + rev.epoch + " " + strconv.FormatInt(rev.position, 10)
}

func parseRevocation(s string) (revocation, bool) {
	parts := strings.Split(s, " ")
	if len(parts) != 3 {
		return revocation{}, false
	}
	pos, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !config.ID.MatchString(parts[0]) {
		return revocation{}, false
	}
	return revocation{queue: parts[0], epoch: parts[1], position: pos}, true
}

// finish ends a visitor's session (COMPLETED or ABANDONED) and, when that revokes a token, tells every
// replica at once.
func (r *Room) finish(ctx context.Context, queueID, epoch string, pos int64, final State) (State, error) {
	res := r.scripts.run(ctx, r.client, r.scripts.finish, queueKeys(r.keys, queueID), pos, epoch, int(final),
		(r.opts.MaxTokenTTL + time.Minute).Milliseconds())
	code, state, revokedAt := res.int(0), State(res.int(1)), res.int(2)
	if res.err != nil {
		return 0, res.err
	}
	switch code {
	case 1:
		return 0, errRequestNotFound
	case 2:
		return state, errNotServed
	case 3:
		return state, errAlreadyFinished
	}
	if revokedAt > 0 {
		rev := revocation{queue: queueID, epoch: epoch, position: pos}
		r.revoked.Add(rev, struct{}{})
		if err := r.client.Publish(ctx, revocationChannel(r.keys), formatRevocation(rev)).Err(); err != nil {
			r.logger.Warn("revocation publish failed; replicas will learn it from their next tick", "error", err.Error())
		}
	}
	if q := r.tracked(queueID); q != nil {
		r.refresh(ctx, q)
	}
	return state, nil
}

var (
	errRequestNotFound = errors.New("waitroom: request not found")
	errNotServed       = errors.New("waitroom: not served yet")
	errAlreadyFinished = errors.New("waitroom: already finished")
)

// isRevoked reports whether the token of a position has been completed or abandoned.
func (r *Room) isRevoked(queueID, epoch string, pos int64) bool {
	return r.revoked.Contains(revocation{queue: queueID, epoch: epoch, position: pos})
}

// Handler helpers shared by the endpoints and the gate.

func (r *Room) cookieName(kind, queueID string) string { return "edgeq_" + kind + "_" + queueID }

func (r *Room) waitURL(queueID, returnTo string) string {
	return r.opts.Prefix + "/wait/" + queueID + "?return=" + url.QueryEscape(returnTo)
}

// requestFromCookie returns the visitor's position in queueID from the request cookie, if the cookie
// holds a genuine request id of the queue's current epoch.
func (r *Room) requestFromCookie(req *http.Request, queueID string, s *snapshot) (id string, pos int64, ok bool) {
	c, err := req.Cookie(r.cookieName("rq", queueID))
	if err != nil {
		return "", 0, false
	}
	pos, ok = r.ids.position(queueID, s.Epoch, c.Value)
	if !ok {
		return "", 0, false
	}
	return c.Value, pos, true
}
