// Package waitroom is edgeq's virtual waiting room: queue positions handed out in arrival order, a
// serving position advanced by a capacity inlet, signed access tokens, and the gate step that requires
// one (docs/reference.md "Waiting room", "The queue gate").
//
// All shared state lives in Redis and changes only inside Lua scripts (scripts/*.lua). Each replica
// keeps a per-queue snapshot, refreshed by its inlet tick every ~250 ms, and answers polling from it;
// request ids carry their position (requestid.go), so a waiting visitor's poll costs no Redis call.
package waitroom

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/group"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/ratelimit"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
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
	// Check is the bot check of joins of queues with turnstile: true (challenge.provider); nil when
	// the provider is not configured.
	Check *botcheck.Check
	// MaxTokenTTL bounds how long a revocation must be remembered (validation caps token_ttl).
	MaxTokenTTL time.Duration
	// Tick is the inlet and snapshot period; 0 means DefaultTick.
	Tick time.Duration
	// Stock reports whether every one of the products has no stock left (queues[].sold_out_with); nil
	// when there is no stock to read. The tick asks it for each queue with such a list.
	Stock func(ctx context.Context, productIDs []string) (soldOut bool, err error)
	// ReportRetention is report.retention: how long the report's series are kept.
	ReportRetention time.Duration
	// Tracer makes the spans of the queue gate, joins and status polls (tracing.go); nil: tracing is
	// off.
	Tracer trace.Tracer
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
	addresses addressHashes // names client addresses for places_per_ip (places.go)
	logger    *slog.Logger
	responder *web.Responder

	mu     sync.RWMutex
	queues map[string]*queue // tracked queues
	// missing remembers ids looked up and not found, briefly, so random ids cannot make every request
	// a Redis call.
	missing *expirable.LRU[string, struct{}]
	// configured are the queues of the configuration file: recreated if they vanish from the store.
	configured atomic.Pointer[map[string]config.Queue]
	// bypass is the configured queues' bypass_cidrs.
	bypass atomic.Pointer[bypassList]

	revoked    *expirable.LRU[revocation, struct{}]
	heartbeats heartbeatBatch
	joins      *ratelimit.Redis
	polls      *ratelimit.Local
	limits     config.Limits

	tokensIssued *prometheus.CounterVec
	// sessionsRenewed counts tokens re-issued by session_renewal, bypassed counts requests let through
	// by bypass_cidrs, invites counts invitation visits by result.
	sessionsRenewed, bypassed, invites *prometheus.CounterVec
	renewals                           renewalBatch
	// tally counts what the report keeps (report.go); report writes it each tick.
	tally       *report.Tally
	report      report.Writer
	reportMarks reportMarks
	assigner    *group.Batcher[string, assignReq, placed]
	rateLimited *prometheus.CounterVec // by limit: join, places, status, turnstile

	// dropCheckTimes: no route checks (routes[].turnstile), so the time of a join's bot check, which
	// only a checked route reads from the visitor's token, is not kept with the place.
	dropCheckTimes atomic.Bool

	// settled is the store generation (a count of master changes) this replica has settled after
	// (failover.go); settle serialises settling.
	settled atomic.Uint64
	settle  sync.Mutex
}

