package report

import (
	"context"
	"embed"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

var flushScript = luascript.From(scriptFiles, "scripts").Script("flush.lua")

// counted are the series a Scope counts with atomics: those a request may add to. Refusals and
// waiting times go through a map.
var counted = [...]string{Joined, Served, GaveUp, TurnedAwaySoldOut, TurnedAwayClosed, Completed, Abandoned, Expired,
	Revoked, TurnstilePassed, TurnstileFailed, Admitted, Committed, Released, Cancelled, Restocked, Accepted}

var countedIndex = func() map[string]int {
	m := make(map[string]int, len(counted))
	for i, name := range counted {
		m[name] = i
	}
	return m
}()

// Tally is one replica's counts since its last flush, by scope. Its memory is bounded by the scopes
// the replica knows (queues, products, auctions and registered scopes' owners that exist) and, per
// scope, the refusal codes and the waiting-time buckets seen within one tick.
type Tally struct {
	mu     sync.RWMutex
	scopes map[scopeKey]*Scope
}

type scopeKey struct {
	kind Kind
	id   string
}

// NewTally returns an empty tally.
func NewTally() *Tally { return &Tally{scopes: map[scopeKey]*Scope{}} }

// Scope is the counts of one queue, product, auction or owner of a registered scope (RegisterScope).
type Scope struct {
	n       [len(counted)]atomic.Int64
	mu      sync.Mutex
	other   map[string]int64 // "refused:<CODE>", "w:<bucket>", "u:<bucket>"
	touched atomic.Bool
}

// Scope returns the counts of one scope, made on first use. Callers name scopes that exist (a
// tracked queue, a known product), so that a client sending made-up ids cannot grow the tally.
func (t *Tally) Scope(kind Kind, id string) *Scope {
	k := scopeKey{kind, id}
	t.mu.RLock()
	s := t.scopes[k]
	t.mu.RUnlock()
	if s != nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s = t.scopes[k]; s == nil {
		s = &Scope{}
		t.scopes[k] = s
	}
	return s
}

// Add counts n of a series. A series outside counted goes through the map (slower, never wrong).
func (s *Scope) Add(series string, n int64) {
	if i, ok := countedIndex[series]; ok {
		s.n[i].Add(n)
		return
	}
	s.addOther(series, n)
}

// Refuse counts one refusal of code.
func (s *Scope) Refuse(code string) { s.addOther(Refused(code), 1) }

// Wait counts one waiting time (a served visitor's token time minus its join time).
func (s *Scope) Wait(d time.Duration) { s.addOther("w:"+strconv.Itoa(WaitBucket(d)), 1) }

// WaitUnserved counts the wait of a visitor who was never served (gave up, or turned away at sell-out
// or close), up to the moment the visitor left or the drop ended: with the served visitors' waits it
// makes everyone's.
func (s *Scope) WaitUnserved(d time.Duration) { s.addOther("u:"+strconv.Itoa(WaitBucket(d)), 1) }

// Touch asks the next flush to write the scope's gauges even when nothing was counted (a product
// created or restocked: its stock changed).
func (s *Scope) Touch() { s.touched.Store(true) }

func (s *Scope) addOther(key string, n int64) {
	s.mu.Lock()
	if s.other == nil {
		s.other = map[string]int64{}
	}
	s.other[key] += n
	s.mu.Unlock()
}

// take empties the scope and returns what it held, as (series, count) pairs.
func (s *Scope) take() (pairs []any, touched bool) {
	for i := range s.n {
		if n := s.n[i].Swap(0); n != 0 {
			pairs = append(pairs, counted[i], n)
		}
	}
	s.mu.Lock()
	other := s.other
	s.other = nil
	s.mu.Unlock()
	for k, n := range other {
		pairs = append(pairs, k, n)
	}
	return pairs, s.touched.Swap(false)
}

// putBack returns pairs a failed flush could not write: the next tick writes them.
func (s *Scope) putBack(pairs []any) {
	for i := 0; i+1 < len(pairs); i += 2 {
		s.Add(pairs[i].(string), pairs[i+1].(int64))
	}
}

// Extra is what a scope's owner adds to a flush (flush.lua's ARGV describes each).
type Extra struct {
	Aux      string // KEYS[3]: a hash Moves reads, or the key holding AuxGauge
	Gauges   string // "name=value;..." sampled now
	Moves    string // "series=field;..." counters of Aux moved into series
	AuxGauge string // the gauge read from Aux
	Firsts   string // series whose first count of the day is timed
	Zeros    string // gauges whose fall to zero is timed
	Peaks    string // gauges whose minute keeps its highest value, not its last
	// Always writes the gauges (and moves) even when this replica counted nothing: a queue's tick.
	Always bool
}

// Writer writes tallies into the store.
type Writer struct {
	Client    redis.UniversalClient
	Keys      store.Keys
	Retention time.Duration
	Logger    *slog.Logger
}

// FlushLast runs flush once more when a replica stops: with a second's grace detached from the ended
// ctx, so what it counted since its last tick is written while the store may still answer.
func FlushLast(ctx context.Context, flush func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	flush(ctx)
}

// Flush writes every scope of kind with something to write, one script call each. extra gives a
// scope's gauges and the like (nil: none). A scope whose call fails keeps its counts for the next tick.
func (w Writer) Flush(ctx context.Context, t *Tally, kind Kind, extra func(id string) Extra) {
	t.mu.RLock()
	scopes := maps.Clone(t.scopes)
	t.mu.RUnlock()
	now := time.Now()
	day := dayStart(now)
	expireAt := day.Add(24*time.Hour + max(w.Retention, time.Hour)).Unix()
	for k, s := range scopes {
		if k.kind != kind {
			continue
		}
		pairs, touched := s.take()
		var x Extra
		if extra != nil {
			x = extra(k.id)
		}
		if len(pairs) == 0 && !touched && !x.Always {
			continue
		}
		keys := []string{dayKey(w.Keys, kind, k.id, day), quarterKey(w.Keys, kind, k.id, day)}
		if x.Aux != "" {
			keys = append(keys, x.Aux)
		}
		args := append([]any{day.UnixMilli(), expireAt, x.Gauges, x.Moves, x.AuxGauge, x.Firsts, x.Zeros, x.Peaks}, pairs...)
		if err := flushScript.Run(ctx, w.Client, keys, args...).Err(); err != nil {
			s.putBack(pairs)
			if touched {
				s.Touch()
			}
			if ctx.Err() == nil && w.Logger != nil {
				w.Logger.Debug("writing the report's counts failed; kept for the next tick", "scope", string(kind)+":"+k.id,
					"error", err.Error())
			}
		}
	}
}
