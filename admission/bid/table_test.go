package bid

import (
	"context"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
)

// A bid's events give the same row whatever their order, repeats included: the state only moves
// forward, and what one event knows is kept when another lacks it; a withdrawn bid does not stand.
func TestTable_AnyOrderAndRepeatsGiveTheSameRow(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	events := []ledger.Row{
		Row{ID: "7", AuctionID: "a1", Bidder: "b2", AmountCents: 1500, State: "accepted", BidAt: at},
		Row{ID: "7", AuctionID: "a1", State: "committed", CommittedAt: at.Add(time.Millisecond)},
		Row{ID: "7", AuctionID: "a1", Bidder: "b2", AmountCents: 1500, State: "withdrawn", BidAt: at, WithdrawnAt: at.Add(time.Second)},
		Row{ID: "8", AuctionID: "a1", Bidder: "b3", AmountCents: 1200, State: "accepted", BidAt: at.Add(-time.Second)},
	}
	want := Row{ID: "7", AuctionID: "a1", Bidder: "b2", AmountCents: 1500, State: "withdrawn", BidAt: at,
		CommittedAt: at.Add(time.Millisecond), WithdrawnAt: at.Add(time.Second)}
	for round := range 6 {
		l := ledgertest.Open(t)
		order := ledgertest.WriteInAnyOrder(t, l, events, round)
		bids, total, err := ledgerPage(ctx, l, "b2", 1, 10)
		if err != nil || total != 1 || len(bids) != 1 || bids[0] != want {
			t.Errorf("order %v: bids %+v (%d) %v, want\n%+v", order, bids, total, err, want)
		}
		st, err := standingBids(ctx, l)
		if err != nil || st["a1"] != (standing{bids: 1, highestCents: 1200}) {
			t.Errorf("order %v: standing %+v %v, want 1 bid, 12.00 highest (the withdrawn 15.00 does not stand)", order, st, err)
		}
	}
}
