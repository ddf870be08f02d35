package report

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
	"time"
)

// Charts are inline SVG drawn here: the page (and the file `edgeq report -out` writes) needs no script,
// font or image from anywhere. Each chart is a figure with a title and a description that screen
// readers read (role="img"); its numbers are in the CSV.

// line is one series of a chart.
type line struct {
	name   string
	class  string  // the stroke's CSS class (report.css: c1..c4)
	values []int64 // -1 unknown
	peak   bool    // a gauge drawn by the highest value of each group of points (waiting), not the last
}

const (
	chartW, chartH         = 480, 200
	padL, padR, padT, padB = 44, 8, 10, 30
	maxChartPoints         = 240
)

// downsample groups points so that a chart draws at most maxChartPoints: counts are summed, gauges
// keep each group's last known value, peaks its highest. per is how many points a group holds.
func downsample(values []int64, gauge, peak bool, per int) []int64 {
	if per <= 1 {
		return values
	}
	out := make([]int64, 0, (len(values)+per-1)/per)
	for i := 0; i < len(values); i += per {
		group := values[i:min(i+per, len(values))]
		var v int64
		if gauge {
			v = -1
			for _, x := range group {
				if x >= 0 && (!peak || x > v) {
					v = x
				}
			}
		} else {
			for _, x := range group {
				v += max(x, 0)
			}
		}
		out = append(out, v)
	}
	return out
}

// lineChart draws lines over times (the start of each point) up to end, the range's end; id names the
// title and description. A chart of counts leaves out its last point when that point covers less time
// than the others (the minute in progress, a range ending mid-step): drawn, its smaller count would
// read as a fall at the right edge. A note says so; the CSV and the JSON keep the point.
func lineChart(id, title, desc string, times []time.Time, step time.Duration, end time.Time, lines []line, gauge bool) template.HTML {
	per := max((len(times)+maxChartPoints-1)/maxChartPoints, 1)
	var top int64 = 1
	drawn := make([][]int64, len(lines))
	for i, l := range lines {
		drawn[i] = downsample(l.values, gauge, l.peak, per)
	}
	n := 0
	if len(drawn) > 0 {
		n = len(drawn[0])
	}
	cut, partial := false, time.Duration(0) // whether the last point is left out, and the time it covers
	if last := (n - 1) * per; !gauge && n > 1 && last < len(times) {
		if covered := end.Sub(times[last]); covered < step*time.Duration(per) {
			cut, partial = true, max(covered, 0)
			n--
			for i := range drawn {
				drawn[i] = drawn[i][:n]
			}
		}
	}
	for i := range drawn {
		for _, v := range drawn[i] {
			top = max(top, v)
		}
	}
	top = niceCeil(top)
	x := func(i int) float64 {
		if n <= 1 {
			return padL
		}
		return padL + float64(i)*float64(chartW-padL-padR)/float64(n-1)
	}
	y := func(v int64) float64 {
		return float64(chartH-padB) - float64(v)*float64(chartH-padT-padB)/float64(top)
	}
	var b strings.Builder
	open(&b, id, title, desc)
	axes(&b, top, y)
	for i, l := range lines {
		var pts []string
		for j, v := range drawn[i] {
			if v < 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(j), y(v)))
		}
		if len(pts) == 1 {
			pts = append(pts, fmt.Sprintf("%.1f,%s", x(0)+2, strings.Split(pts[0], ",")[1]))
		}
		if len(pts) > 0 {
			// Every line after the first is dashed (l1..l3: report.css), so that one drawn over another
			// with the same values (all joined were served; as many refused as admitted) leaves it seen.
			fmt.Fprintf(&b, `<polyline class="%s l%d" points="%s"/>`, l.class, i, strings.Join(pts, " "))
		}
	}
	timeLabels(&b, times[:min(n*per, len(times))], step)
	legend(&b, lines)
	var notes []string
	if per > 1 && !gauge {
		notes = append(notes, "per "+humanDuration(step*time.Duration(per)))
	}
	if cut {
		notes = append(notes, "the last "+humanDuration(partial.Truncate(time.Second))+" (part of a point) not drawn")
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, `<text class="note" x="%d" y="%d" text-anchor="end">%s</text>`, chartW-padR, padT+10,
			html.EscapeString(strings.Join(notes, "; ")))
	}
	b.WriteString(`</svg>`)
	//nolint:gosec // SVG this function writes, every text in it through html.EscapeString
	return template.HTML(b.String())
}

