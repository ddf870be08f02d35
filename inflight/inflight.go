// Package inflight limits how many requests of a route are at the origin at once, across every
// replica (routes[].max_in_flight, hold; docs/reference.md "In-flight limits"). A request takes a lease
// on one of the route's slots in the store before it is forwarded and gives it back when the origin's
// answer is done. Over the limit it waits in line, first come first served across replicas, up to the
// route's hold.
//
// Leases expire: a replica that dies (SIGKILL, a lost machine) holds its slots for at most one lease
// time (Lease). A live replica renews the leases it holds every Lease/5, so a long origin request keeps
// its slot and a store that misses a few renewals (a failover, a slow moment) does not cost it.
//
// Waiting does not hammer the store: the script that frees a slot hands it to the first waiter itself
// and publishes that waiter's ticket id; only that waiter's replica wakes and confirms it (one call).
// Each waiter also polls every Poll, which keeps its place (a waiter whose replica died is dropped
// from the line after 3 polls missed) and catches a grant whose message was lost (a subscription
// reconnecting): a store call per waiter per second, not per release.
//
// The line counts the tickets of each client (Limit.PerClient, hold_per_client): one client cannot
// fill it and push everyone behind it past their hold. The store sees a client only as a hash.
package inflight

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/luascript"
)

// Lease and poll defaults (docs/reference.md, "In-flight limits").
const (
	// DefaultLease is how long a slot stays held without a renewal: what a dead replica costs. Ten
	// seconds against a renewal every two gives four renewals' slack for a store failover.
	DefaultLease = 10 * time.Second
	// DefaultPoll is how often a waiter asks the store, besides being woken when it is handed a slot.
	DefaultPoll = time.Second
)

// storeTimeout bounds the store calls that must outlast the visitor (giving a slot back, leaving the
// line); the store client's own timeouts usually end them much sooner.
const storeTimeout = 3 * time.Second

// ErrBusy: hold ran out (or was 0) before a slot was free.
var ErrBusy = errors.New("inflight: every slot is taken")

// ErrClientBusy: no slot was free and the client has Limit.PerClient requests in line already; the
// request did not wait. It is an ErrBusy.
var ErrClientBusy = fmt.Errorf("%w, and this client has as many requests in line as it may", ErrBusy)

// Options configures a Limiter.
type Options struct {
	Store  *store.Store
	Logger *slog.Logger
	// Lease is DefaultLease when 0; Poll is DefaultPoll when 0. Tests shorten them.
	Lease, Poll time.Duration
}

// Limiter holds the in-flight leases of one replica. It is safe for concurrent use.
type Limiter struct {
	client   redis.UniversalClient
	keys     store.Keys
	logger   *slog.Logger
	lease    time.Duration
	renew    time.Duration
	poll     time.Duration
	presence time.Duration // a waiter stays in line this long after its last poll; also the grant window
	channel  string

	mu      sync.Mutex
	waiting map[string]chan struct{} // ticket id -> its waiter's wake-up
	needed  chan struct{}            // closed by the first wait: Run subscribes from then on
	once    sync.Once
}

