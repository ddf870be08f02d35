package bid

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// Bid is a bid as the reads show it.
type Bid struct {
	BidID  string `json:"bid_id"`
	Bidder string `json:"bidder"` // pseudonym
	Amount string `json:"amount"`
	BidAt  string `json:"bid_at"`
}

func bidFromMember(member string, cents int64) (Bid, bool) {
	id, rest, ok1 := strings.Cut(member, ":")
	at, bidder, ok2 := strings.Cut(rest, ":")
	ms, err := strconv.ParseInt(at, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return Bid{}, false
	}
	return Bid{BidID: id, Bidder: bidder, Amount: money.Format(cents), BidAt: vocab.FormatUnixMilli(ms)}, true
}

// auctionReads are the snapshots the public reads answer from, per auction, refreshed from the store at
// most every readTTL on a replica: thousands of bidders polling the highest bid cost a few store
// calls a second. Concurrent misses on one auction share one load. A bid accepted on this replica
// clears its auction at once.
type auctionReads struct {
	mu      sync.Mutex
	entries map[string]*auctionView
	loading map[string]*viewLoad
	loads   atomic.Int64 // store loads, for tests and the benchmark
}

type auctionView struct {
	found        bool
	startCents   int64
	incCents     int64
	endsAt       time.Time
	highest      *Bid
	highestCents int64
	totalBids    int64
	bidders      int64
	at           time.Time

	pageMu sync.Mutex         // one history load at a time per snapshot: concurrent pollers share it
	pages  map[[2]int64][]Bid // (page, size) -> items
}

// viewLoad is a load in flight; stale means a bid landed meanwhile, so its result is not kept.
type viewLoad struct {
	done  chan struct{}
	v     *auctionView
	err   error
	stale bool
}

const readTTL = 250 * time.Millisecond

func newAuctionReads() auctionReads {
	return auctionReads{entries: map[string]*auctionView{}, loading: map[string]*viewLoad{}}
}

func (c *auctionReads) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
	if l := c.loading[id]; l != nil {
		l.stale = true
		delete(c.loading, id)
	}
}