// barChart draws one bar per label.
func barChart(id, title, desc string, labels []string, values []int64) template.HTML {
	var top int64 = 1
	for _, v := range values {
		top = max(top, v)
	}
	top = niceCeil(top)
	y := func(v int64) float64 {
		return float64(chartH-padB) - float64(v)*float64(chartH-padT-padB)/float64(top)
	}
	var b strings.Builder
	open(&b, id, title, desc)
	axes(&b, top, y)
	if len(values) > 0 {
		slotW := float64(chartW-padL-padR) / float64(len(values))
		for i, v := range values {
			x0 := padL + float64(i)*slotW
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x0+slotW*0.1, y(v), slotW*0.8,
				float64(chartH-padB)-y(v))
			if len(values) <= 12 || i%((len(values)+11)/12) == 0 {
				fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x0+slotW/2, chartH-padB+14,
					html.EscapeString(labels[i]))
			}
		}
	}
	b.WriteString(`</svg>`)
	//nolint:gosec // SVG this function writes, every text in it through html.EscapeString
	return template.HTML(b.String())
}

func open(b *strings.Builder, id, title, desc string) {
	fmt.Fprintf(b, `<svg viewBox="0 0 %d %d" role="img" aria-labelledby="%s-t %s-d" xmlns="http://www.w3.org/2000/svg">`+
		`<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, chartW, chartH, id, id, id, html.EscapeString(title), id,
		html.EscapeString(desc))
}

func axes(b *strings.Builder, top int64, y func(int64) float64) {
	marks := []int64{0, top / 2, top}
	if top < 2 {
		marks = []int64{0, top}
	}
	for _, v := range marks {
		fmt.Fprintf(b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padL, chartW-padR, y(v), y(v))
		fmt.Fprintf(b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, y(v)+4, compact(v))
	}
}

func timeLabels(b *strings.Builder, times []time.Time, step time.Duration) {
	if len(times) == 0 {
		return
	}
	layout := "15:04"
	if times[len(times)-1].Sub(times[0]) >= 24*time.Hour {
		layout = "Jan 2 15:04"
	}
	first, last := times[0], times[len(times)-1].Add(step)
	fmt.Fprintf(b, `<text class="tick" x="%d" y="%d">%s</text>`, padL, chartH-padB+14, first.UTC().Format(layout))
	fmt.Fprintf(b, `<text class="tick" x="%d" y="%d" text-anchor="end">%s UTC</text>`, chartW-padR, chartH-padB+14,
		last.UTC().Format(layout))
}

func legend(b *strings.Builder, lines []line) {
	x := padL
	for _, l := range lines {
		fmt.Fprintf(b, `<rect class="%s key" x="%d" y="%d" width="10" height="10"/>`, l.class, x, chartH-12)
		fmt.Fprintf(b, `<text class="tick" x="%d" y="%d">%s</text>`, x+14, chartH-3, html.EscapeString(l.name))
		x += 14 + 8*len(l.name) + 14
	}
}

// niceCeil rounds a chart's top up to 1, 2 or 5 times a power of ten.
func niceCeil(v int64) int64 {
	p := int64(1)
	for p*10 <= v {
		p *= 10
	}
	for _, m := range []int64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// compact writes a number short: 950, 12k, 3.4M.
func compact(v int64) string {
	switch {
	case v >= 10_000_000:
		return strconv.FormatInt(v/1_000_000, 10) + "M"
	case v >= 1_000_000:
		return strconv.FormatFloat(float64(v)/1e6, 'f', 1, 64) + "M"
	case v >= 10_000:
		return strconv.FormatInt(v/1000, 10) + "k"
	}
	return strconv.FormatInt(v, 10)
}

// humanDuration says a duration the way the headline does: 41 s, 3 min 12 s, 2 h 5 min.
func humanDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case d < time.Second:
		return "under a second"
	case s < 60:
		return strconv.FormatInt(s, 10) + " s"
	case s < 3600:
		if s%60 == 0 {
			return strconv.FormatInt(s/60, 10) + " min"
		}
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	}
	if (s/60)%60 == 0 {
		return strconv.FormatInt(s/3600, 10) + " h"
	}
	return fmt.Sprintf("%d h %d min", s/3600, (s/60)%60)
}

// waitBins are the wait distribution chart's bars: upper bounds.
var waitBins = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
	10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}

// waitDistribution bins the range's waits for the chart.
func waitDistribution(r *Report) (labels []string, counts []int64) {
	counts = make([]int64, len(waitBins)+1)
	mids, n := r.WaitHistogram()
	for i, m := range mids {
		j := 0
		for j < len(waitBins) && m >= waitBins[j] {
			j++
		}
		counts[j] += n[i]
	}
	for _, b := range waitBins {
		labels = append(labels, "<"+shortDuration(b))
	}
	labels = append(labels, "≥"+shortDuration(waitBins[len(waitBins)-1]))
	return labels, counts
}

func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return strconv.Itoa(int(d/time.Hour)) + "h"
}
