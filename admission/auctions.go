package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
)

// HeaderBidID carries an accepted bid's id to the origin.
const HeaderBidID = "Edgeq-Bid-Id"

// bidRecordTTL is how long a bid's record stays for withdrawal and commit to find.
const bidRecordTTL = 24 * time.Hour

// bidStep builds the handler of a bid route.
func (s *Service) bidStep(route config.Route, next http.Handler) (http.Handler, error) {
	a := route.Admission
	auctionSrc, err := config.ParseFieldSource(a.Auction)
	if err != nil {
		return nil, err
	}
	amountSrc, err := config.ParseFieldSource(a.Amount)
	if err != nil {
		return nil, err
	}
	userSrc, err := config.ParseUserSource(a.User)
	if err != nil {
		return nil, err
	}
	releaseOn, err := parseReleaseOn(a.ReleaseOn)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if web.RequestFrom(r.Context()).Store.Degraded {
			s.storeFailed(w, r, "bid", next, web.ErrDegraded, start)
			return
		}
		auction, user, amount, e := s.readBid(r, auctionSrc, amountSrc, userSrc)
		if e != nil {
			s.refuseAs(w, r, "bid", e, start)
			return
		}
		id := s.o.IDs.NextString()
		res, err := bidScript.Run(r.Context(), s.client, bidKeys(s.keys, auction, id),
			id, user, amount, int64(bidRecordTTL/time.Second), s.o.StreamBound).Int64Slice()
		if err != nil || len(res) != 2 {
			// No answer: the bid may have been taken. It is withdrawn as soon as the store answers.
			s.compensateLater(compensation{bid: true, owner: auction, id: id})
			s.storeFailed(w, r, "bid", next, fmt.Errorf("bid: %v %v", res, err), start)
			return
		}
		if e := bidRefusal(res[0], res[1]); e != nil {
			s.refuseAs(w, r, "bid", e, start)
			return
		}
		s.metrics.admissions.WithLabelValues("bid", "admitted").Inc()
		s.metrics.duration.WithLabelValues("bid").Observe(time.Since(start).Seconds())
		s.reads.forget(auction)
		r.Header.Set(HeaderBidID, id)
		next.ServeHTTP(w, r)
		s.settleBid(r, auction, id, releaseOn)
	}), nil
}

