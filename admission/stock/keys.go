package stock

import (
	"embed"
	"strconv"
	"time"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/store"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is one of the kind's scripts after the admission library (admission.Scripts).
var script = admission.Scripts(scriptFiles)

// The stock scripts.
var (
	reserveScript = script("reserve.lua")
	releaseScript = script("release.lua")
	commitScript  = script("commit.lua")
	cancelScript  = script("cancel.lua")
	productScript = script("product.lua")
	restockScript = script("restock.lua")
)

// tag is the products' hash tag letter: a product's keys carry {p:<id>}, so one script sees them all
// on one Cluster slot.
const tag = "p"

func infoKey(k store.Keys, product string) string   { return k.Entity(tag, product, "info") }
func stockKey(k store.Keys, product string) string  { return k.Entity(tag, product, "stock") }
func buyersKey(k store.Keys, product string) string { return k.Entity(tag, product, "buyers") }
func eventsKey(k store.Keys, product string) string { return k.Entity(tag, product, "events") }

// admitsKey: the product's admissions stream. reserve.lua adds one entry per call, naming every
// purchase the call admitted; the other events (released, cancelled, committed) go to eventsKey. The
// workers read both. It is a stream of its own so that a replica of an older build, whose workers
// read only the events stream and would not understand a grouped entry, never sees one (docs/deploy.md).
func admitsKey(k store.Keys, product string) string { return k.Entity(tag, product, "admits") }
func unsettledKey(k store.Keys, product string) string {
	return k.Entity(tag, product, "unsettled")
}

// claimsKey: the in-flight claims of a product's buyers (hash: user pseudonym -> admission id). A
// claim counts only while its admission is unsettled and younger than the claim TTL (reserve.lua), so
// nothing deletes one: a settled admission's claim is stale by itself.
func claimsKey(k store.Keys, product string) string { return k.Entity(tag, product, "claims") }

// recordsKey: the hash of a product's admission records for the day of the admission id's time (a
// field per admission, admission/scripts/lib.lua), "<day>" counted in days since 1970-01-01 UTC; an
// id that is not a number (an operator's typo: it is never admitted) goes to day 0.
func recordsKey(k store.Keys, product, id string) string {
	return dayRecordsKey(k, product, admission.RecordsDay(id))
}

// dayRecordsKey is the hash of a product's admission records of a day.
func dayRecordsKey(k store.Keys, product string, day int64) string {
	return k.Entity(tag, product, "adm@"+strconv.FormatInt(day, 10))
}

// recordsExpireAt is when the records hash of the day of admission id expires (unix s): the
// records' keep (recordKeep) after the day ends, or after now when that is later
// (admission/scripts/lib.lua record_keep, for the other scripts). One reserve.lua call sets it,
// from its latest purchase, on the hashes it wrote: a call that spans midnight keeps the earlier
// day's a day longer.
func (k *stockKind) recordsExpireAt(id string, now time.Time) int64 {
	end := (admission.RecordsDay(id) + 1) * 86400
	return max(end, now.Unix()) + k.recordKeep()
}

// recordKeep is how long (s) the stock scripts' records stay after their day: the retention, and at
// least recordTTL, which an unsettled admission's release and commit need. The event worker removes
// the settled ones once past the retention (admission/records.go), so a short retention still bounds them.
func (k *stockKind) recordKeep() int64 {
	s := k.s
	return int64(max(s.RecordsRetention(), admission.RecordTTL) / time.Second)
}

// The admin indexes of a product's admissions (admission/records.go), written by the event worker: the ids of
// each day's admissions in the order they were applied (a list: a few bytes each), and each buyer's
// ids (hash: user pseudonym -> ids, space-separated). The records themselves are the scripts' own.
func idsKey(k store.Keys, product string, day int64) string {
	return k.Entity(tag, product, "ids@"+strconv.FormatInt(day, 10))
}
func usersKey(k store.Keys, product string) string { return k.Entity(tag, product, "users") }

// legacyRecordKey: the hash per admission of builds before recordsKey, read beside it
// (admission/scripts/lib.lua) until the last of them expired (a record TTL after a rolling update).
func legacyRecordKey(k store.Keys, product, id string) string {
	return k.Entity(tag, product, "adm:"+id)
}

// stockKeys are the KEYS of release.lua, commit.lua and cancel.lua.
func stockKeys(k store.Keys, product, id string) []string {
	return []string{infoKey(k, product), stockKey(k, product), buyersKey(k, product), claimsKey(k, product),
		recordsKey(k, product, id), eventsKey(k, product), unsettledKey(k, product),
		legacyRecordKey(k, product, id)}
}

// productIndexKey: the set of product ids.
func productIndexKey(k store.Keys) string { return k.Global("adm", "products") }

// productSpellingsKey: the spellings index of products (admission/spellings.go).
func productSpellingsKey(k store.Keys) string { return k.Global("adm", "spellings:products") }
