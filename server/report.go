package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
	"github.com/edgeq/edgeq/waitroom"
)

// newReport builds the report's service over a store (docs/reference.md "The report").
func newReport(cfg *config.Config, st *store.Store, responder *web.Responder) (*report.Service, error) {
	page, err := report.NewPage()
	if err != nil {
		return nil, fmt.Errorf("report page: %w", err)
	}
	return &report.Service{
		Reader: report.Reader{Client: st.Client, Keys: st.Keys, Retention: cfg.Report.Retention},
		Page:   page, Brand: cfg.Pages.Brand, Responder: responder,
		Lottery: func(ctx context.Context, queue string) (report.Lottery, bool) {
			l, ok, err := waitroom.ReadLottery(ctx, st, queue)
			return l, ok && err == nil
		},
		Owners:  func(ctx context.Context) (map[report.Kind][]string, error) { return admission.ReadOwners(ctx, st) },
		Opening: func(ctx context.Context, queue string) (time.Time, time.Time) { return readOpening(ctx, st, queue) },
	}, nil
}

// readOpening reads a scheduled queue's joins_from (opens_at minus prequeue) and opens_at from its
// hash in the store, as the waiting room's upsert.lua writes them (unix ms, 0 none); zero times for
// a queue with no schedule, or when the store cannot say (the report then starts at the first join).
func readOpening(ctx context.Context, st *store.Store, queue string) (joinsFrom, opensAt time.Time) {
	m, err := st.Client.HMGet(ctx, st.Keys.Queue(queue, "meta"), "join_from", "opens_at").Result()
	if err != nil || len(m) != 2 {
		return time.Time{}, time.Time{}
	}
	at := func(v any) time.Time {
		s, _ := v.(string)
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > 0 {
			return time.UnixMilli(ms).UTC()
		}
		return time.Time{}
	}
	return at(m[0]), at(m[1])
}

// ReportOptions are `edgeq report`'s flags: the queue, and the range (RFC 3339; without either, the
// drop's own span).
type ReportOptions struct {
	ConfigPath, Queue, From, To string
}

// WriteReport runs `edgeq report`: it writes the report page of a queue to out, as one self-contained
// file (style and charts inline; nothing loaded from elsewhere).
func WriteReport(ctx context.Context, o ReportOptions, out io.Writer, logger *slog.Logger) error {
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return fmt.Errorf("configuration: %s", config.OneLine(err))
	}
	st, err := commandStore(cfg, "its report is on the admin listener (GET /report?queue=ID); `edgeq report` needs redis.addr or redis.addrs", logger)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	svc, err := newReport(cfg, st, nil)
	if err != nil {
		return err
	}
	q, e := svc.ParseQuery(o.Queue, o.From, o.To, time.Now())
	if e != nil {
		return fmt.Errorf("%s: %s", e.Code, e.Message+problems(e))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, e := svc.Read(ctx, q)
	if e != nil {
		return fmt.Errorf("%s: %s%s", e.Code, e.Message, cause(e))
	}
	return svc.Page.Render(out, rep, report.PageOptions{Brand: cfg.Pages.Brand, Offline: true})
}

func problems(e *web.Error) string {
	if p, ok := e.Fields["problems"].(string); ok {
		return " (" + p + ")"
	}
	return ""
}

func cause(e *web.Error) string {
	if e.Cause != nil {
		return ": " + e.Cause.Error()
	}
	return ""
}
