package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// tickets is a scope registered as a package outside the report would register its kind's.
const tickets Kind = 't'

func init() {
	RegisterScope(tickets, ScopeInfo{Name: "tickets", Noun: "ticket", Series: []string{"entered", "committed"}})
}

// hostile is an owner's id the page must show as text.
const hostile = `<script>alert(1)</script>`

// A registered scope's owners are counted by a Tally, written by Writer.Flush and read back as a
// product's are: totals (0 included), points, refusals by code, under the kind's own hash tag (on a
// Cluster too: flush.lua's keys share the owner's slot).
func TestReport_ARegisteredScopesOwnersReadBackAsWritten(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		tally := NewTally()
		t1 := tally.Scope(tickets, "t1")
		t1.Add("entered", 5)
		t1.Add("committed", 3)
		t1.Refuse("SOLD_OUT")
		t1.Refuse("SOLD_OUT")
		t1.Refuse("TOO_MANY")
		tally.Scope(tickets, "t2").Add("entered", 1)
		tally.Scope(tickets, hostile).Add("committed", 2)
		tally.Scope(Product, "cap").Add(Admitted, 4)
		tally.Scope(Queue, "drop").Add(Joined, 1)
		w := Writer{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
		w.Flush(ctx, tally, tickets, nil)
		if n := s.Client.Exists(ctx, s.Keys.Global("t:t1", "rep@"+dayStart(time.Now()).Format(dayFormat))).Val(); n != 1 {
			t.Fatalf("no minute hash under {t:t1}")
		}
		rep := flushAndReadOwners(t, s, tally, map[Kind][]string{tickets: {"t2", "t1", "none", hostile}}, "cap")

		got := rep.Scopes["tickets"]
		ids := make([]string, 0, len(got))
		for _, o := range got {
			ids = append(ids, o.ID)
		}
		if !slices.Equal(ids, []string{hostile, "t1", "t2"}) {
			t.Fatalf("tickets %+v: want the three with data, in id order", got)
		}
		if c := got[1]; c.Counts["entered"] != 5 || c.Counts["committed"] != 3 || c.Refused["SOLD_OUT"] != 2 ||
			c.Refused["TOO_MANY"] != 1 || len(c.Refused) != 2 {
			t.Errorf("t1 %+v", c)
		}
		if n, ok := got[2].Counts["committed"]; !ok || n != 0 || got[2].Counts["entered"] != 1 {
			t.Errorf("t2 %+v: want committed 0, shown", got[2])
		}
		series := rep.Series.Scopes["tickets"]["t1"]
		if len(series.Counts["entered"]) != len(rep.Series.Minute) || sumOf(series.Counts["entered"]) != 5 ||
			maxOf(series.Counts["entered"]) != 5 || sumOf(series.Counts["committed"]) != 3 {
			t.Errorf("t1's points %+v", series.Counts)
		}
		if sumOf(series.Refused) != 3 || sumOf(series.RefusedByCode["SOLD_OUT"]) != 2 || sumOf(series.RefusedByCode["TOO_MANY"]) != 1 {
			t.Errorf("t1's refusals %v by code %v", series.Refused, series.RefusedByCode)
		}
		if len(rep.Products) != 1 || rep.Products[0].Admitted != 4 {
			t.Errorf("products %+v: a registered scope leaves them as they were", rep.Products)
		}

		body, err := rep.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			Scopes map[string][]ScopeSummary `json:"scopes"`
			Series struct {
				Scopes map[string]map[string]ScopeSeries `json:"scopes"`
			} `json:"series"`
		}
		if err := json.Unmarshal(body, &back); err != nil {
			t.Fatal(err)
		}
		if len(back.Scopes["tickets"]) != 3 || back.Series.Scopes["tickets"][hostile].Counts["committed"] == nil {
			t.Errorf("the JSON's scopes: %.600s", body)
		}
		if !strings.Contains(string(body), `{"id":"t2","counts":{"committed":0,"entered":1},"refused":{}}`) {
			t.Errorf("the JSON's t2: %.600s", body)
		}
	})
}

