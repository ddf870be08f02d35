package ledger_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
)

// Two tables registered as an admission kind registers its own: tickets (one row per id, merged as
// the kinds' rows are, states by ledger.Rank) and notes (to see two tables in one
// batch, and migrations in number order rather than name order).

type ticket struct {
	ID, DrawID, Holder string
	State              string // admitted, committed, released
	DrawnAt, ClaimedAt time.Time
}

func (ticket) Table() string { return "ledger_test_tickets" }

func (a ticket) merge(b ticket) ticket {
	a.DrawID, a.Holder = cmp.Or(a.DrawID, b.DrawID), cmp.Or(a.Holder, b.Holder)
	a.State = ledger.Higher(a.State, b.State)
	a.DrawnAt, a.ClaimedAt = ledger.Known(a.DrawnAt, b.DrawnAt), ledger.Known(a.ClaimedAt, b.ClaimedAt)
	return a
}

type note struct{ ID, Body string }

func (note) Table() string { return "ledger_test_notes" }

// stray is a row of a table nobody registered.
type stray struct{ ID string }

func (stray) Table() string { return "ledger_test_nowhere" }

var ticketMigrations = fstest.MapFS{
	// edgeq_state_rank is edgeq's own (0001): a table's migrations run after edgeq's.
	"0001_tickets.sql": {Data: []byte(`CREATE TABLE ledger_test_tickets (
  id         text PRIMARY KEY,
  draw_id    text NOT NULL,
  holder     text NOT NULL DEFAULT '',
  state      text NOT NULL CHECK (edgeq_state_rank(state) >= 0),
  drawn_at   timestamptz,
  claimed_at timestamptz)`)},
	// A holder the table refuses, to fail one batch on the server.
	"0002_refused_holder.sql": {Data: []byte(`ALTER TABLE ledger_test_tickets ADD CONSTRAINT ledger_test_tickets_holder CHECK (holder <> 'refused')`)},
	"README.md":               {Data: []byte("not a migration")},
}

var noteMigrations = fstest.MapFS{
	// 10 sorts before 2 by name: applied in name order, 10 would find no body column.
	"1_notes.sql":       {Data: []byte(`CREATE TABLE ledger_test_notes (id text PRIMARY KEY)`)},
	"2_body.sql":        {Data: []byte(`ALTER TABLE ledger_test_notes ADD COLUMN body text NOT NULL DEFAULT ''`)},
	"10_body_short.sql": {Data: []byte(`ALTER TABLE ledger_test_notes ADD CONSTRAINT ledger_test_notes_body CHECK (length(body) <= 40)`)},
}

const upsertTickets = `
INSERT INTO ledger_test_tickets AS t (id, draw_id, holder, state, drawn_at, claimed_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[]) AS r
ORDER BY 1
ON CONFLICT (id) DO UPDATE SET
  holder     = CASE WHEN t.holder = '' THEN EXCLUDED.holder ELSE t.holder END,
  state      = CASE WHEN edgeq_state_rank(EXCLUDED.state) > edgeq_state_rank(t.state) THEN EXCLUDED.state ELSE t.state END,
  drawn_at   = COALESCE(t.drawn_at, EXCLUDED.drawn_at),
  claimed_at = COALESCE(t.claimed_at, EXCLUDED.claimed_at)`

const upsertNotes = `
INSERT INTO ledger_test_notes AS n (id, body)
SELECT * FROM unnest($1::text[], $2::text[]) AS r
ORDER BY 1
ON CONFLICT (id) DO UPDATE SET body = CASE WHEN n.body = '' THEN EXCLUDED.body ELSE n.body END`

// calls is where a test asks the tables' Writes to record their names, in call order.
type calls struct{}

func record(ctx context.Context, table string) {
	if rec, ok := ctx.Value(calls{}).(*[]string); ok {
		*rec = append(*rec, table)
	}
}

