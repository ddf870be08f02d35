package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// flushAndRead flushes a tally's queue and products and reads the last hour and the next minute.
func flushAndRead(t *testing.T, s *store.Store, tally *Tally, products ...string) *Report {
	t.Helper()
	ctx := context.Background()
	w := Writer{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
	w.Flush(ctx, tally, Queue, nil)
	w.Flush(ctx, tally, Product, nil)
	r := Reader{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
	rep, err := r.Read(ctx, Query{Queue: "drop", From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Minute),
		Products: products})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// near reports whether a wait in seconds is within the histogram's resolution of want.
func near(got Seconds, want float64) bool {
	return got.Valid() && math.Abs(float64(got)-want) <= 0.01*want+0.01
}

// The served visitors' waits ("w:") and those of visitors never served ("u:") are kept apart: the
// served percentiles are theirs alone, everyone's are the two merged, and the per-point percentiles
// stay the served ones.
func TestRead_WaitsOfEveryoneMergeTheServedAndTheUnserved(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tally := NewTally()
		q := tally.Scope(Queue, "drop")
		q.Add(Served, 2)
		q.Wait(10 * time.Second)
		q.Wait(10 * time.Second)
		q.Add(GaveUp, 1)
		q.WaitUnserved(100 * time.Second)
		q.Add(TurnedAwaySoldOut, 1)
		q.WaitUnserved(100 * time.Second)
		rep := flushAndRead(t, s, tally)
		served, everyone := rep.Summary.WaitSeconds.Served, rep.Summary.WaitSeconds.Everyone
		if !near(served.P50, 10) || !near(served.P90, 10) || !near(served.Max, 10) {
			t.Errorf("the served waited %+v, want 10 s throughout", served)
		}
		// Four waits, two of 10 s and two of 100 s: the nearest-rank median is the second (10 s), p90
		// and the longest the fourth.
		if !near(everyone.P50, 10) || !near(everyone.P90, 100) || !near(everyone.Max, 100) {
			t.Errorf("everyone waited %+v, want a median of 10 s and a p90 of 100 s", everyone)
		}
		if h := Headline(rep); !strings.Contains(h, "median wait 10 s (p90 10 s; everyone's 10 s, p90 1 min") {
			t.Errorf("headline %q: want the served visitors' waits, then everyone's", h)
		}
		var p50 []Seconds
		for _, v := range rep.Series.WaitP50 {
			if v.Valid() {
				p50 = append(p50, v)
			}
		}
		if len(p50) != 1 || !near(p50[0], 10) {
			t.Errorf("the per-point medians %v: want the served visitors' 10 s in one point", p50)
		}
		fields, err := s.Client.HKeys(context.Background(), quarterKey(s.Keys, Queue, "drop", time.Now())).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(fields, func(f string) bool { return strings.HasPrefix(f, "u:") }) {
			t.Errorf("the quarter-hour hash holds %v: no u:<hour> field", fields)
		}
	})
}

// With no wait counted, every percentile is null in JSON, the served and everyone's alike.
func TestRead_WaitsAreNullWithoutData(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tally := NewTally()
		tally.Scope(Queue, "drop").Add(Joined, 1)
		rep := flushAndRead(t, s, tally)
		body, err := rep.JSON()
		if err != nil {
			t.Fatal(err)
		}
		nulls := `{"p50":null,"p90":null,"p99":null,"max":null}`
		if want := `"wait_seconds":{"served":` + nulls + `,"everyone":` + nulls + `}`; !strings.Contains(string(body), want) {
			t.Errorf("want %s in %.400s", want, body)
		}
	})
}

