package report

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

var polylinePoints = regexp.MustCompile(`<polyline class="[^"]*" points="([^"]*)"/>`)

// drawnPoints is how many points each line of a chart's SVG has.
func drawnPoints(svg string) []int {
	var out []int
	for _, m := range polylinePoints.FindAllStringSubmatch(svg, -1) {
		out = append(out, len(strings.Fields(m[1])))
	}
	return out
}

// A chart of counts leaves out a last point that covers less time than the others (the minute in
// progress), which would read as a fall at the right edge, and says so; a whole last point is drawn,
// and a gauge's last point is always drawn (it is the last value known, not a count).
func TestLineChart_LeavesOutAPartLastPointOfCounts(t *testing.T) {
	start := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	times := make([]time.Time, 5)
	for i := range times {
		times[i] = start.Add(time.Duration(i) * time.Minute)
	}
	counts := []line{{"joined", "c1", []int64{50, 60, 55, 58, 9}, false}, {"served", "c2", []int64{10, 10, 10, 10, 2}, false}}
	for _, c := range []struct {
		name   string
		end    time.Time
		gauge  bool
		points int
		note   string
	}{
		{"counts, the last minute in progress", start.Add(4*time.Minute + 9*time.Second), false, 4, "the last 9 s (part of a point) not drawn"},
		{"counts, a whole last minute", start.Add(5 * time.Minute), false, 5, ""},
		{"a gauge, the last minute in progress", start.Add(4*time.Minute + 9*time.Second), true, 5, ""},
	} {
		svg := string(lineChart("c", "title", "desc", times, time.Minute, c.end, counts, c.gauge))
		for i, n := range drawnPoints(svg) {
			if n != c.points {
				t.Errorf("%s: line %d has %d points, want %d:\n%s", c.name, i, n, c.points, svg)
			}
		}
		if has := strings.Contains(svg, "not drawn"); has != (c.note != "") || !strings.Contains(svg, c.note) {
			t.Errorf("%s: want the note %q:\n%s", c.name, c.note, svg)
		}
		last := "18:05 UTC"
		if c.points == 4 {
			last = "18:04 UTC" // the axis ends where the drawn points do
		}
		if !strings.Contains(svg, last) {
			t.Errorf("%s: the time axis does not end at %s:\n%s", c.name, last, svg)
		}
	}

	// Downsampled, the last group is left out when it holds fewer points than the others.
	long := make([]time.Time, 3*maxChartPoints-2) // three points a group, the last group one point

	values := make([]int64, len(long))
	for i := range long {
		long[i], values[i] = start.Add(time.Duration(i)*time.Minute), 10
	}
	svg := string(lineChart("d", "title", "desc", long, time.Minute, long[len(long)-1].Add(time.Minute),
		[]line{{"joined", "c1", values, false}}, false))
	if got := drawnPoints(svg); len(got) != 1 || got[0] != maxChartPoints-1 {
		t.Errorf("downsampled by 3 with a last group of one point: %v points, want %d", got, maxChartPoints-1)
	}
	if !strings.Contains(svg, "per 3 min; the last 1 min (part of a point) not drawn") {
		t.Errorf("the downsampled chart's note:\n%s", svg)
	}
}