func parseReleaseOn(texts []string) ([]config.ReleaseOutcome, error) {
	out := make([]config.ReleaseOutcome, 0, len(texts))
	for _, text := range texts {
		o, err := config.ParseReleaseOutcome(text)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// readBid extracts the auction, the bidder and the amount (a decimal string, integer cents).
func (s *Service) readBid(r *http.Request, auctionSrc, amountSrc config.FieldSource, userSrc config.UserSource) (auction, user string, cents int64, e *web.Error) {
	f := fields.New(r, s.o.MaxBodyBytes)
	auction, found, e := f.Get(auctionSrc)
	if e != nil {
		return "", "", 0, e
	}
	if !found || !config.ID.MatchString(auction) {
		return "", "", 0, web.ErrInvalidRequest.With("field", "auction").Because(fmt.Errorf("auction %q", auction))
	}
	text, found, e := f.Get(amountSrc)
	if e != nil {
		return "", "", 0, e
	}
	if !found {
		return "", "", 0, web.ErrInvalidBid.With("field", "amount").Because(fmt.Errorf("no %s", amountSrc))
	}
	cents, err := money.Parse(text)
	if err != nil || cents <= 0 {
		return "", "", 0, web.ErrInvalidBid.With("field", "amount").Because(fmt.Errorf("amount %q", text))
	}
	raw, e := s.userOf(r, f, userSrc)
	if e != nil {
		return "", "", 0, e
	}
	return auction, s.pseudonyms.of(raw), cents, nil
}

func bidRefusal(code, highest int64) *web.Error {
	switch code {
	case 0:
		return nil
	case 1:
		return web.ErrBidTooLow.With("highest_amount", money.Format(highest))
	case 2:
		return web.ErrAuctionNotFound
	case 3:
		return web.ErrAuctionEnded
	case 4:
		return web.ErrSelfBid
	case 5:
		return web.ErrInvalidBid.With("starting_price", money.Format(highest))
	}
	return web.ErrStoreUnavailable.Because(fmt.Errorf("bid answered %d", code))
}

// settleBid withdraws the bid when the origin's outcome is in release_on, and commits it otherwise.
func (s *Service) settleBid(r *http.Request, auction, id string, releaseOn []config.ReleaseOutcome) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	keys := bidKeys(s.keys, auction, id)
	logger := web.RequestFrom(r.Context()).Logger()
	o := web.OutcomeFrom(r.Context())
	if releases(o, releaseOn) {
		code, err := withdrawScript.Run(ctx, s.client, keys, id, s.o.StreamBound, int64(bidRecordTTL/time.Second)).Int64()
		if err != nil {
			logger.Warn("withdrawing a bid failed: retried until the store answers", "bid", id, "auction", auction, "error", err.Error())
			s.compensateLater(compensation{bid: true, owner: auction, id: id})
			return
		}
		s.metrics.admissions.WithLabelValues("bid", "released").Inc()
		s.reads.forget(auction)
		logger.Info("bid withdrawn", "bid", id, "auction", auction, "origin_status", statusOf(o), "result", code)
		return
	}
	if err := bidCommitScript.Run(ctx, s.client, keys, id).Err(); err != nil {
		logger.Warn("committing a bid failed", "bid", id, "error", err.Error())
	}
}

// releases reports whether an origin outcome gives the admission back.
func releases(o *web.Outcome, releaseOn []config.ReleaseOutcome) bool {
	if o == nil || !o.Forwarded {
		return true
	}
	for _, want := range releaseOn {
		if want.Matches(o.Status, o.TransportError) {
			return true
		}
	}
	return false
}

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
	return Bid{BidID: id, Bidder: bidder, Amount: money.Format(cents), BidAt: time.UnixMilli(ms).UTC().Format(recordTime)}, true
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
func (s *Service) view(ctx context.Context, id string) (*auctionView, error) {
	c := &s.reads
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

	// The load serves every waiter: it does not end with the request that started it.
	loadCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	l.v, l.err = s.loadView(loadCtx, id)
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
func (s *Service) loadView(ctx context.Context, id string) (*auctionView, error) {
	pipe := s.client.Pipeline()
	info := pipe.HGetAll(ctx, auctionInfoKey(s.keys, id))
	highest := pipe.HGetAll(ctx, auctionHighestKey(s.keys, id))
	total := pipe.ZCard(ctx, auctionBidsKey(s.keys, id))
	bidders := pipe.HLen(ctx, auctionBiddersKey(s.keys, id))
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
			BidAt: time.UnixMilli(at).UTC().Format(recordTime)}
	}
	return v, nil
}

