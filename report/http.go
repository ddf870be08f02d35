package report

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// Service answers the report on the admin listener: GET /api/report (JSON, the admin key), GET /report
// (the page, or with format=csv the series; the dashboard's sign-in).
type Service struct {
	Reader    Reader
	Page      *Page
	Brand     string
	Responder *web.Responder
	// Lottery is a queue's lottery, and whether the queue exists.
	Lottery func(ctx context.Context, queue string) (Lottery, bool)
	// Owners are the owners to look at, by kind: the products (Product), the auctions (Auction) and
	// the owners of each registered scope.
	Owners func(ctx context.Context) (map[Kind][]string, error)
	// Opening is a scheduled queue's joins_from (opens_at minus prequeue) and opens_at, zero for a
	// queue with no schedule; nil: none. A drop's own span starts there when its pre-queue began before
	// the first join.
	Opening func(ctx context.Context, queue string) (joinsFrom, opensAt time.Time)
}

// RegisterAPI adds GET /api/report to the admin API's mux.
func (s *Service) RegisterAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/report", func(w http.ResponseWriter, r *http.Request) {
		rep, e := s.build(r)
		if e != nil {
			s.Responder.Error(w, r, e)
			return
		}
		web.WriteJSON(w, http.StatusOK, rep)
	})
}

// PageHandler serves GET /report: the page, or the CSV with format=csv.
func (s *Service) PageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep, e := s.build(r)
		if e != nil {
			s.Responder.Error(w, r, e)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		if r.URL.Query().Get("format") == "csv" {
			h.Set("Content-Type", "text/csv; charset=utf-8")
			h.Set("Content-Disposition", `attachment; filename="edgeq-report-`+rep.Queue+`.csv"`)
			if err := WriteCSV(w, rep); err != nil {
				web.RequestFrom(r.Context()).Logger().Warn("writing the report's CSV failed", "error", err.Error())
			}
			return
		}
		q := url.Values{"queue": {rep.Queue}, "from": {vocab.FormatTime(rep.From)}, "to": {vocab.FormatTime(rep.To)},
			"format": {"csv"}}
		if step := r.URL.Query().Get("step"); step != "" {
			q.Set("step", step)
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", s.Page.CSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if err := s.Page.Render(w, rep, PageOptions{Brand: s.Brand, CSVURL: "report?" + q.Encode()}); err != nil {
			s.Responder.Error(w, r, web.ErrInternal.Because(err))
		}
	})
}

// build reads the query of r and the report it asks for.
func (s *Service) build(r *http.Request) (*Report, *web.Error) {
	q, e := s.query(r.URL.Query(), time.Now())
	if e != nil {
		return nil, e
	}
	return s.Read(r.Context(), q)
}

// Read completes q (the drop's own span when no range was given, the lottery, the products, auctions
// and registered scopes' owners) and reads its report; 404 QUEUE_NOT_FOUND for a queue that does not
// exist and has nothing in the range.
func (s *Service) Read(ctx context.Context, q Query) (*Report, *web.Error) {
	if q.ownSpan {
		if e := s.dropSpan(ctx, &q); e != nil {
			return nil, e
		}
	}
	lottery, exists := s.Lottery(ctx, q.Queue)
	q.Lottery = lottery
	owners, err := s.Owners(ctx)
	if err != nil {
		return nil, web.ErrStoreUnavailable.Because(err)
	}
	q.Products, q.Auctions, q.Owners = owners[Product], owners[Auction], nil
	for _, sc := range registeredScopes() {
		if ids := owners[sc.kind]; len(ids) > 0 {
			if q.Owners == nil {
				q.Owners = map[Kind][]string{}
			}
			q.Owners[sc.kind] = ids
		}
	}
	rep, err := s.Reader.Read(ctx, q)
	if err != nil {
		return nil, web.ErrStoreUnavailable.Because(err)
	}
	if !exists && rep.empty() {
		return nil, web.ErrQueueNotFoundAdmin
	}
	return rep, nil
}

// empty reports whether nothing of the queue was written in the range.
func (r *Report) empty() bool {
	s := r.Summary
	if s.Joined+s.Served+s.GaveUp+s.TurnedAway.SoldOut+s.TurnedAway.Closed+s.Completed+s.Abandoned+s.Expired+
		s.Turnstile.Passed+s.Turnstile.Failed+sum(s.Refused) > 0 {
		return false
	}
	for _, g := range []Gauge{r.Series.Waiting, r.Series.Assigned} {
		for _, v := range g {
			if v >= 0 {
				return false
			}
		}
	}
	return true
}

