// Package ledger is edgeq's durable record in PostgreSQL (seed 001, CONTRACT 10.3): every admission,
// settlement, bid and withdrawal, one row per id, written behind the Redis fast path by the event
// worker (admission/ledger.go) and read by the admin history lists and `edgeq reconcile`.
//
// edgeq owns its tables (edgeq_*): they are created and migrated at start from the SQL files embedded
// in migrations/, each applied once, in order, under an advisory lock so that replicas starting
// together do not race.
package ledger

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key held while migrating ("edgeq" in ASCII).
const migrationLock = 0x6564676571

// Admission is one admission's row. Zero times and fields are unknown (an event that carries only
// part of the record, such as "committed", reached the ledger first).
type Admission struct {
	ID, ProductID, Buyer string
	Quantity             int64
	State                string // admitted, committed, released, cancelled
	AdmittedAt           time.Time
	CommittedAt          time.Time
	ReleasedAt           time.Time
	CancelledAt          time.Time
}

// Bid is one bid's row.
type Bid struct {
	ID, AuctionID, Bidder string
	AmountCents           int64
	State                 string // accepted, committed, withdrawn
	BidAt                 time.Time
	CommittedAt           time.Time
	WithdrawnAt           time.Time
}

// Batch is what one write puts in the ledger: events of any owners, in any order, repeats allowed.
type Batch struct {
	Admissions []Admission
	Bids       []Bid
}

// Len is the number of events in the batch.
func (b Batch) Len() int { return len(b.Admissions) + len(b.Bids) }

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

// Version is the number of the newest migration the database has.
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
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("ledger: connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("ledger: lock for migrations: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock)
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
		var done bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM edgeq_schema_migrations WHERE version = $1)", version).Scan(&done); err != nil {
			return err
		}
		if done {
			continue
		}
		sql, _ := migrations.ReadFile(name)
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO edgeq_schema_migrations (version, name) VALUES ($1, $2)", version, base)
			return err
		})
		if err != nil {
			return fmt.Errorf("ledger: migration %s: %w", base, err)
		}
	}
	return nil
}

// Rank orders states: an id's state only moves to a higher rank (edgeq_state_rank in SQL).
func Rank(state string) int {
	switch state {
	case "admitted", "accepted":
		return 0
	case "committed":
		return 1
	case "released", "withdrawn":
		return 2
	case "cancelled":
		return 3
	}
	return -1
}

func first(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	return a
}

// merge folds b into a (same id), as the SQL upsert does.
func (a Admission) merge(b Admission) Admission {
	if a.ProductID == "" {
		a.ProductID = b.ProductID
	}
	if a.Buyer == "" {
		a.Buyer = b.Buyer
	}
	if a.Quantity == 0 {
		a.Quantity = b.Quantity
	}
	if Rank(b.State) > Rank(a.State) {
		a.State = b.State
	}
	a.AdmittedAt, a.CommittedAt = first(a.AdmittedAt, b.AdmittedAt), first(a.CommittedAt, b.CommittedAt)
	a.ReleasedAt, a.CancelledAt = first(a.ReleasedAt, b.ReleasedAt), first(a.CancelledAt, b.CancelledAt)
	return a
}

func (a Bid) merge(b Bid) Bid {
	if a.AuctionID == "" {
		a.AuctionID = b.AuctionID
	}
	if a.Bidder == "" {
		a.Bidder = b.Bidder
	}
	if a.AmountCents == 0 {
		a.AmountCents = b.AmountCents
	}
	if Rank(b.State) > Rank(a.State) {
		a.State = b.State
	}
	a.BidAt, a.CommittedAt, a.WithdrawnAt = first(a.BidAt, b.BidAt), first(a.CommittedAt, b.CommittedAt), first(a.WithdrawnAt, b.WithdrawnAt)
	return a
}

// mergeByID folds events of the same id into one row: one INSERT ... ON CONFLICT may not touch a
// row twice.
func mergeByID[T any](rows []T, id func(T) string, merge func(T, T) T) []T {
	at := make(map[string]int, len(rows))
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		if i, ok := at[id(r)]; ok {
			out[i] = merge(out[i], r)
			continue
		}
		at[id(r)] = len(out)
		out = append(out, r)
	}
	return out
}

func ts(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()} }

const upsertAdmissions = `
INSERT INTO edgeq_admissions AS a (id, product_id, buyer, quantity, state, admitted_at, committed_at, released_at, cancelled_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[],
                     $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::timestamptz[]) AS r
ORDER BY 1
ON CONFLICT (id) DO UPDATE SET
  buyer        = CASE WHEN a.buyer = '' THEN EXCLUDED.buyer ELSE a.buyer END,
  quantity     = CASE WHEN a.quantity = 0 THEN EXCLUDED.quantity ELSE a.quantity END,
  state        = CASE WHEN edgeq_state_rank(EXCLUDED.state) > edgeq_state_rank(a.state) THEN EXCLUDED.state ELSE a.state END,
  admitted_at  = COALESCE(a.admitted_at, EXCLUDED.admitted_at),
  committed_at = COALESCE(a.committed_at, EXCLUDED.committed_at),
  released_at  = COALESCE(a.released_at, EXCLUDED.released_at),
  cancelled_at = COALESCE(a.cancelled_at, EXCLUDED.cancelled_at),
  written_at   = now()`