// The CSV has each owner's columns after the products' and auctions', and the page a table per
// scope before the charts and a chart per owner, every id escaped.
func TestReportPage_ShowsARegisteredScopesTableAndCharts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tally := NewTally()
		t1 := tally.Scope(tickets, "t1")
		t1.Add("entered", 5)
		t1.Add("committed", 3)
		t1.Refuse("SOLD_OUT")
		tally.Scope(tickets, hostile).Add("entered", 2)
		tally.Scope(Product, "cap").Add(Admitted, 4)
		tally.Scope(Queue, "drop").Add(Joined, 1)
		rep := flushAndReadOwners(t, s, tally, map[Kind][]string{tickets: {"t1", hostile}}, "cap")

		var buf bytes.Buffer
		if err := WriteCSV(&buf, rep); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		head := rows[0]
		want := []string{"product:cap:stock", "tickets:" + hostile + ":entered", "tickets:" + hostile + ":committed",
			"tickets:" + hostile + ":refused", "tickets:t1:entered", "tickets:t1:committed", "tickets:t1:refused",
			"tickets:t1:refused:SOLD_OUT"}
		if at := slices.Index(head, want[0]); at < 0 || !slices.Equal(head[at:], want) {
			t.Fatalf("the CSV's columns %q: want %q at the end", head, want)
		}
		cols := csvTotals(t, rep)
		if cols["tickets:t1:entered"] != 5 || cols["tickets:t1:committed"] != 3 || cols["tickets:t1:refused"] != 1 ||
			cols["tickets:t1:refused:SOLD_OUT"] != 1 || cols["tickets:"+hostile+":entered"] != 2 {
			t.Errorf("csv totals %v", cols)
		}

		page := renderPage(t, rep)
		table := `<h2 id="scope-tickets-h">Tickets</h2>`
		for _, want := range []string{table,
			`<th scope="col">Ticket</th><th scope="col" class="num">Entered</th><th scope="col" class="num">Committed</th>`,
			`<tr><th scope="row">t1</th><td class="num">5</td><td class="num">3</td><td class="text">1 sold out</td></tr>`,
			`<tr><th scope="row">&lt;script&gt;alert(1)&lt;/script&gt;</th><td class="num">2</td><td class="num">0</td><td class="text">none</td></tr>`,
			`<figcaption>Ticket t1</figcaption>`, `<figcaption>Ticket &lt;script&gt;alert(1)&lt;/script&gt;</figcaption>`,
			`<title id="s-tickets-1-t">Entered, committed and refused of ticket t1 per 1 min</title>`,
			`<desc id="s-tickets-1-d">5 entered, 3 committed, 1 refused.</desc>`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("the page has no %s", want)
			}
		}
		if strings.Contains(page, "<script") {
			t.Error("the page holds an owner's id unescaped")
		}
		if at, charts := strings.Index(page, table), strings.Index(page, `<section aria-labelledby="charts-h">`); at < 0 || charts < at ||
			strings.Index(page, `<h2 id="products-h">`) > at {
			t.Error("the scope's table must come after the products' and before the charts")
		}
	})
}

// A report in which no registered scope's owner counted anything has no "scopes" in its JSON, and
// its page no scope's table: as before scopes could be registered.
func TestReport_NoScopesKeyWithoutTheirData(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tally := NewTally()
		tally.Scope(Queue, "drop").Add(Joined, 1)
		tally.Scope(tickets, "elsewhere").Add("entered", 1) // not asked for
		rep := flushAndReadOwners(t, s, tally, map[Kind][]string{tickets: {"t1"}})
		body, err := rep.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Scopes != nil || rep.Series.Scopes != nil || strings.Contains(string(body), `"scopes"`) {
			t.Errorf("want no scopes: %.300s", body)
		}
		if page := renderPage(t, rep); strings.Contains(page, "scope-") {
			t.Error("the page shows a scope's table without data")
		}
	})
}