// page returns one page of the history, newest first (highest first: accepted bids only ever rise).
func (s *Service) page(ctx context.Context, id string, v *auctionView, page, size int64) ([]Bid, error) {
	v.pageMu.Lock()
	defer v.pageMu.Unlock()
	key := [2]int64{page, size}
	if items, ok := v.pages[key]; ok {
		return items, nil
	}
	start := (page - 1) * size
	rows, err := s.client.ZRevRangeWithScores(ctx, auctionBidsKey(s.keys, id), start, start+size-1).Result()
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

// registerAuctionReads adds the public auction reads under the prefix.
func (s *Service) registerAuctionReads(mux *http.ServeMux) {
	p := s.o.Prefix
	mux.HandleFunc("GET "+p+"/auctions/{id}/highest-bid", s.handleHighest)
	mux.HandleFunc("GET "+p+"/auctions/{id}/bids", s.handleHistory)
	mux.HandleFunc("GET "+p+"/auctions/{id}/stats", s.handleStats)
	mux.HandleFunc("POST "+p+"/bids/highest-bids/batch", s.handleBatch)
}

func (s *Service) auctionFor(w http.ResponseWriter, r *http.Request) (string, *auctionView, bool) {
	id := r.PathValue("id")
	if !config.ID.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return "", nil, false
	}
	v, err := s.view(r.Context(), id)
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return "", nil, false
	}
	if !v.found {
		s.responder.Error(w, r, web.ErrAuctionNotFound)
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

func (s *Service) handleHighest(w http.ResponseWriter, r *http.Request) {
	if id, v, ok := s.auctionFor(w, r); ok {
		web.WriteJSON(w, http.StatusOK, highestBody(id, v))
	}
}

func (s *Service) handleHistory(w http.ResponseWriter, r *http.Request) {
	page, size, e := paging(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	id, v, ok := s.auctionFor(w, r)
	if !ok {
		return
	}
	items, err := s.page(r.Context(), id, v, page, size)
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": v.totalBids, "page": page, "page_size": size})
}

func (s *Service) handleStats(w http.ResponseWriter, r *http.Request) {
	id, v, ok := s.auctionFor(w, r)
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
func (s *Service) handleBatch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		AuctionIDs []string `json:"auction_ids"`
	}
	if e := fields.DecodeJSON(w, r, 16<<10, &body); e != nil {
		s.responder.Error(w, r, e)
		return
	}
	if len(body.AuctionIDs) == 0 || len(body.AuctionIDs) > 100 {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "auction_ids").With("problems", "1 to 100 auction ids"))
		return
	}
	out := make([]map[string]any, 0, len(body.AuctionIDs))
	for _, id := range body.AuctionIDs {
		if !config.ID.MatchString(id) {
			s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "auction_ids").With("problems", fmt.Sprintf("%q is not an id", id)))
			return
		}
	}
	for _, id := range body.AuctionIDs {
		v, err := s.view(r.Context(), id)
		if err != nil {
			s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		item := highestBody(id, v)
		if !v.found {
			item["error"] = web.ErrAuctionNotFound.Code
		}
		out = append(out, item)
	}
	web.WriteJSON(w, http.StatusOK, out)
}

// ApplyAuctions seeds the configuration file's auctions: created when absent, updated otherwise (on a
// reload only those whose entry changed). The owner is stored as a pseudonym, like bidders.
func (s *Service) ApplyAuctions(ctx context.Context, auctions, previous []config.Auction) error {
	var errs []error
	for _, a := range auctions {
		if slices.Contains(previous, a) {
			continue
		}
		if err := s.writeAuction(ctx, a); err != nil {
			errs = append(errs, fmt.Errorf("auction %s: %w", a.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Service) writeAuction(ctx context.Context, a config.Auction) error {
	start, err1 := money.Parse(a.StartingPrice)
	inc, err2 := money.Parse(a.MinIncrement)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	owner := ""
	if a.Owner != "" {
		owner = s.pseudonyms.of(a.Owner)
	}
	if err := auctionScript.Run(ctx, s.client, []string{auctionInfoKey(s.keys, a.ID)}, start, inc, a.EndsAt.UnixMilli(), owner).Err(); err != nil {
		return err
	}
	s.reads.forget(a.ID)
	if err := s.client.SAdd(ctx, auctionIndexKey(s.keys), a.ID).Err(); err != nil {
		return err
	}
	return s.ensureStreamGroup(ctx, auctionEventsKey(s.keys, a.ID))
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

func (s *Service) adminPutAuction(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body struct {
		StartingPrice *string `json:"starting_price"`
		MinIncrement  *string `json:"min_increment"`
		EndsAt        *string `json:"ends_at"`
		Owner         *string `json:"owner"`
	}
	if e := fields.DecodeJSON(w, r, maxAdminBody, &body); e != nil {
		s.responder.Error(w, r, e)
		return
	}
	a := config.Auction{ID: id, MinIncrement: "1.00"}
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
			s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "ends_at"))
			return
		}
		a.EndsAt = t
	}
	if err := config.ValidateAuction(a); err != nil {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("problems", config.OneLine(err)).Because(err))
		return
	}
	if err := s.writeAuction(r.Context(), a); err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	s.writeAuctionJSON(w, r, id)
}

