package report

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
)

// gaugeNames are the series that are sampled values, not counts.
var gaugeNames = []string{Waiting, Active, Assigned, Serving, Stock}

func isGauge(name string) bool { return slices.Contains(gaugeNames, name) }

// Peaks are the gauges whose minute keeps its highest value (how long the line was at its longest),
// not its last; a point of several minutes likewise.
const Peaks = Waiting + "," + Active

func isPeak(name string) bool { return name == Waiting || name == Active }

// scopeData is one scope's series over a range, at the range's step.
type scopeData struct {
	counts map[string][]int64 // per point
	gauges map[string][]int64 // per point, the last value sampled by its end; -1 unknown
	waits  []map[int]int64    // per point: waiting-time bucket -> served visitors (queues)
	// unserved is, per point, the waits of visitors never served (gave up, turned away): bucket ->
	// visitors (queues).
	unserved []map[int]int64
	firsts   map[string]time.Time
	zeros    map[string][]time.Time
	any      bool // something was counted in the range
}

// window is a report's range split into points of step.
type window struct {
	from, to time.Time
	step     time.Duration
	n        int
	// mins is the window's length in whole minutes (rounded up), stepMins the step's.
	mins, stepMins int
}

func newWindow(from, to time.Time, step time.Duration) window {
	from = from.UTC().Truncate(time.Minute)
	n := int((to.Sub(from) + step - 1) / step)
	return window{from: from, to: to, step: step, n: max(n, 1),
		mins: int((to.Sub(from) + time.Minute - 1) / time.Minute), stepMins: int(step / time.Minute)}
}

// point is the index of the point holding minute t, or -1 outside the window.
func (w window) point(t time.Time) int {
	if t.Before(w.from) || !t.Before(w.to) {
		return -1
	}
	return int(t.Sub(w.from) / w.step)
}

// pointOf is the index of minute m of a day that starts dayOff
// minutes after the window (negative before it), as point answers for that minute, with integers only
// (the loops over every minute of every day call it).
func (w window) pointOf(dayOff, m int) int {
	i := dayOff + m
	if i < 0 || i >= w.mins {
		return -1
	}
	return i / w.stepMins
}

// offset is a day's start in minutes after the window's.
func (w window) offset(day time.Time) int { return int(day.Sub(w.from) / time.Minute) }

// days are the UTC days the window touches.
func (w window) days() []time.Time {
	var out []time.Time
	for d := dayStart(w.from); d.Before(w.to); d = d.Add(24 * time.Hour) {
		out = append(out, d)
	}
	return out
}

// reader reads scopes' day hashes.
type reader struct {
	client    redis.UniversalClient
	keys      store.Keys
	retention time.Duration
}

// readScopes reads several scopes of one kind over w in one pipeline: each day's hash, and the gauges
// last written on the days before the window (a gauge keeps its value until sampled again).
func (r reader) readScopes(ctx context.Context, kind Kind, ids []string, w window) ([]*scopeData, error) {
	days := w.days()
	back := int(r.retention / (24 * time.Hour))
	// Steps of whole quarter hours read the quarter-hour hashes alone (the window is aligned to them).
	quarters := w.stepMins%15 == 0 && w.from.Minute()%15 == 0
	pipe := r.client.Pipeline()
	all := make([][]*redis.MapStringStringCmd, len(ids))
	quarter := make([][]*redis.MapStringStringCmd, len(ids))
	before := make([][]*redis.StringCmd, len(ids))
	for i, id := range ids {
		for _, d := range days {
			if !quarters {
				all[i] = append(all[i], pipe.HGetAll(ctx, dayKey(r.keys, kind, id, d)))
			}
			quarter[i] = append(quarter[i], pipe.HGetAll(ctx, quarterKey(r.keys, kind, id, d)))
		}
		for j := 1; j <= back; j++ {
			before[i] = append(before[i], pipe.HGet(ctx, dayKey(r.keys, kind, id, days[0].Add(-time.Duration(j)*24*time.Hour)), "g"))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]*scopeData, len(ids))
	for i := range ids {
		sd := newScopeData(w, kind == Queue)
		baseline := map[string]int64{}
		for _, c := range before[i] { // newest first
			if g, err := c.Result(); err == nil {
				baseline = parseGauges(g)
				break
			}
		}
		for j := range days {
			fields, err := quarter[i][j].Result()
			if err != nil {
				return nil, err
			}
			sd.addDay(w, days[j], fields, baseline, 15, quarters)
			if !quarters {
				if fields, err = all[i][j].Result(); err != nil {
					return nil, err
				}
				sd.addDay(w, days[j], fields, baseline, 1, true)
			}
		}
		sd.fillGauges(w, baseline)
		out[i] = sd
	}
	return out, nil
}