// view returns the auction's snapshot, loading it when missing or older than readTTL.
func (k *kind) view(ctx context.Context, id string) (*auctionView, error) {
	c := &k.reads
	c.mu.Lock()
	if v, ok := c.entries[id]; ok && time.Since(v.at) < readTTL {
		c.mu.Unlock()
		return v, nil
	}
	if l := c.loading[id]; l != nil {
		c.mu.Unlock()
		select {
		case <-l.done:
			return l.v, l.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l := &viewLoad{done: make(chan struct{})}
	c.loading[id] = l
	c.mu.Unlock()

	// The load serves every waiter: it does not end with the request that started it, only with the
	// store's bound on a call (none on the embedded store, which queues a burst of reads instead).
	loadCtx, cancel := k.s.Store().Bound(context.WithoutCancel(ctx))
	l.v, l.err = k.loadView(loadCtx, id)
	cancel()
	c.loads.Add(1)

	c.mu.Lock()
	if !l.stale {
		delete(c.loading, id)
		if l.err == nil {
			if len(c.entries) >= 10_000 {
				clear(c.entries) // made-up ids must not grow memory
			}
			c.entries[id] = l.v
		}
	}
	c.mu.Unlock()
	close(l.done)
	return l.v, l.err
}

// loadView reads an auction's info, highest bid and counts in one round trip.
func (k *kind) loadView(ctx context.Context, id string) (*auctionView, error) {
	s := k.s
	pipe := s.Client().Pipeline()
	info := pipe.HGetAll(ctx, auctionInfoKey(s.Keys(), id))
	highest := pipe.HGetAll(ctx, auctionHighestKey(s.Keys(), id))
	total := pipe.ZCard(ctx, auctionBidsKey(s.Keys(), id))
	bidders := pipe.HLen(ctx, auctionBiddersKey(s.Keys(), id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	v := &auctionView{at: time.Now(), pages: map[[2]int64][]Bid{}}
	m := info.Val()
	if len(m) == 0 {
		return v, nil
	}
	v.found = true
	v.startCents, _ = strconv.ParseInt(m["starting_price"], 10, 64)
	v.incCents, _ = strconv.ParseInt(m["min_increment"], 10, 64)
	ends, _ := strconv.ParseInt(m["ends_at"], 10, 64)
	v.endsAt = time.UnixMilli(ends).UTC()
	v.totalBids, v.bidders = total.Val(), bidders.Val()
	if h := highest.Val(); len(h) > 0 {
		cents, _ := strconv.ParseInt(h["amount"], 10, 64)
		at, _ := strconv.ParseInt(h["at"], 10, 64)
		v.highestCents = cents
		v.highest = &Bid{BidID: h["bid_id"], Bidder: h["bidder"], Amount: money.Format(cents),
			BidAt: vocab.FormatUnixMilli(at)}
	}
	return v, nil
}

// page returns one page of the history, newest first (highest first: accepted bids only ever rise).
func (k *kind) page(ctx context.Context, id string, v *auctionView, page, size int64) ([]Bid, error) {
	s := k.s
	v.pageMu.Lock()
	defer v.pageMu.Unlock()
	key := [2]int64{page, size}
	if items, ok := v.pages[key]; ok {
		return items, nil
	}
	start := (page - 1) * size
	rows, err := s.Client().ZRevRangeWithScores(ctx, auctionBidsKey(s.Keys(), id), start, start+size-1).Result()
	if err != nil {
		return nil, err
	}
	items := make([]Bid, 0, len(rows))
	for _, z := range rows {
		if b, ok := bidFromMember(fmt.Sprint(z.Member), int64(z.Score)); ok {
			items = append(items, b)
		}
	}
	if len(v.pages) < 100 {
		v.pages[key] = items
	}
	return items, nil
}

func (k *kind) auctionFor(w http.ResponseWriter, r *http.Request) (string, *auctionView, bool) {
	s := k.s
	id, ok := s.PathID(w, r)
	if !ok {
		return "", nil, false
	}
	v, err := k.view(r.Context(), id)
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return "", nil, false
	}
	if !v.found {
		s.Responder().Error(w, r, errAuctionNotFound)
		return "", nil, false
	}
	return id, v, true
}

func highestBody(id string, v *auctionView) map[string]any {
	body := map[string]any{"auction_id": id, "highest_bid": nil}
	if v.highest != nil {
		body["highest_bid"] = v.highest
	}
	return body
}

func (k *kind) handleHighest(w http.ResponseWriter, r *http.Request) {
	if id, v, ok := k.auctionFor(w, r); ok {
		web.WriteJSON(w, http.StatusOK, highestBody(id, v))
	}
}

func (k *kind) handleHistory(w http.ResponseWriter, r *http.Request) {
	s := k.s
	page, size, e := admission.Paging(r)
	if e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	id, v, ok := k.auctionFor(w, r)
	if !ok {
		return
	}
	items, err := k.page(r.Context(), id, v, page, size)
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": v.totalBids, "page": page, "page_size": size})
}

func (k *kind) handleStats(w http.ResponseWriter, r *http.Request) {
	id, v, ok := k.auctionFor(w, r)
	if !ok {
		return
	}
	growth := map[string]any{"start_price": money.Format(v.startCents), "current_highest": nil, "growth_rate": 0.0}
	if v.highest != nil {
		growth["current_highest"] = v.highest.Amount
		if v.startCents > 0 {
			// (highest - start) / start, rounded to 4 places: 0.25 is 25 % above the starting price.
			rate := float64(v.highestCents-v.startCents) / float64(v.startCents)
			growth["growth_rate"] = float64(int64(rate*10000+0.5)) / 10000
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"auction_id": id, "total_bids": v.totalBids,
		"unique_bidders": v.bidders, "price_growth": growth})
}

// handleBatch answers the highest bid of up to 100 auctions at once; unknown ids answer
// "highest_bid": null with "error": "AUCTION_NOT_FOUND".
func (k *kind) handleBatch(w http.ResponseWriter, r *http.Request) {
	s := k.s
	var body struct {
		AuctionIDs []string `json:"auction_ids"`
	}
	if e := fields.DecodeJSON(w, r, 16<<10, &body); e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	if len(body.AuctionIDs) == 0 || len(body.AuctionIDs) > 100 {
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "auction_ids").With("problems", "1 to 100 auction ids"))
		return
	}
	out := make([]map[string]any, 0, len(body.AuctionIDs))
	for _, id := range body.AuctionIDs {
		if !config.ID.MatchString(id) {
			s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "auction_ids").With("problems", fmt.Sprintf("%q is not an id", id)))
			return
		}
	}
	for _, id := range body.AuctionIDs {
		v, err := k.view(r.Context(), id)
		if err != nil {
			s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		item := highestBody(id, v)
		if !v.found {
			item["error"] = errAuctionNotFound.Code
		}
		out = append(out, item)
	}
	web.WriteJSON(w, http.StatusOK, out)
}