const upsertBids = `
INSERT INTO edgeq_bids AS b (id, auction_id, bidder, amount_cents, state, bid_at, committed_at, withdrawn_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[],
                     $6::timestamptz[], $7::timestamptz[], $8::timestamptz[]) AS r
ORDER BY 1
ON CONFLICT (id) DO UPDATE SET
  bidder       = CASE WHEN b.bidder = '' THEN EXCLUDED.bidder ELSE b.bidder END,
  amount_cents = CASE WHEN b.amount_cents = 0 THEN EXCLUDED.amount_cents ELSE b.amount_cents END,
  state        = CASE WHEN edgeq_state_rank(EXCLUDED.state) > edgeq_state_rank(b.state) THEN EXCLUDED.state ELSE b.state END,
  bid_at       = COALESCE(b.bid_at, EXCLUDED.bid_at),
  committed_at = COALESCE(b.committed_at, EXCLUDED.committed_at),
  withdrawn_at = COALESCE(b.withdrawn_at, EXCLUDED.withdrawn_at),
  written_at   = now()`

// Write puts a batch in the ledger in one transaction: all of it or nothing. Idempotent: writing
// the same events again, or older events after newer ones, changes nothing. Rows are written in id
// order, so writers that race on the same ids (a worker taken over mid-batch) wait for each other
// instead of deadlocking.
func (l *Ledger) Write(ctx context.Context, b Batch) error {
	if err := l.Migrate(ctx); err != nil {
		// Not a refusal of the batch (%v: no PgError inside): the writer waits and tries again.
		return fmt.Errorf("ledger: migrating the schema: %v", err)
	}
	adms := mergeByID(b.Admissions, func(a Admission) string { return a.ID }, Admission.merge)
	bids := mergeByID(b.Bids, func(b Bid) string { return b.ID }, Bid.merge)
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if len(adms) > 0 {
			n := len(adms)
			id, product, buyer, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			qty := make([]int64, n)
			at, committed, released, cancelled := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
			for i, a := range adms {
				id[i], product[i], buyer[i], qty[i], state[i] = a.ID, a.ProductID, a.Buyer, a.Quantity, a.State
				at[i], committed[i], released[i], cancelled[i] = ts(a.AdmittedAt), ts(a.CommittedAt), ts(a.ReleasedAt), ts(a.CancelledAt)
			}
			if _, err := tx.Exec(ctx, upsertAdmissions, id, product, buyer, qty, state, at, committed, released, cancelled); err != nil {
				return err
			}
		}
		if len(bids) > 0 {
			n := len(bids)
			id, auction, bidder, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			amount := make([]int64, n)
			at, committed, withdrawn := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
			for i, b := range bids {
				id[i], auction[i], bidder[i], amount[i], state[i] = b.ID, b.AuctionID, b.Bidder, b.AmountCents, b.State
				at[i], committed[i], withdrawn[i] = ts(b.BidAt), ts(b.CommittedAt), ts(b.WithdrawnAt)
			}
			if _, err := tx.Exec(ctx, upsertBids, id, auction, bidder, amount, state, at, committed, withdrawn); err != nil {
				return err
			}
		}
		return nil
	})
}

// Refused reports whether err is PostgreSQL refusing the data (a server error about the statement),
// as opposed to the server being unreachable or going away: a refused write fails again however
// often it is retried, an unreachable server is waited for.
func Refused(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	// Class 08 connection exceptions, 53 insufficient resources, 57 operator intervention (shutdown),
	// 40 transaction rollback (serialization, deadlock), 58 system error: all pass.
	switch pg.Code[:2] {
	case "08", "53", "57", "40", "58":
		return false
	}
	return true
}

func timeOf(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

const admissionColumns = "id, product_id, buyer, quantity, state, admitted_at, committed_at, released_at, cancelled_at"

func scanAdmissions(rows pgx.Rows) ([]Admission, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Admission, error) {
		var a Admission
		var at, committed, released, cancelled pgtype.Timestamptz
		err := row.Scan(&a.ID, &a.ProductID, &a.Buyer, &a.Quantity, &a.State, &at, &committed, &released, &cancelled)
		a.AdmittedAt, a.CommittedAt, a.ReleasedAt, a.CancelledAt = timeOf(at), timeOf(committed), timeOf(released), timeOf(cancelled)
		return a, err
	})
}

const bidColumns = "id, auction_id, bidder, amount_cents, state, bid_at, committed_at, withdrawn_at"

