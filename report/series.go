// Package report keeps what happened during a drop for the operator after it (docs/reference.md "The
// report"): per queue, product and auction, and per owner of the scopes other packages register
// (RegisterScope), one-minute buckets of counts (joins, tokens issued, refusals by code, ...), sampled
// gauges (waiting, stock, ...) and a histogram of waiting times, in the store for report.retention;
// and it reads them back into the report (JSON, CSV, an HTML page with charts drawn as inline SVG).
//
// Facts are counted in memory by the replica that saw them (Tally) and written once per tick, one
// script call per scope with something to write (flush.lua); never a Redis call per request. A crash
// loses at most the counts of one tick.
package report

import (
	"math"
	"math/bits"
	"time"

	"github.com/edgeq/edgeq/internal/store"
)

// Kind is what a scope's series are about: the report's own (Queue, Product, Auction), or a letter a
// package registered (RegisterScope).
type Kind byte

const (
	Queue   Kind = 'q'
	Product Kind = 'p'
	Auction Kind = 'a'
)

// Series names, as the store keeps them and the report's JSON and CSV mostly spell them
// (docs/report.md defines each figure; "committed" is shown as "sold", the turned-away pair under
// "turned_away").
const (
	// A queue's counts.
	Joined = "joined"  // places taken (joins and invitations used)
	Served = "served"  // tokens issued
	GaveUp = "gave_up" // left before their turn: reached and gone, skipped, or gone at sell-out or close
	// Still waiting, and there, when the queue sold out or closed: shown the end of the drop.
	TurnedAwaySoldOut = "turned_away_sold_out"
	TurnedAwayClosed  = "turned_away_closed"
	Completed         = "completed"        // sessions completed
	Abandoned         = "abandoned"        // sessions (or waits) abandoned
	Expired           = "expired"          // tokens that ran out
	Revoked           = "revoked"          // live tokens ended by a completion or an abandonment
	TurnstilePassed   = "turnstile_passed" // join-time Turnstile checks
	TurnstileFailed   = "turnstile_failed"
	// A queue's gauges, sampled each tick.
	Waiting  = "waiting"  // not reached yet, or reached without a token
	Active   = "active"   // live tokens
	Assigned = "assigned" // last position handed out
	Serving  = "serving"  // serving rank

	// A product's counts and gauge.
	Admitted  = "admitted"
	Committed = "committed" // the shop accepted the purchase: the report's "sold"
	Released  = "released"  // given back (the shop refused it, or its replica died)
	Cancelled = "cancelled" // cancelled by an operator
	Restocked = "restocked" // units added by restocks
	Stock     = "stock"     // units left (gauge)

	// An auction's counts.
	Accepted = "accepted"

	// refusedPrefix starts the series of refusals by code: "refused:SOLD_OUT".
	refusedPrefix = "refused:"
)

// Refused is the series name of the refusals of one code.
func Refused(code string) string { return refusedPrefix + code }

// RetentionDefault is report.retention's default.
const RetentionDefault = 336 * time.Hour

// Storage. Each scope keeps two hashes per UTC day, under its entity's hash tag ({q:<id>}, {p:<id>},
// {a:<id>}, and {<kind>:<id>} for a registered scope; day as 2006-01-02):
//
// rep@<day>, the minutes:
//   - a series field holds 1,440 four-byte big-endian numbers, one per minute of the day (shorter
//     when the day's later minutes were never written): counts, or a gauge's value plus one (0: not
//     sampled in that minute; a gauge holds its value until the next sample);
//   - "g" is the gauges as last written ("name=value;..."), so that a tick whose gauges did not change
//     writes nothing.
//
// repq@<day>, the quarter hours, which ranges read in steps of 15 minutes or more (a fifteenth of the
// bytes), and what every range reads:
//   - a series field holds 96 numbers, one per quarter hour, as above;
//   - "w:<hour>" holds the waiting times of the hour's minutes: records of the minute of the day and a
//     bucket (WaitBucket, two bytes each) and how many waits fell in it (four), in time order;
//   - "u:<hour>" likewise the waits of visitors never served (they gave up, or were turned away),
//     apart so that the served visitors' percentiles stay theirs;
//   - "first:<series>" is the store's time (ms) of the day's first count of a series asked for;
//     "zero:<gauge>" the times (ms, comma-separated) a gauge went from more than zero to zero.
const (
	minutesPerDay = 24 * 60
	slotBytes     = 4
	maxSlot       = math.MaxUint32
)

