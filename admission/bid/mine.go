package bid

// A bidder's own auctions (GET {prefix}/auctions/mine, docs/reference.md "A bidder's own auctions"),
// the bidder identified like the first bid route's user (admission/mine.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/redis/go-redis/v9"
)

// Statuses of the bidder's auctions.
const (
	mineActive = "active" // not ended
	mineWon    = "won"    // ended, and the bidder's bid is the highest
	mineLost   = "lost"   // ended, and it is not
)

// MyAuction is one auction in a bidder's own list: only the bidder's own bids and the auction's
// public state, never another bidder's identity (nor the bidder's own pseudonym).
type MyAuction struct {
	AuctionID string `json:"auction_id"`
	Status    string `json:"status"`
	// IsHighest: the auction's highest bid is the bidder's (a withdrawn bid never is: its withdrawal
	// restored the previous highest).
	IsHighest bool   `json:"is_highest"`
	Amount    string `json:"amount"` // the bidder's highest bid
	BidAt     string `json:"bid_at"` // when it was placed
	BidCount  int64  `json:"bid_count"`
	// HighestAmount is the auction's highest bid, whoever placed it (as GET .../highest-bid shows).
	HighestAmount *string `json:"highest_amount"`
	EndsAt        string  `json:"ends_at"`

	amountCents int64
}

// maxMineBids bounds the bids one listing reads: a bidder's most recent ones.
const maxMineBids = 10_000

// handleMine answers GET {prefix}/auctions/mine?status=active|won|lost&page=&page_size=
// (docs/reference.md "A bidder's own auctions"): the auctions the bidder bid on, newest bid first, from
// the bidder's own bid index that the event worker keeps (so a bid shows up once the worker has
// recorded it, normally within a second).
func (k *kind) handleMine(w http.ResponseWriter, r *http.Request) {
	s := k.s
	status := r.URL.Query().Get("status")
	user, page, size, ok := s.Whose(w, r, k.bidders.Load(), func() *web.Error {
		if status != "" && status != mineActive && status != mineWon && status != mineLost {
			return web.ErrInvalidRequest.With("field", "status").With("problems", "status is active, won or lost")
		}
		return nil
	})
	if !ok {
		return
	}
	all, err := k.mine(r.Context(), user)
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	items := all
	if status != "" {
		items = slices.DeleteFunc(slices.Clone(all), func(a MyAuction) bool { return a.Status != status })
	}
	lo, hi, size := web.Window(int64(len(items)), page, size)
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items[lo:hi], "total_count": len(items), "page": page, "page_size": size})
}

// mine reads a bidder's auctions: the bidder's bids from the worker's records (admission/records.go), grouped
// by auction, then each auction's end and highest bid in one pipeline.
// Withdrawn bids are left out: the shop refused them.
func (k *kind) mine(ctx context.Context, bidder string) ([]MyAuction, error) {
	s := k.s
	byAuction := map[string]*MyAuction{}
	var order []*MyAuction
	add := func(rec Record) {
		if rec.State == "withdrawn" {
			return
		}
		cents, err := money.Parse(rec.Amount)
		if err != nil {
			return
		}
		a := byAuction[rec.AuctionID]
		if a == nil {
			a = &MyAuction{AuctionID: rec.AuctionID}
			byAuction[rec.AuctionID] = a
			order = append(order, a)
		}
		a.BidCount++
		if cents > a.amountCents {
			a.amountCents, a.Amount, a.BidAt = cents, rec.Amount, rec.BidAt
		}
	}
	// With the ledger on, the bids come from it: the store keeps only records_retention of them.
	var found []json.RawMessage
	read := false
	if s.Ledger() != nil {
		if bids, _, err := ledgerPage(ctx, s.Ledger(), bidder, 1, maxMineBids); err == nil {
			for _, b := range bids {
				add(bidRecordOf(b))
			}
			read = true
		} else {
			s.Logger().Warn("ledger: reading a bidder's bids failed; answering from the store", "error", err.Error())
		}
	}
	if !read {
		var err error
		if found, _, err = s.ReadRecords(ctx, k.table, bidder, 1, maxMineBids); err != nil {
			return nil, err
		}
	}
	for _, body := range found {
		var rec Record
		if json.Unmarshal(body, &rec) == nil {
			add(rec)
		}
	}
	if len(order) == 0 {
		return []MyAuction{}, nil
	}
	// Each auction's keys share its own hash tag; a pipeline (not one multi-key command) reads them
	// on Cluster too.
	pipe := s.Client().Pipeline()
	ends := make([]*redis.SliceCmd, len(order))
	highest := make([]*redis.SliceCmd, len(order))
	for i, a := range order {
		ends[i] = pipe.HMGet(ctx, auctionInfoKey(s.Keys(), a.AuctionID), "ends_at")
		highest[i] = pipe.HMGet(ctx, auctionHighestKey(s.Keys(), a.AuctionID), "bidder", "amount")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	now := time.Now()
	out := make([]MyAuction, 0, len(order))
	for i, a := range order {
		endsMs, err := strconv.ParseInt(fmt.Sprint(ends[i].Val()[0]), 10, 64)
		if err != nil {
			continue // the auction is gone from the store: nothing to say about it
		}
		endsAt := time.UnixMilli(endsMs).UTC()
		a.EndsAt = vocab.FormatTime(endsAt)
		h := highest[i].Val()
		if bidderOfHighest, ok := h[0].(string); ok {
			a.IsHighest = bidderOfHighest == bidder
		}
		if amount, ok := h[1].(string); ok {
			if cents, err := strconv.ParseInt(amount, 10, 64); err == nil {
				text := money.Format(cents)
				a.HighestAmount = &text
			}
		}
		switch {
		case now.Before(endsAt):
			a.Status = mineActive
		case a.IsHighest:
			a.Status = mineWon
		default:
			a.Status = mineLost
		}
		out = append(out, *a)
	}
	// In the order of the bidder's latest bid on each, newest first: the index's order (by time,
	// then by bid id, which grows with time), so pages are stable.
	return out, nil
}