func writeTickets(ctx context.Context, tx pgx.Tx, rows []ledger.Row) error {
	record(ctx, "ledger_test_tickets")
	all, err := ledger.Fold(rows, func(t ticket) string { return t.ID }, ticket.merge)
	if err != nil {
		return err
	}
	n := len(all)
	id, draw, holder, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	drawn, claimed := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	for i, t := range all {
		id[i], draw[i], holder[i], state[i] = t.ID, t.DrawID, t.Holder, t.State
		drawn[i], claimed[i] = ledger.TS(t.DrawnAt), ledger.TS(t.ClaimedAt)
	}
	_, err = tx.Exec(ctx, upsertTickets, id, draw, holder, state, drawn, claimed)
	return err
}

func writeNotes(ctx context.Context, tx pgx.Tx, rows []ledger.Row) error {
	record(ctx, "ledger_test_notes")
	all, err := ledger.Fold(rows, func(n note) string { return n.ID }, func(a, b note) note { a.Body = cmp.Or(a.Body, b.Body); return a })
	if err != nil {
		return err
	}
	id, body := make([]string, len(all)), make([]string, len(all))
	for i, n := range all {
		id[i], body[i] = n.ID, n.Body
	}
	_, err = tx.Exec(ctx, upsertNotes, id, body)
	return err
}

func init() {
	ledger.RegisterTable(ledger.Table{Name: "ledger_test_tickets", Migrations: ticketMigrations, Write: writeTickets})
	ledger.RegisterTable(ledger.Table{Name: "ledger_test_notes", Migrations: noteMigrations, Write: writeNotes})
}

