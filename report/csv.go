package report

import (
	"encoding/csv"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/edgeq/edgeq/internal/vocab"
)

// WriteCSV writes the series, one row per point (docs/report.md names each column); unknown gauges
// and minutes nobody was served in are empty cells.
func WriteCSV(w io.Writer, r *Report) error {
	s := r.Series
	type column struct {
		name string
		cell func(i int) string
	}
	ints := func(name string, v []int64) column {
		return column{name, func(i int) string { return strconv.FormatInt(v[i], 10) }}
	}
	gauge := func(name string, v []int64) column {
		return column{name, func(i int) string {
			if v[i] < 0 {
				return ""
			}
			return strconv.FormatInt(v[i], 10)
		}}
	}
	secs := func(name string, v []Seconds) column {
		return column{name, func(i int) string {
			if !v[i].Valid() {
				return ""
			}
			return strconv.FormatFloat(float64(v[i]), 'f', 2, 64)
		}}
	}
	cols := []column{
		{"minute", func(i int) string { return vocab.FormatTime(s.Minute[i]) }},
		ints(Joined, s.Joined), ints(Served, s.Served), ints(GaveUp, s.GaveUp),
		ints("turned_away:sold_out", s.TurnedAway.SoldOut), ints("turned_away:closed", s.TurnedAway.Closed),
		ints(Completed, s.Completed),
		ints(Abandoned, s.Abandoned), ints(Expired, s.Expired), ints(TurnstilePassed, s.TurnstilePassed),
		ints(TurnstileFailed, s.TurnstileFailed), gauge(Waiting, s.Waiting), gauge(Active, s.Active),
		gauge(Assigned, s.Assigned), gauge(Serving, s.Serving), secs("wait_p50", s.WaitP50), secs("wait_p90", s.WaitP90),
	}
	for _, code := range slices.Sorted(maps.Keys(s.Refused)) {
		cols = append(cols, ints("refused:"+code, s.Refused[code]))
	}
	for _, ps := range r.Products {
		p, pre := s.Products[ps.ID], "product:"+ps.ID+":"
		cols = append(cols, ints(pre+Admitted, p.Admitted), ints(pre+"sold", p.Sold), ints(pre+Released, p.Released),
			ints(pre+Cancelled, p.Cancelled), ints(pre+"refused", p.Refused))
		for _, code := range slices.Sorted(maps.Keys(p.RefusedByCode)) {
			cols = append(cols, ints(pre+"refused:"+code, p.RefusedByCode[code]))
		}
		cols = append(cols, gauge(pre+Stock, p.Stock))
	}
	for _, as := range r.Auctions {
		a, pre := s.Auctions[as.ID], "auction:"+as.ID+":"
		cols = append(cols, ints(pre+Accepted, a.Accepted), ints(pre+"refused", a.Refused))
		for _, code := range slices.Sorted(maps.Keys(a.RefusedByCode)) {
			cols = append(cols, ints(pre+"refused:"+code, a.RefusedByCode[code]))
		}
	}
	// The registered scopes' owners, scope by scope in the order of their names: each series, then the
	// refusals as an auction's.
	for _, name := range r.scopeNames() {
		info := scopeByName(name, r)
		for _, ss := range r.Scopes[name] {
			o, pre := s.Scopes[name][ss.ID], name+":"+ss.ID+":"
			for _, series := range info.Series {
				cols = append(cols, ints(pre+series, orZeros(o.Counts[series], len(s.Minute))))
			}
			cols = append(cols, ints(pre+"refused", orZeros(o.Refused, len(s.Minute))))
			for _, code := range slices.Sorted(maps.Keys(o.RefusedByCode)) {
				cols = append(cols, ints(pre+"refused:"+code, orZeros(o.RefusedByCode[code], len(s.Minute))))
			}
		}
	}
	cw := csv.NewWriter(w)
	row := make([]string, len(cols))
	for j, c := range cols {
		row[j] = c.name
	}
	if err := cw.Write(row); err != nil {
		return err
	}
	for i := range s.Minute {
		for j, c := range cols {
			row[j] = c.cell(i)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// orZeros is v, or n zeros when it is missing (a report built elsewhere).
func orZeros(v []int64, n int) []int64 {
	if len(v) < n {
		return append(slices.Clone(v), make([]int64, n-len(v))...)
	}
	return v
}
