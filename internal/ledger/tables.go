package ledger

// Tables that other packages register: every admission kind keeps its rows in the ledger without
// the ledger knowing them. A table brings its migrations (applied after edgeq's, under the
// same lock, tracked in edgeq_table_migrations) and the function that writes its rows inside Write's
// transaction. Query and QueryRow are for its reads.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Row is a row of a registered table, carried in a Batch.
type Row interface {
	// Table is the Name the row's table was registered under.
	Table() string
}

// Table is a table a package keeps in the ledger (RegisterTable).
type Table struct {
	// Name is the table's name in the registry and in edgeq_table_migrations: [a-z][a-z0-9_]*. It
	// need not be the name of an SQL table (a Table may create several), but using it as one is
	// the clear way.
	Name string
	// Migrations holds NNNN_words.sql files at its root (fs.Sub an embed.FS's directory), numbered
	// from 1: each is applied once, in number order, in a transaction of its own, after edgeq's own
	// migrations. Other files are ignored. Nil: the table has no migrations.
	Migrations fs.FS
	// Write writes the table's rows of one batch inside the batch's transaction (an error rolls
	// back the whole batch). rows are the batch's rows of this table in batch order, repeats
	// included: fold them into one row per id (MergeByID) and write in id order, as the kinds'
	// upserts do, so that writing them again, or in another order, changes nothing, and writers
	// racing on the same ids wait for each other instead of deadlocking. An error that wraps
	// ErrRefused, or PostgreSQL's refusal of the data, is a refusal (Refused).
	Write func(ctx context.Context, tx pgx.Tx, rows []Row) error
}

// Dir is the directory dir of fsys (a table's embedded migrations/) as a Table's Migrations; a dir
// fsys cannot open as one is a panic at registration.
func Dir(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("ledger: migrations %s: %v", dir, err))
	}
	return sub
}

var tableName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

var registry = struct {
	sync.RWMutex
	tables map[string]Table
}{tables: map[string]Table{}}