// New returns a limiter on opts.Store. Call Run for waiters to be woken as soon as they are handed a
// slot; without it they find out by polling.
func New(opts Options) *Limiter {
	l := &Limiter{
		client: opts.Store.Client, keys: opts.Store.Keys, logger: opts.Logger,
		lease: opts.Lease, poll: opts.Poll,
		waiting: map[string]chan struct{}{}, needed: make(chan struct{}),
	}
	if l.lease <= 0 {
		l.lease = DefaultLease
	}
	if l.poll <= 0 {
		l.poll = DefaultPoll
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	l.renew = l.lease / 5
	l.presence = 3 * l.poll
	l.channel = grantChannel(l.keys)
	return l
}

// Limit is a route's in-flight setting.
type Limit struct {
	Route string        // the route's name: its keys' hash tag
	Max   int           // max_in_flight, > 0
	Hold  time.Duration // how long a request may wait for a slot; 0: not at all
	// PerClient > 0: how many requests of one client may wait in line (hold_per_client); 0: any.
	PerClient int
}

// Acquire takes a slot of the route for one request, waiting in line up to lim.Hold when none is free.
// client names who sends the request (a token's request id, an address), "" for no one known: the
// line holds at most lim.PerClient requests of one client. It returns the lease and whether the
// request had to wait. Errors: ErrBusy when hold ran out, ErrClientBusy when the client's requests
// fill its share of the line, ctx's error when ctx ended first (the visitor left), any other error
// when the store could not be used. Store calls do not end with ctx: a visitor's hang-up must not pass
// for a store that did not answer.
func (l *Limiter) Acquire(ctx context.Context, lim Limit, client string) (lease *Lease, waited bool, err error) {
	t := ticket{l: l, keys: routeKeys(l.keys, lim.Route), id: ticketID(client), limit: lim.Max, perClient: lim.PerClient}
	wait := lim.Hold > 0
	var wake chan struct{}
	if wait {
		// Listening before the first call, so that a grant published right after it is not missed.
		wake = l.listen(t.id)
		defer l.forget(t.id)
	}
	code, err := t.acquire(wait)
	switch {
	case err != nil:
		return nil, false, err // a ticket the store may have queued leaves the line by itself (presence)
	case code == codeHeld:
		return l.held(t), false, nil
	case code == codeFull:
		return nil, false, ErrBusy
	case code == codeClientFull:
		return nil, false, ErrClientBusy
	}
	deadline := time.NewTimer(lim.Hold)
	defer deadline.Stop()
	poll := time.NewTicker(l.poll)
	defer poll.Stop()
	for {
		select {
		case <-wake:
		case <-poll.C:
		case <-deadline.C:
			_, _ = t.leave() // leave logs its failure: the place expires by itself
			return nil, true, ErrBusy
		case <-ctx.Done():
			_, _ = t.leave()
			return nil, true, ctx.Err()
		}
		code, err := t.acquire(true)
		if err != nil {
			go func() { _, _ = t.leave() }()
			return nil, true, err
		}
		if code == codeHeld {
			return l.held(t), true, nil
		}
	}
}

// ticket is one request's place in a route's line, and then its lease.
type ticket struct {
	l         *Limiter
	keys      []string
	id        string
	limit     int
	perClient int
}

func (t ticket) acquire(wait bool) (int64, error) {
	w := 0
	if wait {
		w = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	res, err := luascript.Ints(acquireScript.Run(ctx, t.l.client, t.keys, t.id, t.limit,
		t.l.lease.Milliseconds(), t.l.presence.Milliseconds(), w, t.l.channel, t.perClient).Result())
	if err != nil {
		return 0, err
	}
	if len(res) != 2 {
		return 0, luascript.ErrReply
	}
	return res[0], nil
}

// leave gives the ticket's slot back, or its place in line: a slot handed to it at the last moment
// goes on to the next waiter. It reports whether the ticket held a slot.
func (t ticket) leave() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	res, err := luascript.Ints(releaseScript.Run(ctx, t.l.client, t.keys, t.id, t.limit, t.l.presence.Milliseconds(), t.l.channel).Result())
	if err != nil {
		t.l.logger.Warn("in-flight slot not given back; it is free again when its lease or place in line expires",
			"key", t.keys[0], "error", err.Error())
		return false, err
	}
	return len(res) == 1 && res[0] == 1, nil
}

// Lease is a slot held by one request. Release it when the origin's answer is done.
type Lease struct {
	ticket
	stop chan struct{}
	once sync.Once
}

// held starts renewing a lease the store granted.
func (l *Limiter) held(t ticket) *Lease {
	lease := &Lease{ticket: t, stop: make(chan struct{})}
	go lease.renewUntilReleased()
	return lease
}

// Release gives the slot back; the first waiter, on any replica, gets it at once. Safe to call more
// than once.
func (s *Lease) Release() {
	s.once.Do(func() {
		close(s.stop)
		_, _ = s.leave() // leave logs its failure: the lease expires by itself
	})
}

// renewUntilReleased extends the lease every Lease/5 while the request is at the origin. A renewal
// that fails is tried again at the next tick; a lease found expired (the store missed every renewal
// for a whole lease time) is logged: its slot may be someone else's now.
func (s *Lease) renewUntilReleased() {
	tick := time.NewTicker(s.l.renew)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		res, err := luascript.Ints(renewScript.Run(ctx, s.l.client, s.keys, s.id, s.l.lease.Milliseconds()).Result())
		cancel()
		switch {
		case err != nil:
			s.l.logger.Warn("in-flight lease not renewed; trying again", "key", s.keys[0], "error", err.Error())
		case len(res) == 1 && res[0] == 0:
			s.l.logger.Warn("in-flight lease expired while its request was at the origin: the route may briefly "+
				"have more than max_in_flight requests there", "key", s.keys[0])
			return
		}
	}
}

// listen registers a waiter's wake-up, and asks Run to subscribe if it has not yet.
func (l *Limiter) listen(id string) chan struct{} {
	l.once.Do(func() { close(l.needed) })
	wake := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiting[id] = wake
	l.mu.Unlock()
	return wake
}

func (l *Limiter) forget(id string) {
	l.mu.Lock()
	delete(l.waiting, id)
	l.mu.Unlock()
}

// wake tells the waiter of a granted ticket, if it is on this replica, to poll now.
func (l *Limiter) wake(id string) {
	l.mu.Lock()
	wake := l.waiting[id]
	l.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// Run relays grants published by any replica's scripts to this replica's waiters until ctx ends. It
// subscribes only once some request has waited: a replica whose routes never fill up holds no
// subscription. Messages lost while the subscription reconnects are caught by the waiters' polls.
func (l *Limiter) Run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-l.needed:
	}
	store.Follow(ctx, l.client, l.channel, l.wake)
}

// newID returns a random ticket id: 128 bits, unguessable and unique across replicas.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ticketID returns the id of a request's ticket: "<client tag>.<random>" for a known client, by which
// the scripts count its tickets in line, else a random id alone. The tag is the first 64 bits of the
// client's SHA-256, in hex: the store never sees an address or a request id (itself a credential),
// and two of 100,000 clients in one line share a tag with a chance below one in a billion.
func ticketID(client string) string {
	if client == "" {
		return newID()
	}
	sum := sha256.Sum256([]byte(client))
	return hex.EncodeToString(sum[:8]) + "." + newID()
}