// dayFormat names a day's hash.
const dayFormat = "2006-01-02"

// dayKey is the minute hash of one scope's day.
func dayKey(k store.Keys, kind Kind, id string, day time.Time) string {
	return entityKey(k, kind, id, "rep@"+day.UTC().Format(dayFormat))
}

// quarterKey is the quarter-hour hash of one scope's day.
func quarterKey(k store.Keys, kind Kind, id string, day time.Time) string {
	return entityKey(k, kind, id, "repq@"+day.UTC().Format(dayFormat))
}

// entityKey is a key of one scope, under the hash tag of its kind's letter and its id: a queue's
// "{q:<id>}", a product's "{p:<id>}", a registered scope's "{t:<id>}".
func entityKey(k store.Keys, kind Kind, id, part string) string {
	return k.Entity(string(rune(kind)), id, part)
}

// dayStart is the UTC midnight that starts t's day.
func dayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Waiting times are kept in log-linear buckets of centiseconds: below 64 cs (0.64 s) one bucket per
// centisecond, above it 64 buckets per doubling. A bucket's midpoint is within 0.8 % of every wait in
// it (about 0.25 s for a wait of 30 s), and a day's longest wait falls in bucket 1,216 or below.
const waitSubBuckets = 64

// WaitBucket is the bucket of a waiting time (negative waits count as 0).
func WaitBucket(d time.Duration) int {
	cs := uint64(max(0, d/(10*time.Millisecond)))
	if cs < waitSubBuckets {
		return int(cs)
	}
	e := bits.Len64(cs) - 7 // cs >> e is in [64, 128)
	//nolint:gosec // cs>>e is in [64, 128)
	return waitSubBuckets + e*waitSubBuckets + int(cs>>e) - waitSubBuckets
}

// bucketBounds are the smallest and one past the largest centisecond count of a bucket.
func bucketBounds(b int) (lo, hi uint64) {
	if b < waitSubBuckets {
		//nolint:gosec // b is in [0, waitSubBuckets)
		return uint64(b), uint64(b) + 1
	}
	e := (b - waitSubBuckets) / waitSubBuckets
	sub := uint64((b-waitSubBuckets)%waitSubBuckets + waitSubBuckets)
	return sub << e, (sub + 1) << e
}

// BucketMid is the midpoint of a bucket, the wait the report shows for it.
func BucketMid(b int) time.Duration {
	lo, hi := bucketBounds(b)
	//nolint:gosec // bucket bounds of waits that were durations
	return time.Duration(lo+hi) * 5 * time.Millisecond
}

// waitRecord is one record of an hour's waiting times ("w:<hour>", "u:<hour>"): the minute of the day, the bucket
// and how many visitors' waits fell in it, eight bytes.
type waitRecord struct {
	minute, bucket int
	count          int64
}

// waitRecords reads an hour's field.
func waitRecords(v string) []waitRecord {
	out := make([]waitRecord, 0, len(v)/8)
	for o := 0; o+8 <= len(v); o += 8 {
		out = append(out, waitRecord{minute: int(v[o])<<8 | int(v[o+1]), bucket: int(v[o+2])<<8 | int(v[o+3]),
			count: int64(slot(v[o+4:o+8], 0))})
	}
	return out
}

// slot reads minute i of a series field (0 past its end).
func slot(v string, i int) uint32 {
	o := i * slotBytes
	if o+slotBytes > len(v) {
		return 0
	}
	return uint32(v[o])<<24 | uint32(v[o+1])<<16 | uint32(v[o+2])<<8 | uint32(v[o+3])
}