// RegisterTable adds a table to the ledger; call it from the registering package's init. Every
// Ledger migrated afterwards applies its migrations, and Write hands it its rows. It panics on a
// name that is empty, taken, or not [a-z][a-z0-9_]*, and on a nil Write.
func RegisterTable(t Table) {
	if !tableName.MatchString(t.Name) {
		panic(fmt.Sprintf("ledger: table name %q is not [a-z][a-z0-9_]*", t.Name))
	}
	if t.Write == nil {
		panic(fmt.Sprintf("ledger: table %s has no Write", t.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, taken := registry.tables[t.Name]; taken {
		panic(fmt.Sprintf("ledger: table %s registered twice", t.Name))
	}
	registry.tables[t.Name] = t
}

func lookupTable(name string) (Table, bool) {
	registry.RLock()
	defer registry.RUnlock()
	t, ok := registry.tables[name]
	return t, ok
}

// ErrRefused marks an error as a refusal: Refused reports it as true, so the writer does not retry
// the batch as it would for a server out of reach, but writes its rows one by one and dead-letters
// those refused again. A table's Write wraps it in the error of a row it refuses itself.
var ErrRefused = errors.New("refused")

// ErrUnregisteredTable is Write's error for a batch holding a row whose table no package registered
// (or a nil row). It wraps ErrRefused: the batch would fail again however often it is retried.
var ErrUnregisteredTable = fmt.Errorf("%w: no table registered under this name", ErrRefused)

// byTable groups a batch's rows by table, the tables in name order.
func byTable(rows []Row) ([]Table, [][]Row, error) {
	if len(rows) == 0 {
		return nil, nil, nil
	}
	by := map[string][]Row{}
	for _, r := range rows {
		if r == nil {
			return nil, nil, fmt.Errorf("ledger: a nil row: %w", ErrUnregisteredTable)
		}
		by[r.Table()] = append(by[r.Table()], r)
	}
	names := slices.Sorted(maps.Keys(by))
	tables, grouped := make([]Table, len(names)), make([][]Row, len(names))
	for i, name := range names {
		t, ok := lookupTable(name)
		if !ok {
			return nil, nil, fmt.Errorf("ledger: row %T of table %q: %w", by[name][0], name, ErrUnregisteredTable)
		}
		tables[i], grouped[i] = t, by[name]
	}
	return tables, grouped, nil
}

// migration is one of a registered table's migration files.
type migration struct {
	version int
	file    string
	sql     string
}

// plan is a registered table's migrations in number order.
type plan struct {
	table string
	steps []migration
}

// tablePlans reads every registered table's migrations, the tables in name order. A file whose name
// is not NNNN_words.sql, or two files of one number, is an error that would recur however often it
// is retried (ErrRefused).
func tablePlans() ([]plan, error) {
	registry.RLock()
	tables := slices.SortedFunc(maps.Values(registry.tables), func(a, b Table) int { return strings.Compare(a.Name, b.Name) })
	registry.RUnlock()
	plans := make([]plan, 0, len(tables))
	for _, t := range tables {
		steps, err := tableMigrations(t)
		if err != nil {
			return nil, err
		}
		plans = append(plans, plan{table: t.Name, steps: steps})
	}
	return plans, nil
}

func tableMigrations(t Table) ([]migration, error) {
	if t.Migrations == nil {
		return nil, nil
	}
	files, err := fs.Glob(t.Migrations, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("ledger: table %s: migrations: %w", t.Name, err)
	}
	steps := make([]migration, 0, len(files))
	byVersion := map[int]string{}
	for _, file := range files {
		number, _, ok := strings.Cut(file, "_")
		version, err := strconv.Atoi(number)
		if !ok || err != nil || strings.Trim(number, "0123456789") != "" || version < 1 {
			return nil, fmt.Errorf("ledger: table %s: migration %s has no version number (NNNN_words.sql, from 0001): %w", t.Name, file, ErrRefused)
		}
		if other, dup := byVersion[version]; dup {
			return nil, fmt.Errorf("ledger: table %s: migrations %s and %s have the same number: %w", t.Name, other, file, ErrRefused)
		}
		byVersion[version] = file
		sql, err := fs.ReadFile(t.Migrations, file)
		if err != nil {
			return nil, fmt.Errorf("ledger: table %s: migration %s: %w", t.Name, file, err)
		}
		steps = append(steps, migration{version: version, file: file, sql: string(sql)})
	}
	slices.SortFunc(steps, func(a, b migration) int { return a.version - b.version })
	return steps, nil
}

// migrateTables applies the registered tables' migrations the database lacks; the caller holds the
// migration lock and has applied edgeq's own.
func migrateTables(ctx context.Context, conn *pgxpool.Conn, plans []plan) error {
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS edgeq_table_migrations (
		table_name text, version integer, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (table_name, version))`); err != nil {
		return fmt.Errorf("ledger: table migrations table: %w", err)
	}
	for _, p := range plans {
		for _, m := range p.steps {
			err := applyOnce(ctx, conn, m.sql,
				"SELECT EXISTS (SELECT 1 FROM edgeq_table_migrations WHERE table_name = $1 AND version = $2)",
				"INSERT INTO edgeq_table_migrations (table_name, version, name) VALUES ($1, $2, $3)", p.table, m.version, m.file)
			if err != nil {
				return fmt.Errorf("ledger: table %s: migration %s: %w", p.table, m.file, err)
			}
		}
	}
	return nil
}

// TableVersion is the number of the newest migration of the registered table name the database has
// (0: none).
func (l *Ledger) TableVersion(ctx context.Context, name string) (int, error) {
	var v int
	err := l.pool.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM edgeq_table_migrations WHERE table_name = $1", name).Scan(&v)
	return v, err
}

// Query runs a query on the ledger's database once it is migrated (as Write does): for a registered
// table's reads. A failed migration is its error.
func (l *Ledger) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := l.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("ledger: migrating the schema: %w", err)
	}
	return l.pool.Query(ctx, sql, args...)
}

// QueryRow runs a query of one row on the ledger's database once it is migrated. A failed
// migration is the error its Scan returns.
func (l *Ledger) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := l.Migrate(ctx); err != nil {
		return errRow{fmt.Errorf("ledger: migrating the schema: %w", err)}
	}
	return l.pool.QueryRow(ctx, sql, args...)
}

// errRow is a row whose Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
