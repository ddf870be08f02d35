// Package ledger is edgeq's durable record in PostgreSQL (docs/reference.md "Ledger"): every admission,
// settlement, bid and withdrawal, one row per id, written behind the Redis fast path by the event
// worker (admission/ledger.go) and read by the admin history lists and `edgeq reconcile`.
//
// The ledger knows no kind: each admission kind registers its table (RegisterTable, tables.go) with
// its migrations and the function that writes its rows, and reads it with Query. edgeq's own
// migrations (migrations/: what every table shares, edgeq_state_rank) are applied first, then the
// tables', each once, in order, under an advisory lock so that replicas starting together do not
// race. A batch's rows of every table are written in one transaction.
package ledger

// The ledger's batch, its connection pool and its migrations. Writes are in write.go, the helpers of
// a table's reads in read.go, registered tables in tables.go.

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key held while migrating ("edgeq" in ASCII).
const migrationLock = 0x6564676571

// Batch is what one write puts in the ledger: rows of registered tables (RegisterTable), of any
// tables and owners, in any order, repeats allowed. Each table's Write gets its own.
type Batch struct {
	Rows []Row
}

// Len is the number of events in the batch.
func (b Batch) Len() int { return len(b.Rows) }

// Split splits the batch into batches of one row each (to write them one by one).
func (b Batch) Split() []Batch {
	out := make([]Batch, 0, b.Len())
	for _, row := range b.Rows {
		out = append(out, Batch{Rows: []Row{row}})
	}
	return out
}

// Ledger is a connection pool to the ledger's database.
type Ledger struct {
	pool     *pgxpool.Pool
	migrated atomic.Bool
}

// New makes the pool without connecting: a ledger whose server is down at start is migrated by the
// first write that reaches it.
func New(url string) (*Ledger, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("ledger.postgres_url: %w", err)
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &Ledger{pool: pool}, nil
}

// Open connects and applies the migrations the database lacks.
func Open(ctx context.Context, url string) (*Ledger, error) {
	l, err := New(url)
	if err != nil {
		return nil, err
	}
	if err := l.Migrate(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Migrate applies the migrations the database lacks (once per Ledger).
func (l *Ledger) Migrate(ctx context.Context) error {
	if l.migrated.Load() {
		return nil
	}
	if err := l.migrate(ctx); err != nil {
		return err
	}
	l.migrated.Store(true)
	return nil
}

// Close closes the pool.
func (l *Ledger) Close() { l.pool.Close() }

// Version is the number of the newest of edgeq's own migrations the database has (a registered
// table's: TableVersion).
func (l *Ledger) Version(ctx context.Context) (int, error) {
	var v int
	err := l.pool.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM edgeq_schema_migrations").Scan(&v)
	return v, err
}

func (l *Ledger) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	// A registered table's misnamed migration is found before connecting: it is a start-up error
	// even when PostgreSQL cannot be reached.
	plans, err := tablePlans()
	if err != nil {
		return err
	}
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("ledger: connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("ledger: lock for migrations: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS edgeq_schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("ledger: migrations table: %w", err)
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("ledger: migration %s has no version number", base)
		}
		sql, _ := migrations.ReadFile(name)
		err = applyOnce(ctx, conn, string(sql),
			"SELECT EXISTS (SELECT 1 FROM edgeq_schema_migrations WHERE version = $1)",
			"INSERT INTO edgeq_schema_migrations (version, name) VALUES ($1, $2)", version, base)
		if err != nil {
			return fmt.Errorf("ledger: migration %s: %w", base, err)
		}
	}
	return migrateTables(ctx, conn, plans)
}

// applyOnce runs a migration's SQL and inserts its bookkeeping row in one transaction, unless the
// query done says it ran already. row is the bookkeeping row's values, the file's name last; done
// takes the others (the migration's key). The caller holds the migration lock.
func applyOnce(ctx context.Context, conn *pgxpool.Conn, sql, done, insert string, row ...any) error {
	var ran bool
	if err := conn.QueryRow(ctx, done, row[:len(row)-1]...).Scan(&ran); err != nil || ran {
		return err
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insert, row...)
		return err
	})
}