func newScopeData(w window, waits bool) *scopeData {
	sd := &scopeData{counts: map[string][]int64{}, gauges: map[string][]int64{}, firsts: map[string]time.Time{},
		zeros: map[string][]time.Time{}}
	if waits {
		sd.waits, sd.unserved = make([]map[int]int64, w.n), make([]map[int]int64, w.n)
	}
	return sd
}

// parseGauges reads a "g" field: "<minute>|name=value;..." (or, as first written, without the minute).
func parseGauges(g string) map[string]int64 {
	out := map[string]int64{}
	if _, list, found := strings.Cut(g, "|"); found {
		g = list
	}
	for part := range strings.SplitSeq(g, ";") {
		name, value, ok := strings.Cut(part, "=")
		if n, err := strconv.ParseInt(value, 10, 64); ok && err == nil {
			out[name] = n
		}
	}
	return out
}

// addDay adds one day hash to the scope: its series hold a slot per res minutes (1 or 15), and are
// read only with series (the waits, first and zero fields always). Gauge samples before the window
// update baseline: the value the window starts with.
func (sd *scopeData) addDay(w window, day time.Time, fields map[string]string, baseline map[string]int64, res int, series bool) {
	off := w.offset(day)
	slots := minutesPerDay / res
	for f, v := range fields {
		switch {
		case f == "g":
		case strings.HasPrefix(f, "w:"):
			sd.addWaits(w, off, v, sd.waits)
		case strings.HasPrefix(f, "u:"):
			sd.addWaits(w, off, v, sd.unserved)
		case strings.HasPrefix(f, "first:"):
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				t := time.UnixMilli(ms).UTC()
				name := strings.TrimPrefix(f, "first:")
				if w.point(t) >= 0 && (sd.firsts[name].IsZero() || t.Before(sd.firsts[name])) {
					sd.firsts[name] = t
				}
			}
		case strings.HasPrefix(f, "zero:"):
			name := strings.TrimPrefix(f, "zero:")
			for s := range strings.SplitSeq(v, ",") {
				if ms, err := strconv.ParseInt(s, 10, 64); err == nil && w.point(time.UnixMilli(ms)) >= 0 {
					sd.zeros[name] = append(sd.zeros[name], time.UnixMilli(ms).UTC())
				}
			}
		case !series:
		case isGauge(f):
			peak := isPeak(f)
			points := sd.gauges[f]
			if points == nil {
				points = make([]int64, w.n)
				for i := range points {
					points[i] = -1
				}
				sd.gauges[f] = points
			}
			for i := range min(len(v)/slotBytes, slots) {
				x := slot(v, i)
				if x == 0 {
					continue
				}
				if m := i * res; off+m < 0 {
					baseline[f] = int64(x) - 1
				} else if p := w.pointOf(off, m); p >= 0 {
					// A sample alone is not activity (any): a product is sampled when created.
					if v := int64(x) - 1; !peak || v > points[p] {
						points[p] = v
					}
				}
			}
		default:
			points := sd.counts[f]
			for i := range min(len(v)/slotBytes, slots) {
				x := slot(v, i)
				if x == 0 {
					continue
				}
				if p := w.pointOf(off, i*res); p >= 0 {
					if points == nil {
						points = make([]int64, w.n)
						sd.counts[f] = points
					}
					points[p] += int64(x)
					sd.any = true
				}
			}
		}
	}
}

