// Package store connects edgeq to Redis: a go-redis UniversalClient built from the configuration (one
// server, Cluster or Sentinel, with TLS and auth), or the embedded in-process store when no Redis is
// configured, plus the key builders and the health check every other package relies on.
package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
)

// Store is the shared state of every edgeq replica.
type Store struct {
	Client redis.UniversalClient
	Keys   Keys

	embedded *miniredis.Miniredis // nil for a real Redis
	repl     *replication         // WAIT settings, master changes (replicas.go)
}

// Open connects to the Redis described by cfg, or starts the embedded store when cfg names none. It
// does not wait for Redis to answer: a store that is down at start makes edgeq not ready, not dead.
func Open(cfg config.Redis, logger *slog.Logger) (*Store, error) {
	keys := Keys{Prefix: cfg.KeyPrefix}
	if cfg.Embedded() {
		logger.Warn("redis.addr and redis.addrs are empty: using the embedded in-memory store; " +
			"it lives in this process only, keeps nothing across restarts and cannot be shared by replicas")
		return OpenEmbedded(keys)
	}
	opts := clientOptions(cfg)
	repl := newReplication(cfg.WaitReplicas, cfg.WaitTimeout, cfg.MasterName == "" && len(cfg.Addrs) > 0, logger)
	opts.OnConnect = repl.onConnect
	var client redis.UniversalClient
	switch {
	case cfg.MasterName != "":
		client = redis.NewFailoverClient(opts.Failover())
	case len(cfg.Addrs) > 0:
		// Any addrs without master_name means Cluster, even a single seed address: go-redis's own rule
		// (one address = one server) would silently break hash-slot routing behind a single endpoint.
		client = redis.NewClusterClient(opts.Cluster())
	default:
		client = redis.NewClient(opts.Simple())
	}
	return &Store{Client: client, Keys: keys, repl: repl}, nil
}

func clientOptions(cfg config.Redis) *redis.UniversalOptions {
	addrs := cfg.Addrs
	if cfg.Addr != "" {
		addrs = []string{cfg.Addr}
	}
	opts := &redis.UniversalOptions{
		Addrs:      addrs,
		MasterName: cfg.MasterName,
		Username:   cfg.Username,
		Password:   cfg.Password,
		DB:         cfg.DB,
		// Short timeouts: a gateway must fail fast and degrade rather than stack requests behind a slow
		// store. Scripts are O(1) or bounded, so 1 s is generous.
		DialTimeout:  2 * time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		// Enough connections for bursts of admissions on a few cores.
		PoolSize: 64,
	}
	if cfg.WaitReplicas > 0 {
		// A WAIT holds its connection's answer for up to wait_timeout; the answer must not time out first
		// (go-redis would send the whole pipeline again).
		opts.ReadTimeout = max(opts.ReadTimeout, cfg.WaitTimeout+time.Second)
	}
	if cfg.MasterName != "" {
		// Sentinel authentication uses the same credentials unless told otherwise.
		opts.SentinelUsername, opts.SentinelPassword = cfg.Username, cfg.Password
	}
	if cfg.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return opts
}

// OpenEmbedded starts an in-process store (miniredis) on a loopback port. The same Lua scripts run on it
// as on Redis; it is for trying edgeq and for tests, never for a deployment with more than one process.
func OpenEmbedded(keys Keys) (*Store, error) {
	m := miniredis.NewMiniRedis()
	// miniredis only ages TTLs on FastForward unless told to follow the clock; a gateway needs real expiry.
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded store: %w", err)
	}
	// miniredis runs one command at a time, so a burst queues for a connection and then for its answer;
	// in one process there is no network to fail fast from, so waiting is better than refusing
	// (go-redis's defaults, 4 s for a connection and 3 s for an answer, turn a busy demo into 503s).
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 64, PoolTimeout: 30 * time.Second,
		ReadTimeout: 30 * time.Second})
	return &Store{Client: client, Keys: keys, embedded: m, repl: newReplication(0, 0, false, nil)}, nil
}

// Wrap makes a Store of an existing client; tests use it to give each test its own key prefix.
func Wrap(client redis.UniversalClient, keys Keys) *Store {
	_, cluster := client.(*redis.ClusterClient)
	return &Store{Client: client, Keys: keys, repl: newReplication(0, 0, cluster, nil)}
}

// Addr returns the address of the embedded store, or "" for a real Redis.
func (s *Store) Addr() string {
	if s.embedded == nil {
		return ""
	}
	return s.embedded.Addr()
}

// Embedded reports whether this is the in-process store.
func (s *Store) Embedded() bool { return s.embedded != nil }

// Ping checks that the store answers (on a Cluster: every master); readiness and health use it.
func (s *Store) Ping(ctx context.Context) error {
	if cluster, ok := s.Client.(*redis.ClusterClient); ok {
		// A keyless PING reaches one node at random; every master holds some queues, products and
		// auctions, so each is asked, and the store is up only when all of them answer.
		err := cluster.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
			if err := master.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", master.Options().Addr, err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store ping: %w", err)
		}
		return nil
	}
	if err := s.Client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("store ping: %w", err)
	}
	return nil
}

// Persistence is what a Redis keeps on disk, from the least to the most: its writes since the last
// RDB snapshot are lost on a crash unless the append-only file is on.
type Persistence int

const (
	PersistNothing Persistence = iota // appendonly no, no save points: a restart loses everything
	PersistRDBOnly                    // save points only: a crash loses the writes since the last snapshot (minutes of sales)
	PersistAOF                        // the append-only file: at most a second (appendfsync everysec)
)

// Persistence reports what Redis says it keeps on disk (CONFIG GET appendonly, save). On a Cluster it
// is the least of every master: that master's slots (some products' stock, some queues) are what a
// crash would lose. An error means it could not tell (CONFIG is disabled on many managed services);
// the embedded store is never asked.
func (s *Store) Persistence(ctx context.Context) (Persistence, error) {
	cluster, ok := s.Client.(*redis.ClusterClient)
	if !ok {
		return persistence(ctx, s.Client)
	}
	// A ClusterClient sends CONFIG GET, which names no key, to whichever node it picks, so one call
	// answers for one node at random; each master is asked instead.
	var mu sync.Mutex
	least := PersistAOF
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
		p, err := persistence(ctx, master)
		mu.Lock()
		least = min(least, p)
		mu.Unlock()
		return err
	})
	if err != nil {
		return 0, err
	}
	return least, nil
}

func persistence(ctx context.Context, client redis.Cmdable) (Persistence, error) {
	aof, err := client.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return 0, err
	}
	save, err := client.ConfigGet(ctx, "save").Result()
	if err != nil {
		return 0, err
	}
	switch {
	case aof["appendonly"] == "yes":
		return PersistAOF, nil
	case strings.TrimSpace(save["save"]) != "":
		return PersistRDBOnly, nil
	}
	return PersistNothing, nil
}

// Close releases the client and stops the embedded store.
func (s *Store) Close() error {
	err := s.Client.Close()
	if s.embedded != nil {
		s.embedded.Close()
	}
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}

// redisLogger routes go-redis's own messages (dial retries and the like) into edgeq's structured log at
// debug level, instead of unstructured lines on stderr. Store health reports outages at warn level.
type redisLogger struct{ logger *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.logger.Log(ctx, slog.LevelDebug, "redis client: "+fmt.Sprintf(format, v...))
}

// RouteClientLogs sends go-redis's process-wide log output to logger. go-redis keeps one logger per
// process, so only the program's main wiring calls this, once.
func RouteClientLogs(logger *slog.Logger) {
	redis.SetLogger(redisLogger{logger: logger})
}
