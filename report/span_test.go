package report

import (
	"context"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// dayWriter writes a queue's minute hashes directly, as many ticks would have: counts, and the
// waiting gauge (its value plus one; an idle queue's replicas write 0 every minute).
type dayWriter struct {
	t     *testing.T
	s     *store.Store
	queue string
}

// fill sets series to value in the minutes [from, to) of the day that holds from.
func (d dayWriter) fill(series string, from, to time.Time, value uint32) {
	d.t.Helper()
	ctx := context.Background()
	key := dayKey(d.s.Keys, Queue, d.queue, from)
	v, _ := d.s.Client.HGet(ctx, key, series).Result()
	day := dayStart(from)
	for t := from; t.Before(to); t = t.Add(time.Minute) {
		v = set(v, int(t.Sub(day)/time.Minute), value)
	}
	if err := d.s.Client.HSet(ctx, key, series, v).Err(); err != nil {
		d.t.Fatal(err)
	}
}

// drop writes a drop over [from, to): a join and a token each minute, and somebody waiting.
func (d dayWriter) drop(from, to time.Time) {
	d.fill(Joined, from, to, 1)
	d.fill(Served, from, to, 1)
	d.fill(Waiting, from, to, 1+3)
}

// idle writes an idle queue's samples: nobody waiting, every minute of [from, to).
func (d dayWriter) idle(from, to time.Time) {
	for day := dayStart(from); day.Before(to); day = day.Add(24 * time.Hour) {
		start, end := day, day.Add(24*time.Hour)
		if from.After(start) {
			start = from
		}
		if to.Before(end) {
			end = to
		}
		d.fill(Waiting, start, end, 1)
	}
}

func reportService(s *store.Store, retention time.Duration, opening func() (time.Time, time.Time)) *Service {
	svc := &Service{
		Reader:  Reader{Client: s.Client, Keys: s.Keys, Retention: retention},
		Lottery: func(context.Context, string) (Lottery, bool) { return Lottery{}, true },
		Owners:  func(context.Context) (map[Kind][]string, error) { return nil, nil },
	}
	if opening != nil {
		svc.Opening = func(context.Context, string) (time.Time, time.Time) { return opening() }
	}
	return svc
}

// readDefault reads the report as the page and `edgeq report` do without a range.
func readDefault(t *testing.T, svc *Service, queue string, now time.Time) *Report {
	t.Helper()
	q, e := svc.ParseQuery(queue, "", "", now)
	if e != nil {
		t.Fatal(e)
	}
	rep, e := svc.Read(context.Background(), q)
	if e != nil {
		t.Fatal(e)
	}
	return rep
}

// Without a range the report covers the drop's own span: a short drop yesterday evening, not the
// last 24 hours (nor an earlier drop, nor today's idle samples); a scheduled pre-queue that began
// before the first join starts it, a schedule of another drop does not.
func TestReport_WithoutARangeCoversTheLastDrop(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC()
		today := dayStart(now)
		evening := today.Add(-24*time.Hour + 19*time.Hour)
		d := dayWriter{t, s, "drop"}
		d.idle(today.Add(-3*24*time.Hour), now)
		d.drop(today.Add(-3*24*time.Hour+10*time.Hour), today.Add(-3*24*time.Hour+11*time.Hour)) // an older drop
		d.drop(evening, evening.Add(20*time.Minute))
		// The line had emptied by 19:20; the last served visitor's session ended at 19:25 (the drop's end).
		d.fill(Active, evening.Add(20*time.Minute), evening.Add(25*time.Minute), 1+2)

		for _, c := range []struct {
			name               string
			joinsFrom, opensAt time.Time
			from               time.Time
		}{
			{"no schedule", time.Time{}, time.Time{}, evening},
			{"a pre-queue from 18:30 for 19:00", evening.Add(-30 * time.Minute), evening, evening.Add(-30 * time.Minute)},
			{"last week's schedule", evening.Add(-7 * 24 * time.Hour), evening.Add(-7*24*time.Hour + time.Hour), evening},
			{"tomorrow's schedule", evening.Add(47 * time.Hour), evening.Add(48 * time.Hour), evening},
		} {
			t.Run(c.name, func(t *testing.T) {
				svc := reportService(s, 14*24*time.Hour, func() (time.Time, time.Time) { return c.joinsFrom, c.opensAt })
				rep := readDefault(t, svc, "drop", now)
				if want := evening.Add(25 * time.Minute); !rep.From.Equal(c.from) || !rep.To.Equal(want) {
					t.Fatalf("span %v – %v, want %v – %v", rep.From, rep.To, c.from, want)
				}
				if rep.Summary.Joined != 20 || rep.StepSeconds != 60 {
					t.Errorf("joined %d in steps of %d s; want the evening's 20 in minutes", rep.Summary.Joined, rep.StepSeconds)
				}
			})
		}
		// A range asked for still wins.
		q, e := reportService(s, 14*24*time.Hour, nil).ParseQuery("drop", "", now.Format(time.RFC3339), now)
		if e != nil {
			t.Fatal(e)
		}
		if !q.To.Equal(now.Truncate(time.Second)) || !q.From.Equal(q.To.Add(-24*time.Hour)) {
			t.Errorf("to alone: %v – %v, want the 24 hours before it", q.From, q.To)
		}
	})
}

