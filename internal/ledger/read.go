package ledger

// Reading the ledger: a table's reads are the kind's own (Ledger.Query, QueryRow); TimeOf reads
// their time columns.

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TimeOf is a timestamptz column read in UTC: the zero time for NULL (unknown).
func TimeOf(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}