// Visitors still waiting when the queue sold out or closed are counted apart from those who gave up,
// in the summary, the series and the CSV.
func TestRead_TurnedAwayAtSellOutAndAtClose(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tally := NewTally()
		q := tally.Scope(Queue, "drop")
		q.Add(Joined, 10)
		q.Add(GaveUp, 2)
		q.Add(TurnedAwaySoldOut, 5)
		q.Add(TurnedAwayClosed, 3)
		rep := flushAndRead(t, s, tally)
		if got := rep.Summary.TurnedAway; got != (TurnedAway{SoldOut: 5, Closed: 3}) || rep.Summary.GaveUp != 2 {
			t.Fatalf("turned away %+v, gave up %d; want 5 at sell-out, 3 at close, 2 gave up", got, rep.Summary.GaveUp)
		}
		if maxOf(rep.Series.TurnedAway.SoldOut) != 5 || maxOf(rep.Series.TurnedAway.Closed) != 3 {
			t.Errorf("series %+v", rep.Series.TurnedAway)
		}
		body, _ := rep.JSON()
		if !strings.Contains(string(body), `"turned_away":{"sold_out":5,"closed":3}`) {
			t.Errorf("the JSON's summary: %.400s", body)
		}
		cols := csvTotals(t, rep)
		if cols["turned_away:sold_out"] != 5 || cols["turned_away:closed"] != 3 || cols["gave_up"] != 2 {
			t.Errorf("csv totals %v", cols)
		}
		if h := Headline(rep); !strings.Contains(h, "2 left before their turn, 5 turned away at sell-out, 3 turned away at close") {
			t.Errorf("headline %q", h)
		}
	})
}

// A product's admitted units are sold (the shop's answer kept them), released, cancelled, or still
// held; held never goes below zero when the range holds a settlement of an earlier admission.
func TestRead_ProductsSayHeldAndSold(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tally := NewTally()
		p := tally.Scope(Product, "cap")
		p.Add(Admitted, 10)
		p.Add(Committed, 6)
		p.Add(Released, 1)
		p.Add(Cancelled, 1)
		early := tally.Scope(Product, "early")
		early.Add(Committed, 1) // admitted before the range
		rep := flushAndRead(t, s, tally, "cap", "early")
		if len(rep.Products) != 2 {
			t.Fatalf("products %+v", rep.Products)
		}
		c, e := rep.Products[0], rep.Products[1]
		if c.Admitted != 10 || c.Sold != 6 || c.Released != 1 || c.Cancelled != 1 || c.Held != 2 {
			t.Errorf("cap %+v: want 10 admitted, 6 sold, 1 released, 1 cancelled, 2 held", c)
		}
		if e.Sold != 1 || e.Held != 0 {
			t.Errorf("early %+v: want 1 sold, 0 held", e)
		}
		body, _ := rep.JSON()
		var back struct {
			Products []map[string]any `json:"products"`
			Series   struct {
				Products map[string]map[string]any `json:"products"`
			} `json:"series"`
		}
		if err := json.Unmarshal(body, &back); err != nil {
			t.Fatal(err)
		}
		if _, ok := back.Products[0]["committed"]; ok || back.Products[0]["held"] != 2.0 || back.Products[0]["sold"] != 6.0 {
			t.Errorf("the JSON's product %v: want held and sold, no committed", back.Products[0])
		}
		if _, ok := back.Series.Products["cap"]["sold"]; !ok {
			t.Errorf("the JSON's series of cap %v: want sold", back.Series.Products["cap"])
		}
		if cols := csvTotals(t, rep); cols["product:cap:sold"] != 6 || cols["product:cap:admitted"] != 10 {
			t.Errorf("csv totals %v", cols)
		}
		if h := Headline(rep); !strings.Contains(h, "cap sold 6 units") || !strings.Contains(h, "1 cancelled") {
			t.Errorf("headline %q: want the units sold, not admitted", h)
		}
		if notes := heldNotes(rep); len(notes) != 1 || notes[0] != "2 more units of cap held: the shop has not answered yet." {
			t.Errorf("notes %q", notes)
		}
	})
}

// csvTotals sums each column of the report's CSV.
func csvTotals(t *testing.T, rep *Report) map[string]int64 {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, rep); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, row := range rows[1:] {
		for j, cell := range row {
			if n, err := strconv.ParseInt(cell, 10, 64); err == nil {
				out[rows[0][j]] += n
			}
		}
	}
	return out
}
