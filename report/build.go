package report

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
)

// Reader builds reports from the store.
type Reader struct {
	Client    redis.UniversalClient
	Keys      store.Keys
	Retention time.Duration
}

// Query asks for one queue's report.
type Query struct {
	Queue    string
	From, To time.Time
	Step     time.Duration // a multiple of a minute; 0 one minute
	// Products and Auctions are the ids to look at; those without data in the range are left out.
	Products, Auctions []string
	// Owners are the ids to look at of the registered scopes (RegisterScope), by kind; likewise. Kinds
	// no scope is registered for are not read.
	Owners  map[Kind][]string
	Lottery Lottery

	// ownSpan: neither from nor to was given, so the report covers the drop's own span (DropSpan),
	// From and To holding the fallback until it is known. stepGiven: the step was asked for, and is
	// refused rather than widened when it makes too many points.
	ownSpan, stepGiven bool
}

// MaxPoints bounds the points of a report's series (docs/reference.md "The report").
const MaxPoints = 2880

// span is the window a query reads and its step: whole minutes, and, for a step of whole quarter
// hours, widened to whole quarter hours (it then reads the quarter-hour hashes alone).
func (q Query) span() (from, to time.Time, step time.Duration) {
	step = max(q.Step.Truncate(time.Minute), time.Minute)
	from, to = q.From, q.To
	if step%(15*time.Minute) == 0 {
		from = from.UTC().Truncate(15 * time.Minute)
		if t := to.UTC().Truncate(15 * time.Minute); t.Before(to) {
			to = t.Add(15 * time.Minute)
		}
	}
	return from, to, step
}

// Points is how many points the query's series have.
func (q Query) Points() int64 {
	from, to, step := q.span()
	from = from.UTC().Truncate(time.Minute)
	return int64((to.Sub(from) + step - 1) / step)
}

// Read builds the report of q.
func (r Reader) Read(ctx context.Context, q Query) (*Report, error) {
	from, to, step := q.span()
	w := newWindow(from, to, step)
	rd := reader{client: r.Client, keys: r.Keys, retention: max(r.Retention, time.Hour)}
	queues, err := rd.readScopes(ctx, Queue, []string{q.Queue}, w)
	if err != nil {
		return nil, err
	}
	products, err := rd.readScopes(ctx, Product, q.Products, w)
	if err != nil {
		return nil, err
	}
	auctions, err := rd.readScopes(ctx, Auction, q.Auctions, w)
	if err != nil {
		return nil, err
	}
	qd := queues[0]
	rep := &Report{Queue: q.Queue, From: w.from, To: to.UTC(), StepSeconds: int64(step / time.Second),
		waits: merged(qd.waits), unserved: merged(qd.unserved)}
	rep.Summary = queueSummary(qd, q.Lottery, rep.waits, rep.unserved)
	rep.Series = queueSeries(qd, w)
	rep.Products, rep.Auctions = []ProductSummary{}, []AuctionSummary{}
	for i, id := range q.Products {
		if pd := products[i]; pd.any {
			ps, series := productOf(id, pd, w)
			rep.Products = append(rep.Products, ps)
			rep.Series.Products[id] = series
		}
	}
	for i, id := range q.Auctions {
		if ad := auctions[i]; ad.any {
			rep.Auctions = append(rep.Auctions, AuctionSummary{ID: id, Accepted: ad.total(Accepted), Refused: ad.refusals()})
			rep.Series.Auctions[id] = AuctionSeries{Accepted: ad.points(Accepted, w), Refused: ad.refusedPoints(w),
				RefusedByCode: ad.byCode(w)}
		}
	}
	if err := rd.readRegistered(ctx, rep, q.Owners, w); err != nil {
		return nil, err
	}
	return rep, nil
}

// merged adds histograms (per point) into one.
func merged(points ...[]map[int]int64) map[int]int64 {
	out := map[int]int64{}
	for _, p := range points {
		for _, h := range p {
			for b, n := range h {
				out[b] += n
			}
		}
	}
	return out
}

// waitsOf is the percentiles of a histogram (null when it is empty).
func waitsOf(h map[int]int64) Waits {
	return Waits{P50: Seconds(percentile(h, .5)), P90: Seconds(percentile(h, .9)), P99: Seconds(percentile(h, .99)),
		Max: Seconds(percentile(h, 1))}
}

