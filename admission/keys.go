package admission

import (
	"strconv"

	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
)

// RecordsDay is the day of an admission id's time, in days since 1970-01-01 UTC (0 for an id that
// is not a number).
func RecordsDay(admission string) int64 {
	if n, err := strconv.ParseUint(admission, 10, 64); err == nil {
		return ids.Time(n).Unix() / 86400
	}
	return 0
}

// The keys under the {adm} hash tag are small and bounded: the dead letters and the owners' indexes
// (each kind's, in its own keys file).
// (Builds before the records moved under their owners' tags kept every admin record there too:
// oldrecords.go reads them until they are past the retention.)
func deadKey(k store.Keys) string       { return k.Global("adm", "dead") }
func deadByTimeKey(k store.Keys) string { return k.Global("adm", "dead_by_time") }

// The spellings indexes (spellings.go), one per kind: key (idmatch.GuardedKeys) -> the guarded ids
// under it, separated by spaces. In the {adm} slot with the ids' indexes: index.lua writes both at
// once.