func (s *Service) adminGetAuction(w http.ResponseWriter, r *http.Request) {
	if !config.ID.MatchString(r.PathValue("id")) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	s.writeAuctionJSON(w, r, r.PathValue("id"))
}

// adminListAuctions lists the auctions (configured or created through the API) sorted by id, every one
// or a page of them, from the same short-lived per-replica views as the public reads.
func (s *Service) adminListAuctions(w http.ResponseWriter, r *http.Request) {
	page, size, e := web.Paging(r, 0)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	ids, err := s.client.SMembers(r.Context(), auctionIndexKey(s.keys)).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	slices.Sort(ids)
	lo, hi, size := web.Window(int64(len(ids)), page, size)
	items := []Auction{}
	for _, id := range ids[lo:hi] {
		v, err := s.view(r.Context(), id)
		if err != nil {
			s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		if v.found {
			items = append(items, auctionOf(id, v))
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": len(ids), "page": page, "page_size": size})
}

func (s *Service) writeAuctionJSON(w http.ResponseWriter, r *http.Request, id string) {
	s.reads.forget(id)
	v, err := s.view(r.Context(), id)
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	if !v.found {
		s.responder.Error(w, r, web.ErrAuctionNotFound)
		return
	}
	web.WriteJSON(w, http.StatusOK, auctionOf(id, v))
}

func auctionOf(id string, v *auctionView) Auction {
	return Auction{ID: id, StartingPrice: money.Format(v.startCents), MinIncrement: money.Format(v.incCents),
		EndsAt: v.endsAt.Format(time.RFC3339), Ended: !time.Now().Before(v.endsAt), HighestBid: v.highest,
		TotalBids: v.totalBids, UniqueBidders: v.bidders}
}

// adminUserBids lists a user's bids (from the worker's index), newest first.
func (s *Service) adminUserBids(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	if r.URL.Query().Get("pseudonym") == "1" {
		if !pseudonymSyntax.MatchString(user) {
			s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "user"))
			return
		}
	} else {
		user = s.pseudonyms.of(user)
	}
	page, size, e := paging(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	ctx := r.Context()
	index := userBidsKey(s.keys, user)
	total, err := s.client.ZCard(ctx, index).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	start := (page - 1) * size
	ids, err := s.client.ZRevRange(ctx, index, start, start+size-1).Result()
	items := []any{}
	if err == nil && len(ids) > 0 {
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = bidJSONKey(s.keys, id)
		}
		if values, err := s.client.MGet(ctx, keys...).Result(); err == nil {
			for _, v := range values {
				if str, ok := v.(string); ok {
					items = append(items, rawJSON(str))
				}
			}
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

// PlaceBid runs bid.lua alone: what every bid admission costs the store, exported for the benchmark
// that compares it with bids through edgeq. user is already a pseudonym; the answer is bid.lua's code
// (0 accepted, 1 too low, ...).
func PlaceBid(ctx context.Context, st *store.Store, auction, user, id string, cents int64) (code int64, err error) {
	res, err := bidScript.Run(ctx, st.Client, bidKeys(st.Keys, auction, id), id, user, cents,
		int64(bidRecordTTL/time.Second), 100_000).Int64Slice()
	if err != nil || len(res) != 2 {
		return 0, fmt.Errorf("bid: %v %v", res, err)
	}
	return res[0], nil
}
