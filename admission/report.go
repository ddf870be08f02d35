package admission

// Admission's part of the report (report, docs/reference.md "The report"): each replica
// counts the admissions, settlements and refusals it decides, per product and auction, and writes them
// once per tick with the product's stock (no Redis call per admission).

import (
	"context"
	"slices"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// reportedKind is a kind whose owners have series in the report: the scope they are kept in, and the
// series and amount an admission counts (a product's units, one bid).
type reportedKind interface {
	reportScope() report.Kind
	reportAdmitted(c claim) (series string, n int64)
}

func (*stockKind) reportScope() report.Kind               { return report.Product }
func (*stockKind) reportAdmitted(c claim) (string, int64) { return report.Admitted, max(c.value, 1) }
func (*bidKind) reportScope() report.Kind                 { return report.Auction }
func (*bidKind) reportAdmitted(claim) (string, int64)     { return report.Accepted, 1 }
func (s *Service) productReport(product string) *report.Scope {
	return s.tally.Scope(report.Product, product)
}

// countAdmitted counts an admission of c.
func (s *Service) countAdmitted(k kind, c claim) {
	if rk, ok := k.(reportedKind); ok {
		series, n := rk.reportAdmitted(c)
		s.tally.Scope(rk.reportScope(), c.owner).Add(series, n)
	}
}

// countSettled counts a product's units committed or given back (series report.Committed,
// report.Released, report.Cancelled).
func (s *Service) countSettled(k kind, c claim, series string) {
	if rk, ok := k.(reportedKind); ok && rk.reportScope() == report.Product {
		s.productReport(c.owner).Add(series, max(c.value, 1))
	}
}

// countRefused counts a refusal of owner's claim: only the kind's own refusals of an owner the store
// knows (a made-up id makes no series: not found, or not found and the shop not asked).
func (s *Service) countRefused(k kind, owner string, e *web.Error) {
	rk, ok := k.(reportedKind)
	if !ok || owner == "" || e.Code == k.notFound().Code || e.Code == web.ErrAuctionsSourceUnavailable.Code ||
		!slices.ContainsFunc(k.refusals(), func(r *web.Error) bool { return r.Code == e.Code }) {
		return
	}
	s.tally.Scope(rk.reportScope(), owner).Refuse(e.Code)
}

// runReport writes the tally every tick, and once more when ctx ends.
func (s *Service) runReport(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			s.flushReport(flushCtx)
			cancel()
			return
		case <-t.C:
			s.flushReport(ctx)
		}
	}
}

func (s *Service) flushReport(ctx context.Context) {
	s.report.Flush(ctx, s.tally, report.Product, func(id string) report.Extra {
		return report.Extra{Aux: stockKey(s.keys, id), AuxGauge: report.Stock, Firsts: report.Admitted, Zeros: report.Stock}
	})
	s.report.Flush(ctx, s.tally, report.Auction, func(string) report.Extra {
		return report.Extra{Firsts: report.Accepted}
	})
}

// Owners are the products and auctions the store knows, for the report.
func (s *Service) Owners(ctx context.Context) (products, auctions []string, err error) {
	return ReadOwners(ctx, s.o.Store)
}

// ReadOwners reads the products and auctions the store knows (`edgeq report`).
func ReadOwners(ctx context.Context, st *store.Store) (products, auctions []string, err error) {
	if products, err = st.Client.SMembers(ctx, productIndexKey(st.Keys)).Result(); err != nil {
		return nil, nil, err
	}
	if auctions, err = st.Client.SMembers(ctx, auctionIndexKey(st.Keys)).Result(); err != nil {
		return nil, nil, err
	}
	slices.Sort(products)
	slices.Sort(auctions)
	return products, auctions, nil
}
