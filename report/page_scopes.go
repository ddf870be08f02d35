package report

import (
	"fmt"
	"strings"
	"time"
)

// The registered scopes on the page: a table per scope with data (a row per owner: its id, each
// series' total, its refusals) and a chart per owner. The page's template (templates/report.html)
// knows only the report's own sections, so the tables are rendered here, escaped by html/template
// like the rest of the page, and placed before the charts' section; a page without them is written
// exactly as the template writes it.

// scopeTable is one registered scope's table.
type scopeTable struct {
	Name, Heading, Noun string
	Series              []string // the columns' headings, in the scope's order
	Rows                []scopeRow
}

type scopeRow struct {
	ID      string
	Totals  []string
	Refused string
}

func tablesOf(r *Report) []scopeTable {
	var out []scopeTable
	for _, name := range r.scopeNames() {
		info := scopeByName(name, r)
		t := scopeTable{Name: name, Heading: capital(words(name)), Noun: capital(words(info.Noun))}
		for _, series := range info.Series {
			t.Series = append(t.Series, capital(words(series)))
		}
		for _, ss := range r.Scopes[name] {
			row := scopeRow{ID: ss.ID, Refused: orNone(refusalText(ss.Refused))}
			for _, series := range info.Series {
				row.Totals = append(row.Totals, thousands(ss.Counts[series]))
			}
			t.Rows = append(t.Rows, row)
		}
		out = append(out, t)
	}
	return out
}

// scopeCharts are a chart per owner of r's registered scopes: its series and refusals over time.
func scopeCharts(r *Report, step time.Duration, unit string) []chart {
	se := r.Series
	classes := []string{"c1", "c2", "c4"}
	var out []chart
	for _, name := range r.scopeNames() {
		info := scopeByName(name, r)
		for i, ss := range r.Scopes[name] {
			o := se.Scopes[name][ss.ID]
			lines := make([]line, 0, len(info.Series)+1)
			names := make([]string, 0, len(info.Series)+1)
			said := make([]string, 0, len(info.Series)+1)
			for j, series := range info.Series {
				lines = append(lines, line{words(series), classes[j%len(classes)], orZeros(o.Counts[series], len(se.Minute)), false})
				names = append(names, words(series))
				said = append(said, thousands(ss.Counts[series])+" "+words(series))
			}
			lines = append(lines, line{"refused", "c3", orZeros(o.Refused, len(se.Minute)), false})
			names = append(names, "refused")
			said = append(said, thousands(sum(ss.Refused))+" refused")
			owner := words(info.Noun) + " " + ss.ID
			// The chart's id is the scope's name and the owner's place: an owner's id may hold anything.
			out = append(out, chart{capital(owner), lineChart(fmt.Sprintf("s-%s-%d", name, i),
				capital(andList(names))+" of "+owner+" "+unit, strings.Join(said, ", ")+".", se.Minute, step, r.To, lines, false)})
		}
	}
	return out
}

// words writes a name with spaces for its underscores: turned_away is "turned away".
func words(name string) string { return strings.ReplaceAll(name, "_", " ") }

// capital starts s with a capital letter (an ASCII one; anything else is left as it is).
func capital(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// andList joins words as a sentence does: "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
