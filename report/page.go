package report

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// Page renders reports as HTML: the admin listener's GET /report and the file `edgeq report -out`
// writes. The page holds its style and charts itself: nothing is loaded from anywhere.
type Page struct {
	tmpl *template.Template
	css  string
	// CSP is the page's Content-Security-Policy: its own inline style (by hash), nothing else.
	CSP string
}

// NewPage parses the report page.
func NewPage() (*Page, error) {
	t, err := templates.Report(nil)
	if err != nil {
		return nil, err
	}
	css, err := static.Read("report.css")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(css)
	return &Page{tmpl: t, css: string(css), CSP: "default-src 'none'; style-src 'sha256-" +
		base64.StdEncoding.EncodeToString(sum[:]) + "'; img-src data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"}, nil
}

// PageOptions are what differs between the served page and the file.
type PageOptions struct {
	Brand string
	// Offline leaves out what needs the admin listener (the range form, the CSV link).
	Offline bool
	// CSVURL is the link to the same range as CSV.
	CSVURL string
}

type pageData struct {
	Brand, Queue, Range, Headline string
	CSS                           template.CSS
	Offline                       bool
	CSVURL                        string
	FromInput, ToInput            string
	// Notes follow the headline: what it leaves out (units still held).
	Notes     []string
	Figures   []figure
	Charts    []chart
	Products  []productRow
	Scopes    []scopeTable // the registered scopes' tables (page_scopes.go)
	Generated string
}

type figure struct{ Name, Value string }

type chart struct {
	Heading string
	SVG     template.HTML
}

type productRow struct {
	ID, Admitted, Sold, Held, Released, Cancelled, Restocked, Refused, SoldOut, Left string
}

