// Package ratelimit limits requests per client with GCRA (the generic cell rate algorithm, as in
// go-redis/redis_rate): on Redis for limits that must hold across replicas, in process for limits on
// hot polling paths where a Redis round trip per request would defeat the point.
package ratelimit

import (
	"context"
	"embed"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// gcra takes one request from a budget (internal/store/luascript: the clock, lib.lua, gcra.lua).
var gcra = luascript.From(scriptFiles, "scripts").Script("gcra.lua")

// Limit is a rate: PerMinute requests a minute, with bursts of Burst at once. PerMinute 0 is no limit.
type Limit struct {
	PerMinute int
	Burst     int
}

// PerMinute is a limit of n a minute that allows the whole minute's worth at once.
func PerMinute(n int) Limit { return Limit{PerMinute: n, Burst: n} }

func (l Limit) interval() time.Duration { return time.Minute / time.Duration(l.PerMinute) }

func (l Limit) burst() int {
	if l.Burst < 1 {
		return 1
	}
	return l.Burst
}

// Redis limits on shared state: every replica counts against the same budget.
type Redis struct {
	client redis.Scripter
}

// NewRedis returns a limiter on client.
func NewRedis(client redis.Scripter) *Redis { return &Redis{client: client} }

// Allow takes one request from key's budget. When refused, retryAfter says when to come back.
func (r *Redis) Allow(ctx context.Context, key string, l Limit) (ok bool, retryAfter time.Duration, err error) {
	if l.PerMinute <= 0 {
		return true, 0, nil
	}
	res, err := gcra.Run(ctx, r.client, []string{key}, l.interval().Milliseconds(), l.burst()).Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(res) != 2 {
		return false, 0, redis.Nil
	}
	return res[0] == 1, time.Duration(res[1]) * time.Millisecond, nil
}

// Local limits in process, per replica: the budget of a client multiplies with the replicas its
// requests spread over. Clients are kept in a bounded LRU.
type Local struct {
	mu   sync.Mutex
	tats *expirable.LRU[string, time.Time]
	now  func() time.Time
}

// NewLocal returns an in-process limiter tracking up to size clients.
func NewLocal(size int) *Local {
	return &Local{tats: expirable.NewLRU[string, time.Time](size, nil, 10*time.Minute), now: time.Now}
}

// Allow takes one request from key's budget.
func (r *Local) Allow(key string, l Limit) (ok bool, retryAfter time.Duration) {
	if l.PerMinute <= 0 {
		return true, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	interval := l.interval()
	tat, found := r.tats.Get(key)
	if !found || tat.Before(now) {
		tat = now
	}
	newTAT := tat.Add(interval)
	allowAt := newTAT.Add(-interval * time.Duration(l.burst()))
	if now.Before(allowAt) {
		return false, allowAt.Sub(now)
	}
	r.tats.Add(key, newTAT)
	return true, 0
}

// ClientKey is the limited identity of a client address: the address for IPv4, the /64 network for
// IPv6 (one subscriber usually holds a whole /64).
func ClientKey(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.Unmap().String()
}
