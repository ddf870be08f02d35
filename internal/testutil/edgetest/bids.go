package edgetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgeq/edgeq/internal/money"
)

// BidOutcomes tallies what bidders were told.
type BidOutcomes struct {
	mu       sync.Mutex
	Accepted map[string]int // auction -> 200 answers
	TooLow   map[string][]LowBid
	Invalid  atomic.Int64 // 400 INVALID_BID below the starting price
}

// LowBid is a bid refused as too low, and the highest amount the refusal named.
type LowBid struct{ Amount, Highest int64 }

// NewBidOutcomes is an empty tally.
func NewBidOutcomes() *BidOutcomes {
	return &BidOutcomes{Accepted: map[string]int{}, TooLow: map[string][]LowBid{}}
}

// Record files one answer; anything but 200, 409 BID_TOO_LOW or 400 INVALID_BID below the starting
// price is an error.
func (o *BidOutcomes) Record(t *testing.T, auction string, amount int64, a Answer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case a.Status == 200:
		o.Accepted[auction]++
	case a.Status == 409 && a.JSON["error"] == "BID_TOO_LOW":
		h, err := money.Parse(fmt.Sprint(a.JSON["highest_amount"]))
		if err != nil {
			t.Errorf("BID_TOO_LOW without a highest_amount: %s", a.Body)
		}
		o.TooLow[auction] = append(o.TooLow[auction], LowBid{amount, h})
	case a.Status == 400 && a.JSON["error"] == "INVALID_BID" && a.JSON["starting_price"] != nil:
		o.Invalid.Add(1)
	default:
		t.Errorf("bid of %s on %s: %d %s", money.Format(amount), auction, a.Status, a.Body)
	}
}

// StreamBid is an entry of an auction's event stream.
type StreamBid struct {
	Type, ID, User string
	Amount         int64
}

// AuctionEvents reads an auction's event stream, the store's key of it.
func AuctionEvents(t *testing.T, st *Stack, stream string) []StreamBid {
	t.Helper()
	msgs, err := st.Store.Client.XRange(context.Background(), stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]StreamBid, 0, len(msgs))
	for _, m := range msgs {
		cents, err := strconv.ParseInt(fmt.Sprint(m.Values["amount"]), 10, 64)
		if err != nil {
			t.Fatalf("event %v: %v", m.Values, err)
		}
		out = append(out, StreamBid{Type: fmt.Sprint(m.Values["type"]), ID: fmt.Sprint(m.Values["bid"]),
			User: fmt.Sprint(m.Values["user"]), Amount: cents})
	}
	return out
}

// CheckAuction proves the bid invariants of auction id with no withdrawals, its event stream at key
// stream: accepted bids (the stream, in acceptance order) strictly increase, each reached the origin
// with its amount, their number is the number of 200 answers, and the highest bid, the history and the
// stats agree. forget drops the replica's cached reads of the auction first.
func CheckAuction(t *testing.T, st *Stack, id, stream string, o *BidOutcomes, forget func(id string)) {
	t.Helper()
	events := AuctionEvents(t, st, stream)
	if len(events) != o.Accepted[id] {
		t.Fatalf("auction %s: %d bid events, %d bids answered 200", id, len(events), o.Accepted[id])
	}
	if len(events) == 0 {
		t.Fatalf("auction %s: no bid accepted", id)
	}
	users := map[string]bool{}
	amounts := map[int64]bool{}
	for i, e := range events {
		if e.Type != "bid" {
			t.Fatalf("auction %s: unexpected event %+v", id, e)
		}
		if i > 0 && e.Amount <= events[i-1].Amount {
			t.Fatalf("auction %s: accepted bid %d (%d) does not beat the one before (%d)", id, i, e.Amount, events[i-1].Amount)
		}
		seen, ok := st.Bids.Load(e.ID)
		if !ok {
			t.Fatalf("auction %s: accepted bid %s never reached the origin", id, e.ID)
		}
		if c, err := money.Parse(seen.(string)); err != nil || c != e.Amount {
			t.Fatalf("bid %s: origin saw %q, the store has %d", e.ID, seen, e.Amount)
		}
		users[e.User] = true
		amounts[e.Amount] = true
	}
	last := events[len(events)-1]
	for _, r := range o.TooLow[id] {
		if !amounts[r.Highest] || r.Amount >= r.Highest+100 {
			t.Fatalf("auction %s: a bid of %d refused as too low against %d", id, r.Amount, r.Highest)
		}
	}
	forget(id)
	h := st.Get("/_edgeq/auctions/" + id + "/highest-bid")
	hb, _ := h.JSON["highest_bid"].(map[string]any)
	if h.Status != 200 || hb["bid_id"] != last.ID || hb["amount"] != money.Format(last.Amount) {
		t.Fatalf("highest bid %s, want %s at %s", h.Body, last.ID, money.Format(last.Amount))
	}
	// The history, newest first, is the stream backwards.
	var history []string
	for page := 1; ; page++ {
		a := st.Get(fmt.Sprintf("/_edgeq/auctions/%s/bids?page=%d&page_size=100", id, page))
		if a.Status != 200 || Num(a.JSON["total_count"]) != int64(len(events)) {
			t.Fatalf("history page %d: %d %s", page, a.Status, a.Body)
		}
		items, _ := a.JSON["items"].([]any)
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			history = append(history, it.(map[string]any)["bid_id"].(string))
		}
	}
	for i, e := range events {
		if history[len(history)-1-i] != e.ID {
			t.Fatalf("history %v is not the accepted bids newest first", history)
		}
	}
	stats := st.Get("/_edgeq/auctions/" + id + "/stats")
	growth, _ := stats.JSON["price_growth"].(map[string]any)
	if Num(stats.JSON["total_bids"]) != int64(len(events)) || Num(stats.JSON["unique_bidders"]) != int64(len(users)) ||
		growth["current_highest"] != money.Format(last.Amount) {
		t.Fatalf("stats %s: want %d bids from %d bidders, highest %s", stats.Body, len(events), len(users), money.Format(last.Amount))
	}
}