// Render writes the page of r; it is rendered whole before anything is written.
func (p *Page) Render(w io.Writer, r *Report, o PageOptions) error {
	//nolint:gosec // report.css embedded in the binary, not input
	d := pageData{Brand: o.Brand, Queue: r.Queue, CSS: template.CSS(p.css), Offline: o.Offline, CSVURL: o.CSVURL,
		Range:     r.From.Format("2 Jan 2006 15:04") + " – " + r.To.Format("2 Jan 2006 15:04") + " UTC",
		FromInput: r.From.Format("2006-01-02T15:04"), ToInput: r.To.Format("2006-01-02T15:04"),
		Headline: Headline(r), Notes: heldNotes(r), Generated: vocab.FormatTime(time.Now())}
	d.Figures = figures(r)
	d.Charts = charts(r)
	d.Scopes = tablesOf(r)
	for _, ps := range r.Products {
		row := productRow{ID: ps.ID, Admitted: thousands(ps.Admitted), Sold: thousands(ps.Sold), Held: thousands(ps.Held),
			Released: thousands(ps.Released), Cancelled: thousands(ps.Cancelled), Restocked: thousands(ps.Restocked),
			Refused: orNone(refusalText(ps.Refused)), SoldOut: "not sold out", Left: "unknown"}
		if ps.SoldOutAt != nil {
			row.SoldOut = ps.SoldOutAt.UTC().Format("15:04:05 UTC")
			if ps.FirstAdmittedAt != nil {
				row.SoldOut += " (" + humanDuration(ps.SoldOutAt.Sub(*ps.FirstAdmittedAt)) + " after the first sale)"
			}
		}
		if ps.StockLeft != nil {
			row.Left = thousands(*ps.StockLeft)
		}
		d.Products = append(d.Products, row)
	}
	var buf bytes.Buffer
	if err := p.tmpl.Execute(&buf, d); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Headline is the report's first sentence: "12,345 joined, 9,876 served, median wait 3 min 12 s (p90
// 11 min; everyone's 4 min 2 s, p90 14 min), 2,301 left before their turn, 168 turned away at
// sell-out; sneaker-a sold 500 units in 41 s, 4,120 refused: 3,990 sold out, 130 already purchased".
// A product's units are those the shop's answers kept (sold), not those admitted: some may still be
// held (heldNotes), released or cancelled.
func Headline(r *Report) string {
	s := r.Summary
	parts := []string{thousands(s.Joined) + " joined", thousands(s.Served) + " served"}
	if wait := waitPhrase(s.WaitSeconds); wait != "" {
		parts = append(parts, wait)
	}
	parts = append(parts, thousands(s.GaveUp)+" left before their turn")
	if n := s.TurnedAway.SoldOut; n > 0 {
		parts = append(parts, thousands(n)+" turned away at sell-out")
	}
	if n := s.TurnedAway.Closed; n > 0 {
		parts = append(parts, thousands(n)+" turned away at close")
	}
	text := strings.Join(parts, ", ")
	for _, p := range r.Products {
		t := p.ID + " sold " + thousands(p.Sold) + " " + plural(p.Sold, "unit", "units")
		if p.SoldOutAt != nil && p.FirstAdmittedAt != nil {
			t += " in " + humanDuration(p.SoldOutAt.Sub(*p.FirstAdmittedAt))
		} else if p.StockLeft != nil {
			t += " (" + thousands(*p.StockLeft) + " left)"
		}
		if p.Cancelled > 0 {
			t += ", " + thousands(p.Cancelled) + " cancelled"
		}
		if n := sum(p.Refused); n > 0 {
			t += ", " + thousands(n) + " refused: " + refusalText(p.Refused)
		}
		text += "; " + t
	}
	for _, a := range r.Auctions {
		t := a.ID + " took " + thousands(a.Accepted) + " " + plural(a.Accepted, "bid", "bids")
		if n := sum(a.Refused); n > 0 {
			t += ", " + thousands(n) + " refused: " + refusalText(a.Refused)
		}
		text += "; " + t
	}
	return text
}

// waitPhrase says the waits in the headline: the served visitors', then everyone's when they read
// differently (some waited long and were never served); "" when no wait was counted.
func waitPhrase(w WaitSeconds) string {
	served, everyone := w.Served, w.Everyone
	median := func(x Waits) string { return humanDuration(seconds(x.P50)) }
	p90 := func(x Waits) string { return humanDuration(seconds(x.P90)) }
	switch {
	case !served.P50.Valid() && !everyone.P50.Valid():
		return ""
	case !served.P50.Valid():
		return "median wait of everyone who waited " + median(everyone) + " (p90 " + p90(everyone) + ")"
	case !everyone.P50.Valid() || (median(everyone) == median(served) && p90(everyone) == p90(served)):
		return "median wait " + median(served) + " (p90 " + p90(served) + ")"
	}
	return "median wait " + median(served) + " (p90 " + p90(served) + "; everyone's " + median(everyone) + ", p90 " +
		p90(everyone) + ")"
}

// heldNotes are the lines under the headline for the products with units still held: admitted, and
// neither sold, released nor cancelled as far as the range knows.
func heldNotes(r *Report) []string {
	var notes []string
	for _, p := range r.Products {
		if p.Held > 0 {
			notes = append(notes, thousands(p.Held)+" more "+plural(p.Held, "unit", "units")+" of "+p.ID+
				" held: the shop has not answered yet.")
		}
	}
	return notes
}

// waitsText writes percentiles for a figure: "8 s / 15 s / 17 s / 18 s".
func waitsText(w Waits) string {
	return humanDuration(seconds(w.P50)) + " / " + humanDuration(seconds(w.P90)) + " / " +
		humanDuration(seconds(w.P99)) + " / " + humanDuration(seconds(w.Max))
}

func figures(r *Report) []figure {
	s := r.Summary
	f := []figure{
		{"Joined", thousands(s.Joined)}, {"Served (tokens issued)", thousands(s.Served)},
		{"Left before their turn", thousands(s.GaveUp)},
		{"Turned away", thousands(s.TurnedAway.SoldOut) + " at sell-out, " + thousands(s.TurnedAway.Closed) + " at close"},
		{"Completed", thousands(s.Completed)}, {"Abandoned", thousands(s.Abandoned)}, {"Tokens expired", thousands(s.Expired)},
	}
	if w := s.WaitSeconds.Served; w.P50.Valid() {
		f = append(f, figure{"Wait of the served: median / p90 / p99 / longest", waitsText(w)})
	}
	if w := s.WaitSeconds.Everyone; w.P50.Valid() {
		f = append(f, figure{"Wait of everyone who waited: median / p90 / p99 / longest", waitsText(w)})
	}
	f = append(f, figure{"Joins refused", orNone(refusalText(s.Refused))},
		figure{"Turnstile", thousands(s.Turnstile.Passed) + " passed, " + thousands(s.Turnstile.Failed) + " failed"})
	if s.Lottery.Size > 0 {
		f = append(f, figure{"Lottery", thousands(s.Lottery.Size) + " places drawn by lot; seed SHA-256 " + s.Lottery.SeedSHA256})
	} else {
		f = append(f, figure{"Lottery", "none"})
	}
	return f
}

func charts(r *Report) []chart {
	se := r.Series
	step := time.Duration(r.StepSeconds) * time.Second
	unit := "per " + humanDuration(step)
	out := []chart{
		{"Arrivals and tokens issued", lineChart("arrivals", "Arrivals and tokens issued "+unit,
			fmt.Sprintf("%s joined and %s were served between %s and %s.", thousands(r.Summary.Joined),
				thousands(r.Summary.Served), r.From.Format("15:04"), r.To.Format("15:04")),
			se.Minute, step, r.To, []line{{"joined", "c1", se.Joined, false}, {"served", "c2", se.Served, false},
				{"left", "c3", se.GaveUp, false}, {"turned away", "c4", turnedAway(se.TurnedAway), false}}, false)},
		{"Waiting and inside", lineChart("waiting", "Visitors waiting and inside over time",
			fmt.Sprintf("At most %s waited at once.", thousands(maxOf(se.Waiting))),
			se.Minute, step, r.To, []line{{"waiting", "c1", se.Waiting, true}, {"inside", "c2", se.Active, true}}, true)},
	}
	labels, counts := waitDistribution(r)
	if r.Summary.Served > 0 {
		out = append(out, chart{"How long the served visitors waited", barChart("waits", "Distribution of waiting times",
			"Served visitors by how long they waited, from under 10 seconds to over 2 hours.", labels, counts)})
	}
	for _, ps := range r.Products {
		p := se.Products[ps.ID]
		id := "p-" + ps.ID
		out = append(out, chart{"Product " + ps.ID + ": stock", lineChart(id+"-stock", "Stock of "+ps.ID+" over time",
			fmt.Sprintf("%s units left at the end.", thousands(max(last(p.Stock), 0))), se.Minute, step, r.To,
			[]line{{"stock", "c2", p.Stock, false}}, true)})
		out = append(out, chart{"Product " + ps.ID + ": sales and refusals", lineChart(id+"-sales",
			"Admissions, sales and refusals of "+ps.ID+" "+unit, fmt.Sprintf("%s admitted, %s sold, %s refused.",
				thousands(ps.Admitted), thousands(ps.Sold), thousands(sum(ps.Refused))), se.Minute, step, r.To,
			[]line{{"admitted", "c1", p.Admitted, false}, {"sold", "c2", p.Sold, false}, {"refused", "c3", p.Refused, false}}, false)})
	}
	for _, as := range r.Auctions {
		a := se.Auctions[as.ID]
		out = append(out, chart{"Auction " + as.ID + ": bids", lineChart("a-"+as.ID, "Bids on "+as.ID+" "+unit,
			fmt.Sprintf("%s bids accepted, %s refused.", thousands(as.Accepted), thousands(sum(as.Refused))),
			se.Minute, step, r.To, []line{{"accepted", "c1", a.Accepted, false}, {"refused", "c3", a.Refused, false}}, false)})
	}
	out = append(out, scopeCharts(r, step, unit)...)
	if r.Summary.Turnstile.Passed+r.Summary.Turnstile.Failed == 0 {
		return out
	}
	out = append(out, chart{"Turnstile checks at joining", barChart("turnstile", "Turnstile checks at joining",
		fmt.Sprintf("%s passed, %s failed.", thousands(r.Summary.Turnstile.Passed), thousands(r.Summary.Turnstile.Failed)),
		[]string{"passed", "failed"}, []int64{r.Summary.Turnstile.Passed, r.Summary.Turnstile.Failed})})
	return out
}

// turnedAway is the visitors turned away per point, at sell-out and at close together.
func turnedAway(t TurnedAwaySeries) []int64 {
	out := make([]int64, len(t.SoldOut))
	for i := range out {
		out[i] = t.SoldOut[i]
		if i < len(t.Closed) {
			out[i] += t.Closed[i]
		}
	}
	return out
}

func seconds(s Seconds) time.Duration { return time.Duration(float64(s) * float64(time.Second)) }

// thousands writes n with thousands separators: 12,345.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func sum(m map[string]int64) int64 {
	var t int64
	for _, n := range m {
		t += n
	}
	return t
}

// codeWords say refusal codes the way the headline does; any other code is said in lower case.
var codeWords = map[string]string{
	"INSUFFICIENT_STOCK": "sold out", "INVALID_TURNSTILE_TOKEN": "failed Turnstile", "RATE_LIMITED": "over the join limit",
	"TOO_MANY_PLACES": "too many places from one address", "STORE_UNAVAILABLE": "store unavailable",
}

// refusalText says refusals by code, most first: "3,990 sold out, 130 already purchased".
func refusalText(m map[string]int64) string {
	codes := slices.Collect(maps.Keys(m))
	slices.SortFunc(codes, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, c := range codes {
		if m[c] > 0 {
			words, ok := codeWords[c]
			if !ok {
				words = strings.ReplaceAll(strings.ToLower(c), "_", " ")
			}
			parts = append(parts, thousands(m[c])+" "+words)
		}
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func last(v []int64) int64 {
	if len(v) == 0 {
		return -1
	}
	return v[len(v)-1]
}
