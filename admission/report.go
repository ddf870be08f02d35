package admission

// Admission's part of the report (report, docs/reference.md "The report"): each replica
// counts the admissions, settlements and refusals it decides, per owner in its kind's scope, and writes
// them once per tick (no Redis call per admission), with what each kind adds (ReportedKind.reportExtra).

import (
	"context"
	"slices"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// countAdmitted counts an admission of c.
func (s *Service) countAdmitted(k Kind, c Claim) {
	if rk, ok := k.(ReportedKind); ok {
		series, n := rk.ReportAdmitted(c)
		s.tally.Scope(rk.ReportScope(), c.Owner).Add(series, n)
	}
}

// CountSettled counts what c's settlement gives or keeps (series report.Committed, report.Released,
// report.Cancelled), for a kind that counts settlements.
func (s *Service) CountSettled(k Kind, c Claim, series string) {
	if rk, ok := k.(ReportedKind); ok {
		if n := rk.ReportSettled(c); n > 0 {
			s.tally.Scope(rk.ReportScope(), c.Owner).Add(series, n)
		}
	}
}

// countRefused counts a refusal of owner's claim: only the kind's own refusals of an owner the store
// knows (a made-up id makes no series: not found, or not found and the shop not asked).
func (s *Service) countRefused(k Kind, owner string, e *web.Error) {
	rk, ok := k.(ReportedKind)
	if !ok || owner == "" || e.Code == k.NotFound().Code || sourceDown(k, e) ||
		!slices.ContainsFunc(k.Refusals(), func(r *web.Error) bool { return r.Code == e.Code }) {
		return
	}
	s.tally.Scope(rk.ReportScope(), owner).Refuse(e.Code)
}

// runReport writes the tally every tick, and once more when ctx ends.
func (s *Service) runReport(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			report.FlushLast(ctx, s.flushReport)
			return
		case <-t.C:
			s.flushReport(ctx)
		}
	}
}

func (s *Service) flushReport(ctx context.Context) {
	for _, k := range s.kinds {
		if rk, ok := k.(ReportedKind); ok {
			s.report.Flush(ctx, s.tally, rk.ReportScope(), rk.ReportExtra)
		}
	}
}

// ReadOwners reads the owners the store knows of every kind with series in the report, by the
// report's scope (`edgeq report`, the admin listener's /report).
func ReadOwners(ctx context.Context, st *store.Store) (map[report.Kind][]string, error) {
	s := &Service{o: Options{Store: st}, client: st.Client, keys: st.Keys}
	owners := map[report.Kind][]string{}
	for _, r := range registered {
		rk, ok := r.newKind(s).(ReportedKind)
		if !ok {
			continue
		}
		ids, err := st.Client.SMembers(ctx, rk.(Kind).OwnersKey()).Result()
		if err != nil {
			return nil, err
		}
		slices.Sort(ids)
		owners[rk.ReportScope()] = ids
	}
	return owners, nil
}