// KeepCheckTimes says whether some route checks (routes[].turnstile; set at start and on each
// reload): only then is the time of a join's bot check kept with its place, to reach the token's
// tsv claim, which clears the visitor on checked routes. Without any, a token carries no tsv and a
// route checked later asks its visitors for a check. Kept by default.
func (r *Room) KeepCheckTimes(keep bool) { r.dropCheckTimes.Store(!keep) }

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
		addresses: newAddressHashes(opts.IDKey),
		logger:    opts.Logger,
		responder: opts.Responder,
		queues:    map[string]*queue{},
		missing:   expirable.NewLRU[string, struct{}](10_000, nil, time.Second),
		// A revocation must outlive the token it revokes; the bound on size keeps memory in check.
		revoked: expirable.NewLRU[revocation, struct{}](200_000, nil, opts.MaxTokenTTL+time.Minute),
		joins:   ratelimit.NewRedis(opts.Store.Client),
		polls:   ratelimit.NewLocal(100_000),
		tokensIssued: metrics.NewCounterVec("tokens_issued_total",
			"Access tokens issued, by queue.", "queue"),
		sessionsRenewed: metrics.NewCounterVec("sessions_renewed_total",
			"Access tokens re-issued by session_renewal, by queue.", "queue"),
		bypassed: metrics.NewCounterVec("queue_bypassed_total",
			"Gated requests let through by bypass_cidrs, by queue.", "queue"),
		invites: metrics.NewCounterVec("invites_total",
			"Invitation visits, by queue and result (joined, served, used, expired, unknown, refused, unconfirmed: the store's replicas did not confirm the use in time).", "queue", "result"),
		rateLimited: metrics.NewCounterVec("rate_limited_total",
			"Requests refused 429 by a per-IP limit, by limit (join, places, status, turnstile).", "limit"),
	}
	for _, limit := range []string{"join", "places", "status", "turnstile"} {
		r.rateLimited.WithLabelValues(limit) // present at 0, so rate() and alerts see the series
	}
	r.heartbeats.pending = map[string]map[int64]beat{}
	r.tally = report.NewTally()
	r.report = report.Writer{Client: opts.Store.Client, Keys: opts.Store.Keys, Retention: opts.ReportRetention, Logger: opts.Logger}
	r.settled.Store(opts.Store.Generation())
	r.assigner = r.newAssigner()
	r.limits = opts.Limits
	empty := map[string]config.Queue{}
	r.configured.Store(&empty)
	return r
}

// RateLimited counts the 429 answers of a per-IP limit outside the room in edgeq_rate_limited_total:
// the Turnstile step's limits.turnstile_per_ip_per_minute is counted as limit "turnstile".
func (r *Room) RateLimited(limit string) prometheus.Counter {
	return r.rateLimited.WithLabelValues(limit)
}

