package report

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestWaitBucket_TheMidpointIsWithinOnePercentOfEveryWaitInIt(t *testing.T) {
	prev := -1
	for cs := int64(0); cs < 9_000_000; cs += 1 + cs/500 {
		d := time.Duration(cs) * 10 * time.Millisecond
		b := WaitBucket(d)
		if b < prev {
			t.Fatalf("bucket of %v is %d, below the bucket %d of a shorter wait", d, b, prev)
		}
		prev = b
		mid := BucketMid(b)
		if diff := math.Abs(float64(mid - d)); diff > 0.008*float64(d)+float64(5*time.Millisecond) {
			t.Fatalf("wait %v: bucket %d's midpoint %v is %v away", d, b, mid, time.Duration(diff))
		}
	}
	if b := WaitBucket(24 * time.Hour); b > 1216 {
		t.Fatalf("a day's wait is in bucket %d, past 1216", b)
	}
	if WaitBucket(-time.Second) != 0 {
		t.Fatal("a negative wait must count as 0")
	}
}

// Counts, gauges and waits of a queue and a product, flushed and read back, on each store (on a
// Cluster, each scope's keys share its slot and the reader's pipeline spans the slots).
func TestFlush_CountsGaugesAndWaitsReadBackAsWritten(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		w := Writer{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
		tally := NewTally()
		start := time.Now().UTC()
		q := tally.Scope(Queue, "drop")
		q.Add(Joined, 3)
		q.Add(Served, 2)
		q.Refuse("RATE_LIMITED")
		q.Refuse("RATE_LIMITED")
		q.Wait(1500 * time.Millisecond)
		q.Wait(30 * time.Second)
		meta := s.Keys.Queue("drop", "meta")
		s.Client.HSet(ctx, meta, "r_gave", 4)
		gauges := "waiting=7;active=2"
		extra := func(string) Extra {
			return Extra{Aux: meta, Gauges: gauges, Moves: "gave_up=r_gave", Peaks: Peaks, Always: true}
		}
		w.Flush(ctx, tally, Queue, extra)
		// A tick with nothing new writes nothing: the gauges did not change.
		w.Flush(ctx, tally, Queue, extra)
		gauges = "waiting=5;active=2"
		w.Flush(ctx, tally, Queue, extra)

		p := tally.Scope(Product, "sneaker")
		stock := s.Keys.Entity("p", "sneaker", "stock")
		s.Client.Set(ctx, stock, 2, 0)
		p.Add(Admitted, 1)
		pextra := func(string) Extra { return Extra{Aux: stock, AuxGauge: Stock, Firsts: Admitted, Zeros: Stock} }
		w.Flush(ctx, tally, Product, pextra)
		s.Client.Set(ctx, stock, 0, 0)
		p.Add(Admitted, 2)
		p.Refuse("SOLD_OUT")
		w.Flush(ctx, tally, Product, pextra)

		r := Reader{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
		rep, err := r.Read(ctx, Query{Queue: "drop", From: start.Add(-time.Hour), To: time.Now().Add(time.Minute),
			Products: []string{"sneaker", "other"}})
		if err != nil {
			t.Fatal(err)
		}
		sum := rep.Summary
		if sum.Joined != 3 || sum.Served != 2 || sum.GaveUp != 4 || sum.Refused["RATE_LIMITED"] != 2 {
			t.Fatalf("summary %+v", sum)
		}
		if v, _ := s.Client.HGet(ctx, meta, "r_gave").Result(); v != "" {
			t.Fatalf("the moved counter is still %q in the queue's hash: it would count twice", v)
		}
		if p50 := float64(sum.WaitSeconds.Served.P50); math.Abs(p50-1.5) > 0.02 {
			t.Fatalf("p50 %v, want 1.5", p50)
		}
		if mx := float64(sum.WaitSeconds.Served.Max); math.Abs(mx-30) > 0.25 {
			t.Fatalf("max %v, want 30", mx)
		}
		if sum.WaitSeconds.Everyone != sum.WaitSeconds.Served {
			t.Fatalf("everyone waited %+v, the served %+v: with nobody unserved they are the same", sum.WaitSeconds.Everyone,
				sum.WaitSeconds.Served)
		}
		last := len(rep.Series.Minute) - 1
		// waiting is a peak: its minute keeps the highest value written in it (7, then 5; 5 alone in
		// the last minute when the flushes straddled a minute's end).
		if got := rep.Series.Waiting[last]; maxOf(rep.Series.Waiting) != 7 || (got != 7 && got != 5) {
			t.Fatalf("waiting at the end %d, want the minute's peak 7 (%v)", got, rep.Series.Waiting)
		}
		if rep.Series.Waiting[0] != -1 {
			t.Fatalf("waiting before anything was sampled is %d, want unknown", rep.Series.Waiting[0])
		}
		if len(rep.Products) != 1 || rep.Products[0].ID != "sneaker" {
			t.Fatalf("products %+v: want sneaker alone (other has no data)", rep.Products)
		}
		ps := rep.Products[0]
		if ps.Admitted != 3 || ps.Refused["SOLD_OUT"] != 1 || ps.SoldOutAt == nil || ps.FirstAdmittedAt == nil ||
			ps.StockLeft == nil || *ps.StockLeft != 0 {
			t.Fatalf("product %+v", ps)
		}
		if ps.SoldOutAt.Before(start.Truncate(time.Millisecond)) || ps.FirstAdmittedAt.After(*ps.SoldOutAt) {
			t.Fatalf("sold out at %v, first admitted at %v, test started %v", ps.SoldOutAt, ps.FirstAdmittedAt, start)
		}
		// Read in quarter hours (the quarter-hour hashes alone), the counts are the same.
		wide, err := r.Read(ctx, Query{Queue: "drop", From: start.Add(-time.Hour), To: time.Now().Add(time.Minute),
			Step: 15 * time.Minute, Products: []string{"sneaker"}})
		if err != nil {
			t.Fatal(err)
		}
		if ws := wide.Summary; ws.Joined != 3 || ws.GaveUp != 4 || ws.WaitSeconds != sum.WaitSeconds ||
			wide.Products[0].Admitted != 3 || maxOf(wide.Series.Waiting) != 7 || wide.From.Minute()%15 != 0 {
			t.Fatalf("in quarter hours: %+v %+v from %v", ws, wide.Products, wide.From)
		}
		body, err := rep.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(body, &back); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if !strings.Contains(string(body), `"waiting":[null,`) {
			t.Fatalf("an unknown gauge must be null: %.300s", body)
		}
		ttl := s.Client.TTL(ctx, dayKey(s.Keys, Queue, "drop", time.Now())).Val()
		if ttl < 24*time.Hour || ttl > 48*time.Hour+time.Minute {
			t.Fatalf("the day's hash expires in %v, want the day's end plus the retention", ttl)
		}
	})
}

