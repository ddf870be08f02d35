package report

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// fullDay is the two hashes of a day every minute of which counted something: what a queue or a
// product busy all day costs. Queues hold waitBuckets buckets of waiting times a minute.
func fullDay(kind Kind, waitBuckets int) (minutes, quarters map[string]any) {
	series := []string{Admitted, Committed, Released, Cancelled, Refused("INSUFFICIENT_STOCK"), Refused("ALREADY_PURCHASED")}
	gauges := []string{Stock}
	if kind == Queue {
		series = []string{Joined, Served, GaveUp, Completed, Abandoned, Expired, TurnstilePassed, TurnstileFailed,
			Refused("RATE_LIMITED"), Refused("INVALID_TURNSTILE_TOKEN")}
		gauges = []string{Waiting, Active, Assigned, Serving}
	}
	minutes, quarters = map[string]any{}, map[string]any{}
	for _, name := range append(series, gauges...) {
		v, q := "", ""
		for m := range minutesPerDay {
			v = set(v, m, uint32(m%97+1))
		}
		for i := range minutesPerDay / 15 {
			q = set(q, i, uint32(i%97+1))
		}
		minutes[name], quarters[name] = v, q
	}
	minutes["g"] = "stock=5"
	quarters["first:"+series[0]] = "1700000000000"
	hours := make([]string, 24)
	for m := range minutesPerDay {
		for b := range waitBuckets {
			hours[m/60] = appendWaitRecord(hours[m/60], waitRecord{minute: m, bucket: 400 + b*3, count: int64(b + 1)})
		}
	}
	if waitBuckets > 0 {
		for h, v := range hours {
			quarters["w:"+strconv.Itoa(h)] = v
		}
	}
	return minutes, quarters
}

func set(v string, m int, x uint32) string {
	for len(v) < (m+1)*slotBytes {
		v += "\x00\x00\x00\x00"
	}
	b := []byte(v)
	b[m*4], b[m*4+1], b[m*4+2], b[m*4+3] = byte(x>>24), byte(x>>16), byte(x>>8), byte(x)
	return string(b)
}

// BenchmarkReport_FourteenDaysTenQueuesFiftyProducts measures the report against its target
// (docs/benchmarks.md "The report": under 200 ms): a store holding 14 days of full one-minute
// buckets for 10 queues (10 waiting-time buckets a minute) and 50 products, and one queue's report
// over the 14 days with all 50 products (the default step, 15 minutes), JSON included. It
// reports the bytes a full day of a queue and of a product costs (MEMORY USAGE).
func BenchmarkReport_FourteenDaysTenQueuesFiftyProducts(b *testing.B) {
	s := storetest.Redis(b)
	ctx := context.Background()
	end := time.Now().UTC()
	queueMinutes, queueQuarters := fullDay(Queue, 10)
	productMinutes, productQuarters := fullDay(Product, 0)
	var products []string
	for p := range 50 {
		products = append(products, "product-"+strconv.Itoa(p))
	}
	write := func(kind Kind, id string, minutes, quarters map[string]any) {
		pipe := s.Client.Pipeline()
		for d := range 15 {
			day := end.Add(-time.Duration(d) * 24 * time.Hour)
			pipe.HSet(ctx, dayKey(s.Keys, kind, id, day), minutes)
			pipe.HSet(ctx, quarterKey(s.Keys, kind, id, day), quarters)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for q := range 10 {
		write(Queue, "queue-"+strconv.Itoa(q), queueMinutes, queueQuarters)
	}
	for _, p := range products {
		write(Product, p, productMinutes, productQuarters)
	}
	usage := func(kind Kind, id string) float64 {
		var total int64
		for _, key := range []string{dayKey(s.Keys, kind, id, end), quarterKey(s.Keys, kind, id, end)} {
			n, err := s.Client.MemoryUsage(ctx, key, 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			total += n
		}
		return float64(total)
	}
	r := Reader{Client: s.Client, Keys: s.Keys, Retention: 14 * 24 * time.Hour}
	q := Query{Queue: "queue-3", From: end.Add(-14 * 24 * time.Hour), To: end, Products: products}
	q.Step = defaultStep(q)
	b.ResetTimer()
	for b.Loop() {
		rep, err := r.Read(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Products) != 50 || rep.Summary.Joined == 0 {
			b.Fatalf("%d products, %d joined", len(rep.Products), rep.Summary.Joined)
		}
		if _, err := rep.JSON(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(usage(Queue, "queue-3"), "bytes/queue-day")
	b.ReportMetric(usage(Product, "product-7"), "bytes/product-day")
}

// BenchmarkReport_OneDayOfAQueue is the report an operator opens after a drop: the last 24 hours of one
// queue (full minutes) with 5 products, one-minute points.
func BenchmarkReport_OneDayOfAQueue(b *testing.B) {
	s := storetest.Redis(b)
	benchDay(b, s)
}

func benchDay(b *testing.B, s *store.Store) {
	ctx := context.Background()
	end := time.Now().UTC()
	qm, qq := fullDay(Queue, 10)
	pm, pq := fullDay(Product, 0)
	var products []string
	for p := range 5 {
		products = append(products, "p"+strconv.Itoa(p))
	}
	for _, day := range []time.Time{end, end.Add(-24 * time.Hour)} {
		s.Client.HSet(ctx, dayKey(s.Keys, Queue, "q", day), qm)
		s.Client.HSet(ctx, quarterKey(s.Keys, Queue, "q", day), qq)
		for _, id := range products {
			s.Client.HSet(ctx, dayKey(s.Keys, Product, id, day), pm)
			s.Client.HSet(ctx, quarterKey(s.Keys, Product, id, day), pq)
		}
	}
	r := Reader{Client: s.Client, Keys: s.Keys, Retention: 14 * 24 * time.Hour}
	q := Query{Queue: "q", From: end.Add(-24 * time.Hour), To: end, Step: time.Minute, Products: products}
	for b.Loop() {
		rep, err := r.Read(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rep.JSON(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTally_Add is what counting costs a request (an admission, a join): the scope's lookup and
// an atomic add, from every CPU at once.
func BenchmarkTally_Add(b *testing.B) {
	t := NewTally()
	for p := range 50 {
		t.Scope(Product, "product-"+strconv.Itoa(p))
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t.Scope(Product, "product-7").Add(Admitted, 1)
		}
	})
}

// appendWaitRecord adds a record to an hour's field (the benchmarks write days directly).
func appendWaitRecord(v string, r waitRecord) string {
	b := []byte(v)
	b = append(b, byte(r.minute>>8), byte(r.minute), byte(r.bucket>>8), byte(r.bucket),
		byte(r.count>>24), byte(r.count>>16), byte(r.count>>8), byte(r.count))
	return string(b)
}