// Run drives every tracked queue until ctx ends: the inlet tick, heartbeat flushes, discovery of
// queues created on other replicas, and the revocation subscription.
func (r *Room) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { r.subscribeRevocations(ctx) })
	wg.Go(func() { r.assigner.Run(ctx) })
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
			report.FlushLast(ctx, r.flushReport)
			return
		case <-tick.C:
			r.flushRenewals(ctx)
			r.tickAll(ctx)
			r.flushReport(ctx)
			r.countLeavers(ctx)
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
	bypass := newBypassList(queues)
	r.bypass.Store(&bypass)
	var errs []error
	for _, q := range queues {
		if i := slices.IndexFunc(previous, func(p config.Queue) bool { return p.ID == q.ID }); i >= 0 && previous[i].Same(q) {
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
	GoneAfter        int64 // seconds, 0 off
	Turnstile        bool
	// A drop: times in unix ms (0 none), Prequeue in seconds.
	OpensAt, ClosesAt int64
	Prequeue          int64
	Shuffle           bool
	Method            string
	SoldOutWith       []string
	// Sessions and invitations: MaxSession in seconds.
	SessionRenewal bool
	MaxSession     int64
	InviteOnly     bool
	// PlacesPerIP bounds the unserved places one client address may hold (places.go); 0 none.
	PlacesPerIP int64
	// Pause is "" to keep the queue's paused state (the configuration file never changes it), "1" to
	// pause (nobody new is served; joins and tokens already issued go on) or "0" to resume.
	Pause string
}

func settingsOf(q config.Queue) settings {
	opens, _ := config.ParseQueueTime(q.OpensAt) // validated
	closes, _ := config.ParseQueueTime(q.ClosesAt)
	return settings{
		ID: q.ID, Title: q.Title, Capacity: int64(q.Capacity), ReleasePerMinute: int64(q.ReleasePerMinute),
		TokenTTL: int64(q.TokenTTL / time.Second), PositionExpiry: int64(q.PositionExpiry / time.Second),
		AbandonAfter: int64(q.AbandonAfter / time.Second), GoneAfter: int64(q.GoneAfter / time.Second), Turnstile: q.Turnstile,
		OpensAt: unixMs(opens), ClosesAt: unixMs(closes), Prequeue: int64(q.Prequeue / time.Second),
		Shuffle: q.Shuffle, Method: cmp.Or(q.Method, config.MethodFIFO), SoldOutWith: q.SoldOutWith,
		SessionRenewal: q.SessionRenewal, MaxSession: int64(q.MaxSession / time.Second), InviteOnly: q.InviteOnly,
		PlacesPerIP: int64(q.PlacesPerIP),
	}
}

// unixMs is t in unix milliseconds, 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// joinFrom is when joins start: prequeue before opens_at; 0 when the queue is not scheduled.
func (s settings) joinFrom() int64 {
	if s.OpensAt == 0 {
		return 0
	}
	return s.OpensAt - s.Prequeue*1000
}

var (
	errQueueExists   = errors.New("waitroom: queue exists")
	errQueueNotFound = errors.New("waitroom: queue not found")
)

// fingerprint identifies a configuration file's entry for a queue: the file's settings are written
// again only when it changes, so a replica that starts does not undo what the admin API set.
func (s settings) fingerprint() string {
	text := fmt.Appendf(nil, "%q|%d|%d|%d|%d|%d|%t|%q|%d|%d|%d|%t|%q|%q|%t|%d|%t", s.ID, s.Capacity,
		s.ReleasePerMinute, s.TokenTTL, s.PositionExpiry, s.AbandonAfter, s.Turnstile, s.Title, s.OpensAt,
		s.ClosesAt, s.Prequeue, s.Shuffle, s.Method, strings.Join(s.SoldOutWith, ","), s.SessionRenewal,
		s.MaxSession, s.InviteOnly)
	if s.PlacesPerIP != 0 {
		// Only when set: an entry written before the setting existed keeps its fingerprint, so an
		// upgrade does not write it again over what the admin API changed since.
		text = fmt.Appendf(text, "|%d", s.PlacesPerIP)
	}
	if s.GoneAfter != int64(config.DefaultGoneAfter/time.Second) {
		// Likewise: the default is written into an entry from before it existed without a new
		// fingerprint (upsert.lua).
		text = fmt.Appendf(text, "|g%d", s.GoneAfter)
	}
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:16])
}

// flag is a boolean as the scripts store it.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// upsert writes a queue's settings (mode create, update or file, see upsert.lua) and returns its
// epoch.
func (r *Room) upsert(ctx context.Context, mode string, s settings) (string, error) {
	var epoch [8]byte
	rand.Read(epoch[:])
	fingerprint := ""
	if mode == "file" {
		fingerprint = s.fingerprint()
	}
	res := r.scripts.run(ctx, r.client, r.scripts.upsert, queueKeys(r.keys, s.ID), mode, s.Capacity,
		s.ReleasePerMinute, s.TokenTTL, s.PositionExpiry, s.AbandonAfter, flag(s.Turnstile), s.Title, hex.EncodeToString(epoch[:]), s.Pause,
		fingerprint, s.OpensAt, s.joinFrom(), flag(s.Shuffle), s.ClosesAt, cmp.Or(s.Method, config.MethodFIFO),
		strings.Join(s.SoldOutWith, ","), randomHex(), flag(s.SessionRenewal), max(s.MaxSession, s.TokenTTL),
		flag(s.InviteOnly), s.PlacesPerIP, s.GoneAfter)
	code, gotEpoch, created := res.Int(0), res.Str(1), res.Int(2)
	if res.Err() != nil {
		return "", res.Err()
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

// The queues this replica ticks.

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
	delete(r.queues, id)
	r.mu.Unlock()
	r.reportMarks.forget(id)
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
