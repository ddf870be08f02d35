package bid

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// Seed writes the configuration file's auctions: created when absent, updated otherwise (on a
// reload only those whose entry changed). The owner is stored as a pseudonym, like bidders.
func (k *kind) Seed(ctx context.Context, next, previous *config.Config) error {
	var errs []error
	for _, a := range auctions.Of(next) {
		if previous != nil && slices.Contains(auctions.Of(previous), a) {
			continue
		}
		if err := k.writeAuction(ctx, a, false); err != nil {
			errs = append(errs, fmt.Errorf("auction %s: %w", a.ID, err))
		}
	}
	return errors.Join(errs...)
}

// writeAuction writes an auction to the store: created or updated, or, with createOnly (an auction
// from auctions_source), created only if the store does not have it, in the same script call, so a
// push that lands meanwhile is never overwritten.
func (k *kind) writeAuction(ctx context.Context, a auctions.Auction, createOnly bool) error {
	s := k.s
	start, err1 := money.Parse(a.StartingPrice)
	inc, err2 := money.Parse(a.MinIncrement)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	owner, _ := s.Pseudonym(a.Owner, "") // normalised like a bidder's identity; "" when it has none
	mode := "0"
	if createOnly {
		mode = "1"
	}
	if err := auctionScript.Run(ctx, s.Client(), []string{auctionInfoKey(s.Keys(), a.ID)}, start, inc, a.EndsAt.UnixMilli(), owner, mode).Err(); err != nil {
		return err
	}
	k.reads.forget(a.ID)
	if err := s.IndexOwner(ctx, k, a.ID); err != nil {
		return err
	}
	return s.EnsureStreamGroup(ctx, auctionEventsKey(s.Keys(), a.ID))
}

// Auction is an auction as the admin API shows it.
type Auction struct {
	ID            string `json:"id"`
	StartingPrice string `json:"starting_price"`
	MinIncrement  string `json:"min_increment"`
	EndsAt        string `json:"ends_at"`
	Ended         bool   `json:"ended"`
	HighestBid    *Bid   `json:"highest_bid"`
	TotalBids     int64  `json:"total_bids"`
	UniqueBidders int64  `json:"unique_bidders"`
}

func (k *kind) adminPutAuction(w http.ResponseWriter, r *http.Request) {
	s := k.s
	id := r.PathValue("id")
	var body struct {
		StartingPrice *string `json:"starting_price"`
		MinIncrement  *string `json:"min_increment"`
		EndsAt        *string `json:"ends_at"`
		Owner         *string `json:"owner"`
	}
	if e := fields.DecodeJSON(w, r, admission.MaxAdminBody, &body); e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	a := auctions.Auction{ID: id}
	a.Defaults() // the file's defaults for what the body leaves out
	if body.StartingPrice != nil {
		a.StartingPrice = *body.StartingPrice
	}
	if body.MinIncrement != nil {
		a.MinIncrement = *body.MinIncrement
	}
	if body.Owner != nil {
		a.Owner = *body.Owner
	}
	if body.EndsAt != nil {
		t, err := time.Parse(time.RFC3339, *body.EndsAt)
		if err != nil {
			s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "ends_at"))
			return
		}
		a.EndsAt = t
	}
	if err := auctions.Validate(a); err != nil {
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("problems", config.OneLine(err)).Because(err))
		return
	}
	if err := k.writeAuction(r.Context(), a, false); err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	k.writeAuctionJSON(w, r, id)
}

func (k *kind) adminGetAuction(w http.ResponseWriter, r *http.Request) {
	s := k.s
	if !config.ID.MatchString(r.PathValue("id")) {
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	k.writeAuctionJSON(w, r, r.PathValue("id"))
}

// adminListAuctions lists the auctions (configured or created through the API) sorted by id
// (listOwners), from the same short-lived per-replica views as the public reads.
func (k *kind) adminListAuctions(w http.ResponseWriter, r *http.Request) {
	admission.ListOwners(k.s, w, r, k, func(ctx context.Context, id string) (Auction, bool, error) {
		v, err := k.view(ctx, id)
		if err != nil || !v.found {
			return Auction{}, false, err
		}
		return auctionOf(id, v), true, nil
	})
}

func (k *kind) writeAuctionJSON(w http.ResponseWriter, r *http.Request, id string) {
	s := k.s
	k.reads.forget(id)
	v, err := k.view(r.Context(), id)
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	if !v.found {
		s.Responder().Error(w, r, errAuctionNotFound)
		return
	}
	web.WriteJSON(w, http.StatusOK, auctionOf(id, v))
}

func auctionOf(id string, v *auctionView) Auction {
	return Auction{ID: id, StartingPrice: money.Format(v.startCents), MinIncrement: money.Format(v.incCents),
		EndsAt: vocab.FormatTime(v.endsAt), Ended: !time.Now().Before(v.endsAt), HighestBid: v.highest,
		TotalBids: v.totalBids, UniqueBidders: v.bidders}
}

// adminUserBids lists a user's bids (userParam; from the worker's index), newest first.
func (k *kind) adminUserBids(w http.ResponseWriter, r *http.Request) {
	s := k.s
	user, ok := s.PathUser(w, r)
	if !ok {
		return
	}
	page, size, e := admission.Paging(r)
	if e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	ctx := r.Context()
	if s.Ledger() != nil && admission.FromLedger(s, w, r, page, size, bidRecordOf, func() ([]Row, int64, error) {
		return ledgerPage(ctx, s.Ledger(), user, page, size)
	}) {
		return
	}
	items, total, err := s.ReadRecords(ctx, k.table, user, page, size)
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	admission.WritePage(w, items, total, page, size, false)
}