// addWaits adds an hour's waiting-time records (a "w:" or "u:" field of a day starting off minutes
// into the window) to points, the histograms of one family (nil: the scope keeps no waits).
func (sd *scopeData) addWaits(w window, off int, v string, points []map[int]int64) {
	if points == nil {
		return
	}
	for _, r := range waitRecords(v) {
		p := w.pointOf(off, r.minute)
		if p < 0 || r.minute >= minutesPerDay {
			continue
		}
		if points[p] == nil {
			points[p] = map[int]int64{}
		}
		points[p][r.bucket] += r.count
		sd.any = true
	}
}

// fillGauges carries each gauge's last sample forward over the points without one, starting from
// its value before the window (baseline); a gauge known only from before the window holds that value
// throughout.
func (sd *scopeData) fillGauges(w window, baseline map[string]int64) {
	for name, points := range sd.gauges {
		cur, ok := baseline[name]
		if !ok {
			cur = -1
		}
		for i, x := range points {
			if x >= 0 {
				cur = x
			}
			points[i] = cur
		}
	}
	for name, b := range baseline {
		if _, ok := sd.gauges[name]; !ok && isGauge(name) {
			points := make([]int64, w.n)
			for i := range points {
				points[i] = b
			}
			sd.gauges[name] = points
		}
	}
}

// total sums a count over the window.
func (sd *scopeData) total(name string) int64 {
	var t int64
	for _, x := range sd.counts[name] {
		t += x
	}
	return t
}

// refusals sums each code's refusals over the window.
func (sd *scopeData) refusals() map[string]int64 {
	out := map[string]int64{}
	for name := range sd.counts {
		if code, ok := strings.CutPrefix(name, refusedPrefix); ok {
			out[code] = sd.total(name)
		}
	}
	return out
}

// refusedPoints is every refusal per point, whatever the code.
func (sd *scopeData) refusedPoints(w window) []int64 {
	out := make([]int64, w.n)
	for name, points := range sd.counts {
		if strings.HasPrefix(name, refusedPrefix) {
			for i, x := range points {
				out[i] += x
			}
		}
	}
	return out
}

// percentile is the nearest-rank p-quantile of a histogram (bucket -> count), as the bucket's
// midpoint in seconds; NaN for an empty one.
func percentile(h map[int]int64, p float64) float64 {
	var total int64
	buckets := make([]int, 0, len(h))
	for b, n := range h {
		total += n
		buckets = append(buckets, b)
	}
	if total == 0 {
		return math.NaN()
	}
	slices.Sort(buckets)
	rank := int64(math.Ceil(p * float64(total)))
	rank = max(rank, 1)
	var seen int64
	for _, b := range buckets {
		seen += h[b]
		if seen >= rank {
			return BucketMid(b).Seconds()
		}
	}
	return BucketMid(buckets[len(buckets)-1]).Seconds()
}

// Samples are the minutes in which a gauge was sampled, and the last value sampled in each, from the
// day hashes of since's day to today's: a waiting room replica that starts during a drop learns from
// them when the positions before it started were handed out.
func (r Reader) Samples(ctx context.Context, kind Kind, id, gauge string, since time.Time) (minutes []time.Time, values []int64, err error) {
	var cmds []*redis.StringCmd
	var days []time.Time
	pipe := r.Client.Pipeline()
	for d := dayStart(since); !d.After(time.Now()); d = d.Add(24 * time.Hour) {
		days = append(days, d)
		cmds = append(cmds, pipe.HGet(ctx, dayKey(r.Keys, kind, id, d), gauge))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, err
	}
	for i, c := range cmds {
		v, err := c.Result()
		if err != nil {
			continue
		}
		for m := range min(len(v)/slotBytes, minutesPerDay) {
			if x := slot(v, m); x != 0 {
				minutes = append(minutes, days[i].Add(time.Duration(m)*time.Minute))
				values = append(values, int64(x)-1)
			}
		}
	}
	return minutes, values, nil
}