// The service asks Owners for every kind's ids: products and auctions as before, and the ids of each
// registered scope; the ids of a kind nobody registered are not read.
func TestReportService_ReadsTheOwnersOfEveryRegisteredScope(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		tally := NewTally()
		tally.Scope(Queue, "drop").Add(Joined, 1)
		tally.Scope(Product, "cap").Add(Admitted, 2)
		tally.Scope(tickets, "t1").Add("committed", 1)
		tally.Scope('z', "z1").Add("entered", 1)
		w := Writer{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
		for _, k := range []Kind{Queue, Product, tickets, 'z'} {
			w.Flush(ctx, tally, k, nil)
		}
		svc := reportService(s, 24*time.Hour, nil)
		svc.Owners = func(context.Context) (map[Kind][]string, error) {
			return map[Kind][]string{Product: {"cap"}, tickets: {"t1"}, 'z': {"z1"}}, nil
		}
		rep := readDefault(t, svc, "drop", time.Now())
		if len(rep.Products) != 1 || rep.Products[0].Admitted != 2 {
			t.Errorf("products %+v", rep.Products)
		}
		if len(rep.Scopes) != 1 || len(rep.Scopes["tickets"]) != 1 || rep.Scopes["tickets"][0].Counts["committed"] != 1 {
			t.Errorf("scopes %+v: want tickets' t1 alone", rep.Scopes)
		}
	})
}

func TestReport_RegisterScopePanicsOnATakenKindATakenNameOrNoName(t *testing.T) {
	for _, c := range []struct {
		name string
		kind Kind
		info ScopeInfo
	}{
		{"the products' kind", Product, ScopeInfo{Name: "other"}},
		{"the queues' kind", Queue, ScopeInfo{Name: "other"}},
		{"the auctions' kind", Auction, ScopeInfo{Name: "other"}},
		{"a kind registered before", tickets, ScopeInfo{Name: "other"}},
		{"a name registered before", 'u', ScopeInfo{Name: "tickets"}},
		{"no name", 'u', ScopeInfo{}},
		{"a name that is no key", 'u', ScopeInfo{Name: "Big Tickets"}},
		{"a kind that is no letter", '{', ScopeInfo{Name: "other"}},
		{"a series named like a gauge", 'u', ScopeInfo{Name: "other", Series: []string{"stock"}}},
		{"a series twice", 'u', ScopeInfo{Name: "other", Series: []string{"a", "a"}}},
		{"a series with a colon", 'u', ScopeInfo{Name: "other", Series: []string{"w:1"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterScope(%q, %+v) did not panic", rune(c.kind), c.info)
				}
			}()
			RegisterScope(c.kind, c.info)
		})
	}
	if scopes := registeredScopes(); len(scopes) != 1 || scopes[0].Name != "tickets" {
		t.Errorf("registered %+v: a refused registration must leave nothing behind", scopes)
	}
}

// flushAndReadOwners flushes a tally's queue, products and tickets and reads the last hour and the next
// minute with owners.
func flushAndReadOwners(t *testing.T, s *store.Store, tally *Tally, owners map[Kind][]string, products ...string) *Report {
	t.Helper()
	ctx := context.Background()
	w := Writer{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
	for _, k := range []Kind{Queue, Product, tickets} {
		w.Flush(ctx, tally, k, nil)
	}
	r := Reader{Client: s.Client, Keys: s.Keys, Retention: 24 * time.Hour}
	rep, err := r.Read(ctx, Query{Queue: "drop", From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Minute),
		Products: products, Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func renderPage(t *testing.T, rep *Report) string {
	t.Helper()
	p, err := NewPage()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Render(&buf, rep, PageOptions{Brand: "edgeq", CSVURL: "report?queue=drop"}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func sumOf(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}