// query reads queue, from, to and step. from and to are RFC 3339 (or the page's form: 2006-01-02T15:04,
// UTC) and may span at most the retention; without either the report covers the drop's own span
// (Read finds it; the last 24 hours until then, and when nothing was recorded), to alone starts 24
// hours before it, from alone ends now. step (a duration of whole minutes, at most a day) defaults
// to one minute up to two days, then to the smallest of 5, 15 and 60 minutes and whole hours that
// keeps the series within MaxPoints; a step that makes more points is refused.
func (s *Service) query(v url.Values, now time.Time) (Query, *web.Error) {
	q := Query{Queue: v.Get("queue"), ownSpan: v.Get("from") == "" && v.Get("to") == ""}
	if !config.ID.MatchString(q.Queue) {
		return q, web.ErrInvalidRequest.With("field", "queue").With("problems", "queue must be a queue id")
	}
	var ok bool
	q.To, ok = parseTime(v.Get("to"), now)
	if !ok {
		return q, web.ErrInvalidRequest.With("field", "to").With("problems", "to must be an RFC 3339 time")
	}
	q.From, ok = parseTime(v.Get("from"), q.To.Add(-24*time.Hour))
	if !ok {
		return q, web.ErrInvalidRequest.With("field", "from").With("problems", "from must be an RFC 3339 time")
	}
	retention := max(s.Reader.Retention, time.Hour)
	switch {
	case !q.From.Before(q.To):
		return q, web.ErrInvalidRequest.With("field", "from").With("problems", "from must be before to")
	case q.To.Sub(q.From) > retention:
		return q, web.ErrInvalidRequest.With("field", "from").With("problems", "the range spans more than report.retention ("+retention.String()+")")
	case q.From.Before(now.Add(-retention - 24*time.Hour)):
		return q, web.ErrInvalidRequest.With("field", "from").With("problems", "from is older than report.retention ("+retention.String()+")")
	}
	if text := v.Get("step"); text != "" {
		step, err := time.ParseDuration(text)
		if err != nil || step < time.Minute || step > 24*time.Hour || step%time.Minute != 0 {
			return q, web.ErrInvalidRequest.With("field", "step").With("problems", "step must be whole minutes, from 1m to 24h")
		}
		q.Step, q.stepGiven = step, true
	}
	return q, q.fitStep()
}

// fitStep checks a step asked for against MaxPoints, or picks the default one for the range.
func (q *Query) fitStep() *web.Error {
	if !q.stepGiven {
		q.Step = defaultStep(*q)
		return nil
	}
	if n := q.Points(); n > MaxPoints {
		return web.ErrInvalidRequest.With("field", "step").With("problems",
			fmt.Sprintf("the range in steps of %s is %d points, more than %d: take a longer step or a shorter range",
				stepText(q.Step), n, MaxPoints))
	}
	return nil
}

// stepText writes a step as it is asked for: 1m, 90m as 1h30m, 2h.
func stepText(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0s")
	if strings.Contains(s, "h") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// dropSpan sets q's range to the drop's own span: from the first minute of the queue's last drop (or
// its scheduled pre-queue's start, when that came first and belongs to this drop) to a minute after
// its last, at most the retention long. With nothing recorded q keeps its fallback, the last 24
// hours before it was asked.
func (s *Service) dropSpan(ctx context.Context, q *Query) *web.Error {
	from, to, found, err := s.Reader.DropSpan(ctx, q.Queue, q.To)
	if err != nil {
		return web.ErrStoreUnavailable.Because(err)
	}
	if !found {
		return nil
	}
	if s.Opening != nil {
		joinsFrom, opensAt := s.Opening(ctx, q.Queue)
		from = openingStart(from, joinsFrom, opensAt)
	}
	if oldest := to.Add(-max(s.Reader.Retention, time.Hour)); from.Before(oldest) {
		from = oldest // a queue busy for longer than the retention: its latest part
	}
	q.From, q.To = from, to
	return q.fitStep()
}

// openingStart is the start of a drop whose first busy minute was first, given its queue's schedule:
// joinsFrom when the pre-queue opened before that and the schedule is this drop's. One whose joins
// open after first is the next drop's; one whose opening came more than a quiet gap before first is
// an old one, left in place when the queue was used again.
func openingStart(first, joinsFrom, opensAt time.Time) time.Time {
	if opensAt.IsZero() || !joinsFrom.Before(first) || opensAt.Before(first.Add(-QuietGap)) {
		return first
	}
	return joinsFrom.UTC().Truncate(time.Minute)
}

// ParseQuery reads a report's queue and range as `edgeq report`'s flags give them.
func (s *Service) ParseQuery(queue, from, to string, now time.Time) (Query, *web.Error) {
	v := url.Values{"queue": {queue}}
	if from != "" {
		v.Set("from", from)
	}
	if to != "" {
		v.Set("to", to)
	}
	return s.query(v, now)
}

// defaultStep is the step of a query that names none: one minute while the range is at most MaxPoints
// minutes, then the smallest of 5, 15 and 60 minutes and whole hours up to a day that keeps the series
// within MaxPoints points.
func defaultStep(q Query) time.Duration {
	steps := []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}
	for h := time.Hour; h <= 24*time.Hour; h += time.Hour {
		steps = append(steps, h)
	}
	for _, q.Step = range steps {
		if q.Points() <= MaxPoints {
			return q.Step
		}
	}
	return 24 * time.Hour
}

func parseTime(text string, fallback time.Time) (time.Time, bool) {
	if text == "" {
		return fallback.UTC(), true
	}
	if t, err := time.Parse(time.RFC3339, text); err == nil {
		return t.UTC(), true
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04", text, time.UTC); err == nil {
		return t, true
	}
	return time.Time{}, false
}
