package raffle

// The raffle in the ledger: its own table (migrations/), the row each event writes, and what
// `edgeq reconcile` compares.

import (
	"cmp"
	"context"
	"embed"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/ledger"
)

// table is the ledger table's registered name.
const table = "raffle_entries"

//go:embed migrations/*.sql
var migrations embed.FS

func registerTable() {
	ledger.RegisterTable(ledger.Table{Name: table, Migrations: ledger.Dir(migrations, "migrations"), Write: writeRows})
}

// Row is an entry's ledger row. Zero fields and times are unknown (the event that carries them has
// not reached the ledger yet).
type Row struct {
	ID, Drawing, Entrant string
	State                string // admitted, committed, released
	EnteredAt            time.Time
	CommittedAt          time.Time
	ReleasedAt           time.Time
}

// Table names the row's ledger table.
func (Row) Table() string { return table }

// merge folds b into a (same id), as the upsert does.
func merge(a, b Row) Row {
	a.Drawing, a.Entrant = cmp.Or(a.Drawing, b.Drawing), cmp.Or(a.Entrant, b.Entrant)
	a.State = ledger.Higher(a.State, b.State)
	a.EnteredAt, a.CommittedAt, a.ReleasedAt = ledger.Known(a.EnteredAt, b.EnteredAt), ledger.Known(a.CommittedAt, b.CommittedAt), ledger.Known(a.ReleasedAt, b.ReleasedAt)
	return a
}

const upsert = `
INSERT INTO edgeq_raffle_entries AS e (id, drawing_id, entrant, state, entered_at, committed_at, released_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[]) AS r
ORDER BY 1
ON CONFLICT (id) DO UPDATE SET
  entrant      = CASE WHEN e.entrant = '' THEN EXCLUDED.entrant ELSE e.entrant END,
  state        = CASE WHEN edgeq_state_rank(EXCLUDED.state) > edgeq_state_rank(e.state) THEN EXCLUDED.state ELSE e.state END,
  entered_at   = COALESCE(e.entered_at, EXCLUDED.entered_at),
  committed_at = COALESCE(e.committed_at, EXCLUDED.committed_at),
  released_at  = COALESCE(e.released_at, EXCLUDED.released_at),
  written_at   = now()`

// writeRows upserts a batch's entries, one row per id, in id order.
func writeRows(ctx context.Context, tx pgx.Tx, rows []ledger.Row) error {
	entries, err := ledger.Fold(rows, func(e Row) string { return e.ID }, merge)
	if err != nil {
		return err
	}
	n := len(entries)
	id, drawing, entrant, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	entered, committed, released := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	for i, e := range entries {
		id[i], drawing[i], entrant[i], state[i] = e.ID, e.Drawing, e.Entrant, e.State
		entered[i], committed[i], released[i] = ledger.TS(e.EnteredAt), ledger.TS(e.CommittedAt), ledger.TS(e.ReleasedAt)
	}
	_, err = tx.Exec(ctx, upsert, id, drawing, entrant, state, entered, committed, released)
	return err
}

// LedgerRow reads one stream entry into its ledger row.
func (k *kind) LedgerRow(drawing string, msg redis.XMessage, b *ledger.Batch) error {
	typ, id, user, at, err := event(msg)
	if err != nil {
		return err
	}
	row := Row{ID: id, Drawing: drawing, Entrant: user, State: typ}
	switch typ {
	case "admitted":
		row.EnteredAt = at
	case "committed":
		row.CommittedAt = at
	case "released":
		row.ReleasedAt = at
	}
	b.Rows = append(b.Rows, row)
	return nil
}

// scan reads ledger rows.
func scan(rows pgx.Rows) ([]Row, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var e Row
		var entered, committed, released pgtype.Timestamptz
		err := r.Scan(&e.ID, &e.Drawing, &e.Entrant, &e.State, &entered, &committed, &released)
		e.EnteredAt, e.CommittedAt, e.ReleasedAt = ledger.TimeOf(entered), ledger.TimeOf(committed), ledger.TimeOf(released)
		return e, err
	})
}

const columns = `id, drawing_id, entrant, state, entered_at, committed_at, released_at`

// entriesOf reads a page of an entrant's rows, newest first, and how many there are.
func (k *kind) entriesOf(ctx context.Context, entrant string, page, size int64) ([]Row, int64, error) {
	l := k.s.Ledger()
	var total int64
	if err := l.QueryRow(ctx, `SELECT count(*) FROM edgeq_raffle_entries WHERE entrant = $1`, entrant).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := l.Query(ctx, `SELECT `+columns+` FROM edgeq_raffle_entries WHERE entrant = $1
		ORDER BY entered_at DESC NULLS LAST, id DESC LIMIT $2 OFFSET $3`, entrant, size, (page-1)*size)
	if err != nil {
		return nil, 0, err
	}
	out, err := scan(rows)
	return out, total, err
}

// Reconcile compares the entries each drawing holds and every entry record with the ledger.
func (k *kind) Reconcile(ctx context.Context, r *admission.Reconciliation) error {
	l := k.s.Ledger()
	held := map[string]int64{}
	rows, err := l.Query(ctx, `SELECT drawing_id, count(*) FROM edgeq_raffle_entries WHERE state <> 'released' GROUP BY drawing_id`)
	if err != nil {
		return err
	}
	var drawing string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&drawing, &n}, func() error { held[drawing] = n; return nil }); err != nil {
		return err
	}
	drawings, err := k.s.OwnersToCompare(ctx, k, slices.Collect(maps.Keys(held)))
	if err != nil {
		return err
	}
	r.Owners = append(r.Owners, admission.Tally{N: len(drawings), Noun: "drawings"})
	for _, d := range drawings {
		entries, err := k.s.Client().HGet(ctx, k.key(d, "drawing"), "entries").Int64()
		if err != nil && err != redis.Nil {
			return err
		}
		if entries != held[d] {
			r.Differences = append(r.Differences, admission.Difference{Kind: "drawing", Owner: d, What: "entries held",
				Store: strconv.FormatInt(entries, 10), Ledger: strconv.FormatInt(held[d], 10)})
		}
	}
	rows, err = l.Query(ctx, `SELECT `+columns+` FROM edgeq_raffle_entries WHERE entered_at >= $1 OR entered_at IS NULL`, r.Since)
	if err != nil {
		return err
	}
	inLedger, err := scan(rows)
	if err != nil {
		return err
	}
	return k.s.CompareRecords(ctx, r, admission.StoreRecords{Noun: "entry", OwnerNoun: Field,
		Open: ":{r:", Middle: "}:entry:", User: "user", // raffle.lua's records, under the drawing's hash tag
		Read: func(owner, id string, h map[string]string) admission.Compared {
			return compared(Row{ID: id, Drawing: owner, State: h["state"]})
		},
		InLedger: admission.Mapped(inLedger, compared),
		Lookup: func(id string) (admission.Compared, bool, error) {
			rows, err := l.Query(ctx, `SELECT `+columns+` FROM edgeq_raffle_entries WHERE id = $1`, id)
			if err != nil {
				return admission.Compared{}, false, err
			}
			found, err := scan(rows)
			if err != nil || len(found) == 0 {
				return admission.Compared{}, false, err
			}
			return compared(found[0]), true, nil
		},
	})
}

func compared(e Row) admission.Compared {
	return admission.Compared{ID: e.ID, Owner: e.Drawing, State: e.State, Detail: e.State + ", drawing " + e.Drawing}
}