// tickets reads the tickets table through the ledger, as a kind's reads do.
func tickets(t *testing.T, l *ledger.Ledger) []ticket {
	t.Helper()
	rows, err := l.Query(context.Background(), "SELECT id, draw_id, holder, state, drawn_at, claimed_at FROM ledger_test_tickets ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ticket, error) {
		var tk ticket
		var drawn, claimed pgtype.Timestamptz
		err := row.Scan(&tk.ID, &tk.DrawID, &tk.Holder, &tk.State, &drawn, &claimed)
		tk.DrawnAt, tk.ClaimedAt = ledger.TimeOf(drawn), ledger.TimeOf(claimed)
		return tk, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t *testing.T, l *ledger.Ledger, table string) int {
	t.Helper()
	var n int
	if err := l.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// tableMigrations is edgeq_table_migrations as "table version name" lines.
func tableMigrations(t *testing.T, l *ledger.Ledger) []string {
	t.Helper()
	rows, err := l.Query(context.Background(), "SELECT table_name, version, name FROM edgeq_table_migrations ORDER BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var table, name string
		var version int
		err := row.Scan(&table, &version, &name)
		return fmt.Sprint(table, " ", version, " ", name), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var wantTableMigrations = []string{
	"ledger_test_notes 1 1_notes.sql", "ledger_test_notes 2 2_body.sql", "ledger_test_notes 10 10_body_short.sql",
	"ledger_test_tickets 1 0001_tickets.sql", "ledger_test_tickets 2 0002_refused_holder.sql",
}

func checkVersions(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	if v, err := l.Version(ctx); err != nil || v != 1 {
		t.Errorf("edgeq's schema version %d, %v; want 1", v, err)
	}
	for name, want := range map[string]int{"ledger_test_tickets": 2, "ledger_test_notes": 10, "ledger_test_nowhere": 0} {
		if v, err := l.TableVersion(ctx, name); err != nil || v != want {
			t.Errorf("table %s version %d, %v; want %d", name, v, err, want)
		}
	}
	if got := tableMigrations(t, l); !slices.Equal(got, wantTableMigrations) {
		t.Errorf("edgeq_table_migrations\n%q, want\n%q", got, wantTableMigrations)
	}
}

// A name that is empty, not [a-z][a-z0-9_]* or taken, or a table without Write, is a panic at
// registration, and registers nothing.
func TestRegisterTable_RefusesBadNamesTwiceAndNoWrite(t *testing.T) {
	bad := []ledger.Table{
		{Name: "", Write: writeNotes},
		{Name: "Tickets", Write: writeNotes},
		{Name: "1tickets", Write: writeNotes},
		{Name: "tick-ets", Write: writeNotes},
		{Name: "tickets\n", Write: writeNotes},
		{Name: "_tickets", Write: writeNotes},
		{Name: "ledger_test_tickets", Write: writeNotes},
		{Name: "ledger_test_nowhere"},
	}
	for _, tb := range bad {
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "ledger: ") || !strings.Contains(msg, strings.TrimSpace(tb.Name)) {
					t.Errorf("RegisterTable(%q): panic %q, want one naming the table", tb.Name, msg)
				}
			}()
			ledger.RegisterTable(tb)
		}()
	}
	// The table without Write was not registered: its rows are refused, before any server is asked.
	l, err := ledger.New(unreachable(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Write(context.Background(), ledger.Batch{Rows: []ledger.Row{stray{ID: "1"}}}); !errors.Is(err, ledger.ErrUnregisteredTable) {
		t.Errorf("a row of the table registered without Write: %v, want ErrUnregisteredTable", err)
	}
}

// unreachable is the URL of a PostgreSQL nobody listens for.
func unreachable(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "postgres://edgeq@" + addr + "/edgeq?connect_timeout=2"
}

// A registered table's migrations run once, after edgeq's own, in number order, even when replicas
// start together (the same advisory lock: a second run of a CREATE TABLE would fail its Open), and
// each is recorded in edgeq_table_migrations.
func TestTables_MigrateOnceEvenWhenReplicasStartTogether(t *testing.T) {
	url := ledgertest.Database(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			l, err := ledger.Open(context.Background(), url)
			if err == nil {
				l.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	l := open(t, url)
	checkVersions(t, l)
	if got := count(t, l, "edgeq_schema_migrations"); got != 1 {
		t.Errorf("%d rows in edgeq_schema_migrations, want 1 (edgeq's own only)", got)
	}
}

// A database edgeq migrated before tables could be registered (edgeq_schema_migrations and its rows,
// the stock and bid tables of that build's migration 0001, no edgeq_table_migrations) keeps its
// schema and rows as they were and gains the tables. (The stock and bid kinds take their tables
// over: admission/stock's TestTable_ALedgerOfOlderBuildsKeepsItsRowsAndSchema.)
func TestTables_AnExistingDeploymentKeepsItsSchemaAndGainsTheTables(t *testing.T) {
	ctx := context.Background()
	url := ledgertest.Database(t)
	core, err := os.ReadFile("testdata/0001_records_of_older_builds.sql")
	if err != nil {
		t.Fatal(err)
	}
	applied := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		sql  string
		args []any
	}{
		{`CREATE TABLE edgeq_schema_migrations (
			version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`, nil},
		{string(core), nil},
		{"INSERT INTO edgeq_schema_migrations (version, name, applied_at) VALUES (1, '0001_records.sql', $1)", []any{applied}},
		{"INSERT INTO edgeq_admissions (id, product_id, buyer, quantity, state, admitted_at) VALUES ('old', 'p0', 'b0', 1, 'admitted', $1)", []any{at}},
	} {
		if _, err := conn.Exec(ctx, step.sql, step.args...); err != nil {
			t.Fatalf("%s: %v", step.sql, err)
		}
	}
	_ = conn.Close(ctx)

	l := open(t, url)
	checkVersions(t, l)
	rows, err := l.Query(ctx, "SELECT version, name, applied_at FROM edgeq_schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	type schemaRow struct {
		Version int
		Name    string
		At      time.Time
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[schemaRow])
	if err != nil || len(got) != 1 || got[0].Version != 1 || got[0].Name != "0001_records.sql" || !got[0].At.Equal(applied) {
		t.Fatalf("edgeq_schema_migrations %+v, %v; want only (1, 0001_records.sql, %v) as it was", got, err, applied)
	}
	var state string
	var admitted time.Time
	if err := l.QueryRow(ctx, "SELECT state, admitted_at FROM edgeq_admissions WHERE id = 'old'").Scan(&state, &admitted); err != nil || state != "admitted" || !admitted.Equal(at) {
		t.Fatalf("the existing row: %s %v %v", state, admitted, err)
	}
	b := ledger.Batch{Rows: []ledger.Row{ticket{ID: "t1", DrawID: "d1", Holder: "h1", State: "admitted", DrawnAt: at}}}
	if err := l.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := tickets(t, l); len(got) != 1 || got[0] != b.Rows[0] {
		t.Errorf("tickets %+v, want %+v", got, b.Rows)
	}
}

// A batch's rows of every table are written in one transaction: a row one table refuses leaves none
// of the batch written (the other table's rows, written before it, included), and Refused says so; split into rows (as the worker does after
// a refusal), everything but the refused row is written. The tables are called in name order,
// whatever the batch's order.
func TestWrite_RegisteredTablesShareTheBatchTransaction(t *testing.T) {
	l := open(t, ledgertest.Database(t))
	var called []string
	ctx := context.WithValue(context.Background(), calls{}, &called)
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	refused := ticket{ID: "t2", DrawID: "d1", Holder: "refused", State: "admitted", DrawnAt: at}
	b := ledger.Batch{
		Rows: []ledger.Row{
			ticket{ID: "t1", DrawID: "d1", Holder: "h1", State: "admitted", DrawnAt: at},
			refused,
			note{ID: "n1", Body: "first"},
		},
	}
	if b.Len() != 3 || len(b.Split()) != 3 {
		t.Fatalf("Len %d, %d rows; want 3 and 3", b.Len(), len(b.Split()))
	}
	err := l.Write(ctx, b)
	var pg *pgconn.PgError
	if !ledger.Refused(err) || !errors.As(err, &pg) || pg.ConstraintName != "ledger_test_tickets_holder" || !strings.Contains(err.Error(), "ledger_test_tickets") {
		t.Fatalf("write with a refused ticket: %v; want the table's refusal, Refused", err)
	}
	if want := []string{"ledger_test_notes", "ledger_test_tickets"}; !slices.Equal(called, want) {
		t.Errorf("tables called %q, want %q (name order)", called, want)
	}
	if n, tk := count(t, l, "ledger_test_notes"), tickets(t, l); n != 0 || len(tk) != 0 {
		t.Errorf("the refused batch left %d notes and tickets %+v", n, tk)
	}

	var refusedRows int
	for _, one := range b.Split() {
		if err := l.Write(ctx, one); err != nil {
			if !ledger.Refused(err) || len(one.Rows) != 1 || one.Rows[0] != refused {
				t.Errorf("row %+v: %v", one, err)
			}
			refusedRows++
		}
	}
	if refusedRows != 1 {
		t.Errorf("%d rows refused one by one, want 1", refusedRows)
	}
	if n, tk := count(t, l, "ledger_test_notes"), tickets(t, l); n != 1 || len(tk) != 1 || tk[0].ID != "t1" {
		t.Errorf("written one by one: %d notes, tickets %+v; want 1 and t1", n, tk)
	}
}

// A row of a table no package registered (or a nil row) is refused with ErrUnregisteredTable, and
// nothing of its batch is written; the batch's other rows are written one by one.
func TestWrite_AnUnregisteredRowIsRefusedAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	l := open(t, ledgertest.Database(t))
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, bad := range []ledger.Row{stray{ID: "s1"}, nil} {
		b := ledger.Batch{Rows: []ledger.Row{note{ID: "n4", Body: "kept"}, ticket{ID: "t4", DrawID: "d1", State: "admitted", DrawnAt: at}, bad}}
		err := l.Write(ctx, b)
		if !ledger.Refused(err) || !errors.Is(err, ledger.ErrUnregisteredTable) || !errors.Is(err, ledger.ErrRefused) {
			t.Fatalf("row %#v: %v; want ErrUnregisteredTable, Refused", bad, err)
		}
		if bad != nil && !strings.Contains(err.Error(), "ledger_test_nowhere") {
			t.Errorf("error %q does not name the table", err)
		}
		if n := count(t, l, "ledger_test_notes"); n != 0 {
			t.Fatalf("the refused batch's note was written (%d)", n)
		}
		if got := tickets(t, l); len(got) != 0 {
			t.Fatalf("the refused batch's ticket was written: %+v", got)
		}
	}
	b := ledger.Batch{Rows: []ledger.Row{note{ID: "n4", Body: "kept"}, ticket{ID: "t4", DrawID: "d1", State: "admitted", DrawnAt: at}, stray{ID: "s1"}}}
	var refused []ledger.Row
	for _, one := range b.Split() {
		if err := l.Write(ctx, one); err != nil {
			if !errors.Is(err, ledger.ErrUnregisteredTable) {
				t.Fatal(err)
			}
			refused = append(refused, one.Rows...)
		}
	}
	if len(refused) != 1 || refused[0] != (stray{ID: "s1"}) {
		t.Errorf("refused one by one: %+v, want the stray row", refused)
	}
	if count(t, l, "ledger_test_notes") != 1 || len(tickets(t, l)) != 1 {
		t.Errorf("the rows of registered tables were not written one by one")
	}
}

// A registered table's rows give the same row whatever their order and repeats, in one batch or many,
// mixed with other tables' rows.
func TestWrite_RegisteredRowsInAnyOrderAndRepeatsGiveTheSameRow(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	events := []ledger.Row{
		ticket{ID: "t9", DrawID: "d1", Holder: "h9", State: "admitted", DrawnAt: at},
		ticket{ID: "t9", DrawID: "d1", State: "committed", ClaimedAt: at.Add(time.Minute)},
		ticket{ID: "t9", DrawID: "d1", Holder: "h9", State: "released", DrawnAt: at},
		ticket{ID: "t8", DrawID: "d1", Holder: "h8", State: "admitted", DrawnAt: at.Add(time.Second)},
		note{ID: "n9", Body: "drawn"},
		note{ID: "n9"},
	}
	want := []ticket{
		{ID: "t8", DrawID: "d1", Holder: "h8", State: "admitted", DrawnAt: at.Add(time.Second)},
		{ID: "t9", DrawID: "d1", Holder: "h9", State: "released", DrawnAt: at, ClaimedAt: at.Add(time.Minute)},
	}
	for round := range 6 {
		l := open(t, ledgertest.Database(t))
		order := ledgertest.WriteInAnyOrder(t, l, events, round)
		if got := tickets(t, l); !slices.Equal(got, want) {
			t.Errorf("order %v: tickets\n%+v, want\n%+v", order, got, want)
		}
		var body string
		if err := l.QueryRow(ctx, "SELECT body FROM ledger_test_notes WHERE id = 'n9'").Scan(&body); err != nil || body != "drawn" {
			t.Errorf("order %v: note %q %v, want drawn", order, body, err)
		}
	}
}

// Query and QueryRow migrate first, as Write does: a ledger that cannot be migrated answers with
// that error (not a refusal: the server is waited for).
func TestQuery_MigratesFirstAndReportsWhyItCannot(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.New(unreachable(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Query(ctx, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "migrating the schema") || ledger.Refused(err) {
		t.Errorf("Query on an unreachable server: %v", err)
	}
	var one int
	if err := l.QueryRow(ctx, "SELECT 1").Scan(&one); err == nil || !strings.Contains(err.Error(), "migrating the schema") || ledger.Refused(err) {
		t.Errorf("QueryRow on an unreachable server: %v", err)
	}

	// A ledger never migrated by hand: its first query finds the tables.
	l2, err := ledger.New(ledgertest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := l2.QueryRow(ctx, "SELECT count(*) FROM ledger_test_tickets").Scan(&one); err != nil || one != 0 {
		t.Errorf("QueryRow before any Migrate: %d %v", one, err)
	}
}

// impostor names the tickets table but is not its row type.
type impostor struct{ ID string }

func (impostor) Table() string { return "ledger_test_tickets" }

// A row of another type than its table's (Fold) is refused, and nothing of its batch is written.
func TestWrite_ARowOfAnotherTypeIsRefused(t *testing.T) {
	ctx := context.Background()
	l := open(t, ledgertest.Database(t))
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	b := ledger.Batch{Rows: []ledger.Row{ticket{ID: "t5", DrawID: "d1", State: "admitted", DrawnAt: at}, impostor{ID: "t6"}}}
	err := l.Write(ctx, b)
	if !ledger.Refused(err) || !strings.Contains(err.Error(), "impostor") {
		t.Fatalf("a batch with an impostor row: %v; want a refusal naming it", err)
	}
	if got := tickets(t, l); len(got) != 0 {
		t.Errorf("the refused batch's ticket was written: %+v", got)
	}
}
