package vocab

import "time"

// Namespace is the prefix of every metric edgeq exports (prometheus Opts.Namespace): edgeq_...
const Namespace = "edgeq"

// FormatTime writes t as edgeq's answers and admin views write a time (opens_at, joins_from...):
// RFC 3339 in UTC, whole seconds ("2026-05-01T09:00:00Z").
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// MilliTime is the layout of a time to the millisecond, fixed width (RFC 3339 with exactly three
// digits of fraction): the text log's time and the times of admission records.
const MilliTime = "2006-01-02T15:04:05.000Z07:00"

// FormatMilli writes t in the MilliTime layout, in UTC; "" for the zero time (a time not known yet).
func FormatMilli(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(MilliTime)
}

// FormatUnixMilli is FormatMilli of a time in Unix milliseconds (as the scripts stamp events).
func FormatUnixMilli(ms int64) string { return time.UnixMilli(ms).UTC().Format(MilliTime) }

// ParseMilli reads a time FormatMilli wrote; the zero time for "" or a malformed text.
func ParseMilli(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(MilliTime, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
