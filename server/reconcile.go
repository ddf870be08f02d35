package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/store"
)

// Reconcile runs `edgeq reconcile`: with the configuration at path, it first writes what the ledger
// lacks (for at most wait: the replicas' ledger workers may be down after an incident; 0 writes
// nothing), then compares the store with the ledger.
func Reconcile(ctx context.Context, path string, wait time.Duration, logger *slog.Logger) (*admission.Reconciliation, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("configuration: %s", config.OneLine(err))
	}
	if cfg.Ledger.PostgresURL == "" {
		return nil, errors.New("ledger.postgres_url is not set: there is no ledger to compare with")
	}
	st, err := commandStore(cfg, "reconcile needs redis.addr or redis.addrs", logger)
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Close() }()
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	led, err := ledger.Open(openCtx, cfg.Ledger.PostgresURL)
	cancel()
	if err != nil {
		return nil, err
	}
	defer led.Close()
	svc := admission.New(admission.Options{Store: st, Ledger: led, Logger: logger})
	if wait > 0 { // -wait 0: compare as things stand
		catchCtx, cancel := context.WithTimeout(ctx, wait)
		_, err = svc.CatchUpLedger(catchCtx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = nil // out of time: what is still unwritten shows as a difference
		}
		if err != nil {
			return nil, err
		}
	}
	return svc.Reconcile(ctx)
}

// commandStore opens the store for a command that runs beside the serving processes (`edgeq reconcile`,
// `edgeq report`): a Redis, never the embedded store, which lives inside a serving process. why says
// what the command needs instead.
func commandStore(cfg *config.Config, why string, logger *slog.Logger) (*store.Store, error) {
	if cfg.Redis.Embedded() {
		return nil, errors.New("the embedded store lives inside the serving process: " + why)
	}
	st, err := store.Open(cfg.Redis, logger)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return st, nil
}