func TestRead_AGaugeHoldsItsValueFromTheDaysBefore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		old := dayStart(time.Now()).Add(-48 * time.Hour)
		key := dayKey(s.Keys, Product, "p", old)
		s.Client.HSet(ctx, key, "g", "stock=42")
		r := Reader{Client: s.Client, Keys: s.Keys, Retention: 72 * time.Hour}
		w := newWindow(time.Now().Add(-time.Hour), time.Now(), time.Minute)
		sd, err := reader{client: r.Client, keys: r.Keys, retention: r.Retention}.readScopes(ctx, Product, []string{"p"}, w)
		if err != nil {
			t.Fatal(err)
		}
		g := sd[0].gaugePoints(Stock, w)
		if g[0] != 42 || g[len(g)-1] != 42 {
			t.Fatalf("stock %v, want 42 throughout", g)
		}
		if sd[0].any {
			t.Fatal("a product with nothing in the range must be left out")
		}
	})
}

// The lottery is shown by the SHA-256 of its seed, never the seed; no draw is size 0 and no hash.
func TestNewLottery_ShowsTheSeedsHashOnly(t *testing.T) {
	l := NewLottery(120, "the-seed")
	// printf 'the-seed' | sha256sum
	if l.Size != 120 || l.SeedSHA256 != "53e37628178015b04f0c57b9ed18c3291b0808fe2e77b0dca3127630f8fb3693" {
		t.Fatalf("%+v", l)
	}
	if none := NewLottery(0, "seed"); none != (Lottery{}) {
		t.Fatalf("no draw: %+v", none)
	}
}

// A series never has more than MaxPoints points: the default step grows with the range (a minute, 5
// and 15 minutes, then whole hours), and Points counts what Read would make.
func TestDefaultStep_KeepsTheSeriesWithinMaxPoints(t *testing.T) {
	end := time.Date(2026, 11, 28, 10, 7, 0, 0, time.UTC)
	for _, c := range []struct {
		span time.Duration
		want time.Duration
	}{
		{time.Hour, time.Minute},
		{48 * time.Hour, time.Minute},
		{49 * time.Hour, 5 * time.Minute},
		{14 * 24 * time.Hour, 15 * time.Minute},
		{89 * 24 * time.Hour, time.Hour},
		{365 * 24 * time.Hour, 4 * time.Hour},
	} {
		q := Query{From: end.Add(-c.span), To: end}
		if q.Step = defaultStep(q); q.Step != c.want || q.Points() > MaxPoints {
			t.Errorf("%v: step %v (%d points), want %v", c.span, q.Step, q.Points(), c.want)
		}
	}
	q := Query{From: end.Add(-89 * 24 * time.Hour), To: end, Step: time.Minute}
	if got := q.Points(); got != 89*24*60 {
		t.Errorf("89 days in minutes: %d points", got)
	}
	// A step of quarter hours widens the window to them: 10:07 to 10:37 is three quarter hours.
	q = Query{From: end, To: end.Add(30 * time.Minute), Step: 15 * time.Minute}
	if got := q.Points(); got != 3 {
		t.Errorf("half an hour in quarter hours, unaligned: %d points", got)
	}
}
