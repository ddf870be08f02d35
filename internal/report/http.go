package report

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/edgeq/edgeq/internal/config"
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
	// Owners are the products and auctions to look at.
	Owners func(ctx context.Context) (products, auctions []string, err error)
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
		if v := r.URL.Query(); v.Get("from") == "" && v.Get("to") == "" {
			rep.Trim(2) // the last 24 hours: the page shows the drop, two minutes either side
		}
		q := url.Values{"queue": {rep.Queue}, "from": {rep.From.Format(time.RFC3339)}, "to": {rep.To.Format(time.RFC3339)},
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

// Read completes q (the lottery, the products and auctions) and reads its report; 404 QUEUE_NOT_FOUND
// for a queue that does not exist and has nothing in the range.
func (s *Service) Read(ctx context.Context, q Query) (*Report, *web.Error) {
	lottery, exists := s.Lottery(ctx, q.Queue)
	q.Lottery = lottery
	var err error
	if q.Products, q.Auctions, err = s.Owners(ctx); err != nil {
		return nil, web.ErrStoreUnavailable.Because(err)
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
	if s.Joined+s.Served+s.GaveUp+s.Completed+s.Abandoned+s.Expired+s.Turnstile.Passed+s.Turnstile.Failed+sum(s.Refused) > 0 {
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
// UTC); they default to the last 24 hours and may span at most the retention. step (a duration of
// whole minutes, at most a day) defaults to one minute up to two days, then to the smallest of 5, 15
// and 60 minutes and whole hours that keeps the series within MaxPoints; a step that makes more points
// is refused.
func (s *Service) query(v url.Values, now time.Time) (Query, *web.Error) {
	q := Query{Queue: v.Get("queue")}
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
		q.Step = step
		if n := q.Points(); n > MaxPoints {
			return q, web.ErrInvalidRequest.With("field", "step").With("problems",
				fmt.Sprintf("the range in steps of %s is %d points, more than %d: take a longer step or a shorter range", text, n, MaxPoints))
		}
	} else {
		q.Step = defaultStep(q)
	}
	return q, nil
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