// A drop across midnight is one span: its days are read back to the quiet before it.
func TestDropSpan_ADropAcrossMidnight(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC()
		midnight := dayStart(now).Add(-24 * time.Hour)
		d := dayWriter{t, s, "late"}
		d.idle(midnight.Add(-48*time.Hour), now)
		d.drop(midnight.Add(-20*time.Minute), midnight)
		// Nothing counted in the night's first minutes (the last ones waited), then the end.
		d.fill(Waiting, midnight, midnight.Add(5*time.Minute), 1+7)
		d.drop(midnight.Add(5*time.Minute), midnight.Add(15*time.Minute))
		// Two quiet hours before it, another drop.
		d.drop(midnight.Add(-4*time.Hour), midnight.Add(-140*time.Minute))
		r := Reader{Client: s.Client, Keys: s.Keys, Retention: 7 * 24 * time.Hour}
		from, to, found, err := r.DropSpan(context.Background(), "late", now)
		if err != nil || !found {
			t.Fatalf("found %v, %v", found, err)
		}
		if !from.Equal(midnight.Add(-20*time.Minute)) || !to.Equal(midnight.Add(15*time.Minute)) {
			t.Errorf("span %v – %v, want 23:40 – 00:15 around %v", from, to, midnight)
		}
	})
}

// With nothing recorded within the retention (an idle queue's samples are not a drop) the report
// falls back to the last 24 hours.
func TestReport_WithNothingRecordedCoversTheLastDay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC()
		d := dayWriter{t, s, "calm"}
		d.idle(now.Add(-48*time.Hour), now)
		// A drop older than the retention's days is gone from the store, and not looked for.
		d.drop(dayStart(now).Add(-5*24*time.Hour+time.Hour), dayStart(now).Add(-5*24*time.Hour+2*time.Hour))
		r := Reader{Client: s.Client, Keys: s.Keys, Retention: 48 * time.Hour}
		if _, _, found, err := r.DropSpan(context.Background(), "calm", now); found || err != nil {
			t.Fatalf("found %v, %v: want nothing", found, err)
		}
		rep := readDefault(t, reportService(s, 48*time.Hour, nil), "calm", now)
		if !rep.To.Equal(now) || !rep.From.Equal(now.Add(-24*time.Hour).Truncate(time.Minute)) {
			t.Errorf("span %v – %v, want the 24 hours before %v", rep.From, rep.To, now)
		}
	})
}