func scanBids(rows pgx.Rows) ([]Bid, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Bid, error) {
		var b Bid
		var at, committed, withdrawn pgtype.Timestamptz
		err := row.Scan(&b.ID, &b.AuctionID, &b.Bidder, &b.AmountCents, &b.State, &at, &committed, &withdrawn)
		b.BidAt, b.CommittedAt, b.WithdrawnAt = timeOf(at), timeOf(committed), timeOf(withdrawn)
		return b, err
	})
}

// Admissions is a page of admissions, newest first; buyer "" lists every buyer's.
func (l *Ledger) Admissions(ctx context.Context, buyer string, page, size int64) ([]Admission, int64, error) {
	var total int64
	var rows pgx.Rows
	var err error
	if buyer == "" {
		if err = l.pool.QueryRow(ctx, "SELECT count(*) FROM edgeq_admissions").Scan(&total); err == nil {
			rows, err = l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions"+
				" ORDER BY admitted_at DESC NULLS LAST, id DESC LIMIT $1 OFFSET $2", size, (page-1)*size)
		}
	} else {
		if err = l.pool.QueryRow(ctx, "SELECT count(*) FROM edgeq_admissions WHERE buyer = $1", buyer).Scan(&total); err == nil {
			rows, err = l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions WHERE buyer = $1"+
				" ORDER BY admitted_at DESC NULLS LAST, id DESC LIMIT $2 OFFSET $3", buyer, size, (page-1)*size)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	items, err := scanAdmissions(rows)
	return items, total, err
}

// Admission is one admission's row.
func (l *Ledger) Admission(ctx context.Context, id string) (Admission, bool, error) {
	rows, err := l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions WHERE id = $1", id)
	if err != nil {
		return Admission{}, false, err
	}
	items, err := scanAdmissions(rows)
	if err != nil || len(items) == 0 {
		return Admission{}, false, err
	}
	return items[0], true, nil
}

// Bids is a page of a bidder's bids, newest first.
func (l *Ledger) Bids(ctx context.Context, bidder string, page, size int64) ([]Bid, int64, error) {
	var total int64
	if err := l.pool.QueryRow(ctx, "SELECT count(*) FROM edgeq_bids WHERE bidder = $1", bidder).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := l.pool.Query(ctx, "SELECT "+bidColumns+" FROM edgeq_bids WHERE bidder = $1"+
		" ORDER BY bid_at DESC NULLS LAST, id DESC LIMIT $2 OFFSET $3", bidder, size, (page-1)*size)
	if err != nil {
		return nil, 0, err
	}
	items, err := scanBids(rows)
	return items, total, err
}

// AllAdmissions returns every admission admitted at or after since (reconcile).
func (l *Ledger) AllAdmissions(ctx context.Context, since time.Time) ([]Admission, error) {
	rows, err := l.pool.Query(ctx, "SELECT "+admissionColumns+" FROM edgeq_admissions WHERE admitted_at IS NULL OR admitted_at >= $1 ORDER BY id", since)
	if err != nil {
		return nil, err
	}
	return scanAdmissions(rows)
}

// AllBids returns every bid placed at or after since (reconcile).
func (l *Ledger) AllBids(ctx context.Context, since time.Time) ([]Bid, error) {
	rows, err := l.pool.Query(ctx, "SELECT "+bidColumns+" FROM edgeq_bids WHERE bid_at IS NULL OR bid_at >= $1 ORDER BY id", since)
	if err != nil {
		return nil, err
	}
	return scanBids(rows)
}

// UnitsHeld is, per product, the units of admissions not given back (admitted or committed): what
// the store's buyer counts add up to.
func (l *Ledger) UnitsHeld(ctx context.Context) (map[string]int64, error) {
	rows, err := l.pool.Query(ctx, "SELECT product_id, COALESCE(sum(quantity), 0)::bigint FROM edgeq_admissions WHERE state IN ('admitted', 'committed') GROUP BY product_id")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var product string
	var units int64
	_, err = pgx.ForEachRow(rows, []any{&product, &units}, func() error { out[product] = units; return nil })
	return out, err
}

// Standing is an auction's bids not withdrawn: how many, and the highest amount.
type Standing struct{ Bids, HighestCents int64 }

// BidsStanding is every auction's Standing.
func (l *Ledger) BidsStanding(ctx context.Context) (map[string]Standing, error) {
	rows, err := l.pool.Query(ctx, "SELECT auction_id, count(*), COALESCE(max(amount_cents), 0) FROM edgeq_bids WHERE state <> 'withdrawn' GROUP BY auction_id")
	if err != nil {
		return nil, err
	}
	out := map[string]Standing{}
	var auction string
	var st Standing
	_, err = pgx.ForEachRow(rows, []any{&auction, &st.Bids, &st.HighestCents}, func() error { out[auction] = st; return nil })
	return out, err
}
