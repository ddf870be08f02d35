package store

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/config"
)

// Health pings the store periodically and decides, with hysteresis (docs/reference.md "Store"), whether
// it counts as degraded: FailuresToDegrade consecutive failed pings switch to degraded,
// SuccessesToRecover consecutive good ones switch back, and two switches are at least Cooldown apart so
// a flapping Redis does not flip the gateway back and forth.
type Health struct {
	ping     func(context.Context) error
	cfg      config.StoreHealth
	logger   *slog.Logger
	observe  func(up, degraded bool)
	now      func() time.Time
	up       atomic.Bool
	degraded atomic.Bool

	mu         sync.Mutex
	failures   int
	successes  int
	lastSwitch time.Time
}

// NewHealth builds a health check. observe, if not nil, is called after every ping with the latest
// result and state (the metrics edgeq_store_up and edgeq_store_degraded hang off it).
func NewHealth(ping func(context.Context) error, cfg config.StoreHealth, logger *slog.Logger, observe func(up, degraded bool)) *Health {
	h := &Health{ping: ping, cfg: cfg, logger: logger, observe: observe, now: time.Now}
	h.up.Store(true)
	return h
}

// Run pings every cfg.Interval until ctx ends. The first ping happens at once.
func (h *Health) Run(ctx context.Context) {
	ticker := time.NewTicker(h.cfg.Interval)
	defer ticker.Stop()
	for {
		pingCtx, cancel := context.WithTimeout(ctx, h.cfg.Interval)
		err := h.ping(pingCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.Record(err)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Record applies one ping result.
func (h *Health) Record(err error) {
	h.mu.Lock()
	up := err == nil
	h.up.Store(up)
	if up {
		h.failures, h.successes = 0, h.successes+1
	} else {
		h.failures, h.successes = h.failures+1, 0
	}
	now := h.now()
	cooled := h.lastSwitch.IsZero() || now.Sub(h.lastSwitch) >= h.cfg.Cooldown
	degraded := h.degraded.Load()
	switch {
	case !degraded && h.failures >= h.cfg.FailuresToDegrade && cooled:
		h.degraded.Store(true)
		h.lastSwitch = now
		h.logger.Warn("store degraded: Redis is not answering", "consecutive_failures", h.failures, "error", err)
	case degraded && h.successes >= h.cfg.SuccessesToRecover && cooled:
		h.degraded.Store(false)
		h.lastSwitch = now
		h.logger.Warn("store recovered", "consecutive_successes", h.successes)
	}
	degraded = h.degraded.Load()
	h.mu.Unlock()
	if h.observe != nil {
		h.observe(up, degraded)
	}
}

// Up reports the result of the latest ping.
func (h *Health) Up() bool { return h.up.Load() }

// Degraded reports whether the store currently counts as unavailable.
func (h *Health) Degraded() bool { return h.degraded.Load() }
