package report

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// QuietGap is how long a queue stays quiet between two drops: nothing counted, nobody waiting and
// nobody inside. A drop's own span (DropSpan) is the last stretch of minutes with something in them
// whose quiet gaps are all shorter.
const QuietGap = time.Hour

// DropSpan is the span of the queue's last drop, read from its minute hashes: from its first minute
// with something counted, or somebody waiting or inside, to a minute after its last. It reads day
// hashes from now's day backwards, within the retention, until it has found the last busy minute and
// then a quiet gap of QuietGap before the first (or the retention's start): a drop across midnight
// reads both its days, and a quiet day costs its waiting and active samples alone. found is false
// when nothing was recorded within the retention.
func (r Reader) DropSpan(ctx context.Context, queue string, now time.Time) (from, to time.Time, found bool, err error) {
	oldest := dayStart(now.Add(-max(r.Retention, time.Hour)))
	var first, last time.Time
	for day := dayStart(now); !day.Before(oldest); day = day.Add(-24 * time.Hour) {
		busy, err := r.busyMinutes(ctx, queue, day)
		if err != nil {
			return time.Time{}, time.Time{}, false, err
		}
		for m := minutesPerDay - 1; m >= 0; m-- {
			if !busy[m] {
				continue
			}
			t := day.Add(time.Duration(m) * time.Minute)
			switch {
			case last.IsZero():
				last = t
			case first.Sub(t)-time.Minute > QuietGap:
				return first, last.Add(time.Minute), true, nil
			}
			first = t
		}
		if !first.IsZero() && first.Sub(day) > QuietGap {
			break // quiet since the day began: the day before is another drop's, or none
		}
	}
	if last.IsZero() {
		return time.Time{}, time.Time{}, false, nil
	}
	return first, last.Add(time.Minute), true, nil
}

// busyMinutes reads one day's minute hash of a queue and tells, for each minute, whether something was
// counted in it or somebody waited or was inside. A queue's replicas sample waiting and active every
// minute even when nobody is there (as zero): those samples alone are not a drop.
func (r Reader) busyMinutes(ctx context.Context, queue string, day time.Time) ([]bool, error) {
	fields, err := r.Client.HGetAll(ctx, dayKey(r.Keys, Queue, queue, day)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	busy := make([]bool, minutesPerDay)
	for name, v := range fields {
		// A gauge's slot is its value plus one; a count's, the count.
		var threshold uint32
		switch {
		case name == "g" || name == Assigned || name == Serving:
			continue // the last gauges written, and positions: they stand still between drops
		case name == Waiting || name == Active:
			threshold = 1
		}
		for m := range min(len(v)/slotBytes, minutesPerDay) {
			if slot(v, m) > threshold {
				busy[m] = true
			}
		}
	}
	return busy, nil
}
