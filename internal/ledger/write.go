package ledger

// Writing to the ledger: a batch's rows handed to their tables' Writes in one transaction; the
// helpers those Writes share (a batch's events folded into one row per id as the SQL upserts do: a
// field once known is kept (Known), a state only moves to a higher Rank (Higher)); and Refused, which
// tells a write that would fail again from a server that cannot be reached.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

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

// Known is the value a row keeps of a time two events of one id carry: a, unless a is unknown (the
// zero time), as COALESCE(row, new) does in an upsert.
func Known(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	return a
}

// Higher is the state of higher Rank, a on a tie: what a row keeps of two events' states.
func Higher(a, b string) string {
	if Rank(b) > Rank(a) {
		return b
	}
	return a
}

// MergeByID folds rows of the same id into one (merge(earlier, later)), keeping the order of each
// id's first row: one INSERT ... ON CONFLICT may not touch a row twice.
func MergeByID[T any](rows []T, id func(T) string, merge func(T, T) T) []T {
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

// Fold is the start of a table's Write: its rows as T (another type is refused: it would be again),
// folded into one row per id (MergeByID with merge) and sorted by id.
func Fold[T Row](rows []Row, id func(T) string, merge func(T, T) T) ([]T, error) {
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		t, ok := r.(T)
		if !ok {
			var want T
			return nil, fmt.Errorf("%w: a %T row of table %s, whose rows are %T", ErrRefused, r, r.Table(), want)
		}
		out = append(out, t)
	}
	out = MergeByID(out, id, merge)
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	return out, nil
}

// TS is t as a timestamptz parameter: NULL for the zero time (unknown).
func TS(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()} }

// Write puts a batch in the ledger in one transaction: all of it or nothing. Each registered table's
// Write gets its rows of the batch, the tables in name order. The tables' Writes make it idempotent
// (writing the same events again, or older events after newer ones, changes nothing) and write in id
// order, so that writers racing on the same ids (a worker taken over mid-batch) wait for each other
// instead of deadlocking. A row of a table no package registered fails the whole batch with
// ErrUnregisteredTable, a refusal (Refused), before anything is written.
func (l *Ledger) Write(ctx context.Context, b Batch) error {
	tables, others, err := byTable(b.Rows)
	if err != nil {
		return err
	}
	if err := l.Migrate(ctx); err != nil {
		// Not a refusal of the batch (%v: no PgError nor ErrRefused inside): the writer waits and
		// tries again.
		return fmt.Errorf("ledger: migrating the schema: %v", err)
	}
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		for i, t := range tables {
			if err := t.Write(ctx, tx, others[i]); err != nil {
				return fmt.Errorf("ledger: table %s: %w", t.Name, err)
			}
		}
		return nil
	})
}

// Refused reports whether err is PostgreSQL refusing the data (a server error about the statement)
// or an error wrapping ErrRefused (a row of an unregistered table, a row a registered table's Write
// refuses, a misnamed table migration), as opposed to the server being unreachable or going away: a
// refused write fails again however often it is retried, an unreachable server is waited for.
func Refused(err error) bool {
	if errors.Is(err, ErrRefused) {
		return true
	}
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
