package bid

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/vocab"
)

// Bids in the ledger: the row each event writes, and what reconcile compares.

func (k *kind) LedgerRow(auction string, msg redis.XMessage, b *ledger.Batch) error {
	rec, _, err := parseBid(auction, msg)
	if err != nil {
		return err
	}
	b.Rows = append(b.Rows, Row{ID: rec.ID, AuctionID: rec.AuctionID, Bidder: rec.Bidder, AmountCents: rec.cents,
		State: rec.State, BidAt: vocab.ParseMilli(rec.BidAt), CommittedAt: vocab.ParseMilli(rec.CommittedAt),
		WithdrawnAt: vocab.ParseMilli(rec.WithdrawnAt)})
	return nil
}

func bidRecordOf(b Row) Record {
	return Record{ID: b.ID, AuctionID: b.AuctionID, Bidder: b.Bidder, Amount: money.Format(b.AmountCents), State: b.State,
		BidAt: vocab.FormatMilli(b.BidAt), WithdrawnAt: vocab.FormatMilli(b.WithdrawnAt), CommittedAt: vocab.FormatMilli(b.CommittedAt),
		cents: b.AmountCents}
}

// Reconcile compares the highest bid per auction and every bid record.
func (k *kind) Reconcile(ctx context.Context, r *admission.Reconciliation) error {
	s := k.s
	standing, err := standingBids(ctx, s.Ledger())
	if err != nil {
		return err
	}
	auctions, err := s.OwnersToCompare(ctx, k, slices.Collect(maps.Keys(standing)))
	if err != nil {
		return err
	}
	r.Owners = append(r.Owners, admission.Tally{N: len(auctions), Noun: "auctions"})
	for _, a := range auctions {
		amount, err := s.Client().HGet(ctx, auctionHighestKey(s.Keys(), a), "amount").Result()
		if err != nil && err != redis.Nil {
			return err
		}
		cents, _ := strconv.ParseInt(amount, 10, 64)
		if cents != standing[a].highestCents {
			r.Differences = append(r.Differences, admission.Difference{Kind: "auction", Owner: a, What: "highest bid",
				Store: money.Format(cents), Ledger: money.Format(standing[a].highestCents)})
		}
	}
	rows, err := rowsSince(ctx, s.Ledger(), r.Since)
	if err != nil {
		return err
	}
	return s.CompareRecords(ctx, r, admission.StoreRecords{OwnerNoun: "auction",
		Noun: "bid", Open: ":{a:", Middle: "}:bid:", User: "bidder",
		Read: func(owner, id string, h map[string]string) admission.Compared {
			cents, _ := strconv.ParseInt(h["amount"], 10, 64)
			return bidCompared(Row{ID: id, AuctionID: owner, AmountCents: cents, State: h["state"]})
		},
		InLedger: admission.Mapped(rows, bidCompared),
		Lookup:   func(string) (admission.Compared, bool, error) { return admission.Compared{}, false, nil },
	})
}

func bidCompared(b Row) admission.Compared {
	return admission.Compared{ID: b.ID, Owner: b.AuctionID, State: b.State, Detail: fmt.Sprintf("%s, %s, auction %s", b.State, money.Format(b.AmountCents), b.AuctionID)}
}