// queueSummary is the range's totals of the queue; served and unserved are its waits.
func queueSummary(qd *scopeData, lottery Lottery, served, unserved map[int]int64) Summary {
	everyone := maps.Clone(served)
	for b, n := range unserved {
		everyone[b] += n
	}
	return Summary{
		Joined: qd.total(Joined), Served: qd.total(Served), GaveUp: qd.total(GaveUp),
		TurnedAway: TurnedAway{SoldOut: qd.total(TurnedAwaySoldOut), Closed: qd.total(TurnedAwayClosed)},
		Completed:  qd.total(Completed), Abandoned: qd.total(Abandoned), Expired: qd.total(Expired), Revoked: qd.total(Revoked),
		Refused:     qd.refusals(),
		Turnstile:   Turnstile{Passed: qd.total(TurnstilePassed), Failed: qd.total(TurnstileFailed)},
		Lottery:     lottery,
		WaitSeconds: WaitSeconds{Served: waitsOf(served), Everyone: waitsOf(everyone)},
	}
}

// queueSeries is the queue's points; the products' and auctions' maps are left for the caller.
func queueSeries(qd *scopeData, w window) Series {
	s := Series{Minute: make([]time.Time, w.n)}
	for i := range s.Minute {
		s.Minute[i] = w.from.Add(time.Duration(i) * w.step)
	}
	s.Joined, s.Served, s.GaveUp = qd.points(Joined, w), qd.points(Served, w), qd.points(GaveUp, w)
	s.TurnedAway = TurnedAwaySeries{SoldOut: qd.points(TurnedAwaySoldOut, w), Closed: qd.points(TurnedAwayClosed, w)}
	s.Completed, s.Abandoned, s.Expired = qd.points(Completed, w), qd.points(Abandoned, w), qd.points(Expired, w)
	s.TurnstilePassed, s.TurnstileFailed = qd.points(TurnstilePassed, w), qd.points(TurnstileFailed, w)
	s.Waiting, s.Active = qd.gaugePoints(Waiting, w), qd.gaugePoints(Active, w)
	s.Assigned, s.Serving = qd.gaugePoints(Assigned, w), qd.gaugePoints(Serving, w)
	// The per-point percentiles stay the served visitors': the line of how long a turn took.
	s.WaitP50, s.WaitP90 = make([]Seconds, w.n), make([]Seconds, w.n)
	for i, h := range qd.waits {
		s.WaitP50[i], s.WaitP90[i] = Seconds(percentile(h, .5)), Seconds(percentile(h, .9))
	}
	s.Refused = qd.byCode(w)
	s.Products, s.Auctions = map[string]ProductSeries{}, map[string]AuctionSeries{}
	return s
}

// productOf is one product's summary and points.
func productOf(id string, pd *scopeData, w window) (ProductSummary, ProductSeries) {
	ps := ProductSummary{ID: id, Admitted: pd.total(Admitted), Sold: pd.total(Committed), Released: pd.total(Released),
		Cancelled: pd.total(Cancelled), Restocked: pd.total(Restocked), Refused: pd.refusals()}
	ps.Held = max(0, ps.Admitted-ps.Sold-ps.Released-ps.Cancelled)
	if z := pd.zeros[Stock]; len(z) > 0 {
		at := slices.MinFunc(z, func(a, b time.Time) int { return a.Compare(b) })
		ps.SoldOutAt = &at
	}
	if t, ok := pd.firsts[Admitted]; ok {
		ps.FirstAdmittedAt = &t
	}
	stock := pd.gaugePoints(Stock, w)
	if last := stock[len(stock)-1]; last >= 0 {
		ps.StockLeft = &last
	}
	return ps, ProductSeries{Admitted: pd.points(Admitted, w), Sold: pd.points(Committed, w),
		Released: pd.points(Released, w), Cancelled: pd.points(Cancelled, w), Refused: pd.refusedPoints(w),
		RefusedByCode: pd.byCode(w), Stock: stock}
}

// points is a count's points (zeros when never counted in the range).
func (sd *scopeData) points(name string, w window) []int64 {
	if p := sd.counts[name]; p != nil {
		return p
	}
	return make([]int64, w.n)
}

// gaugePoints is a gauge's points (-1 where unknown).
func (sd *scopeData) gaugePoints(name string, w window) Gauge {
	if p := sd.gauges[name]; p != nil {
		return p
	}
	out := make(Gauge, w.n)
	for i := range out {
		out[i] = -1
	}
	return out
}

// byCode is each refusal code's points.
func (sd *scopeData) byCode(w window) map[string][]int64 {
	out := map[string][]int64{}
	for code := range sd.refusals() {
		out[code] = sd.points(Refused(code), w)
	}
	return out
}

// WaitHistogram is the range's waiting times of the served visitors as (bucket midpoint, visitors),
// shortest first.
func (r *Report) WaitHistogram() (mids []time.Duration, counts []int64) {
	buckets := make([]int, 0, len(r.waits))
	for b := range r.waits {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets)
	for _, b := range buckets {
		mids = append(mids, BucketMid(b))
		counts = append(counts, r.waits[b])
	}
	return mids, counts
}

// JSON is the report as the API answers it.
func (r *Report) JSON() ([]byte, error) { return json.Marshal(r) }
