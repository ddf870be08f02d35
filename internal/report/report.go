package report

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
)

// Report is what GET {admin}/api/report answers (CONTRACT section 11.3; docs/reference.md "The
// report").
type Report struct {
	Queue string    `json:"queue"`
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	// StepSeconds is the width of each point of the series: 60 (one-minute buckets) unless the
	// request asked for wider points.
	StepSeconds int64            `json:"step_seconds"`
	Summary     Summary          `json:"summary"`
	Products    []ProductSummary `json:"products"`
	Auctions    []AuctionSummary `json:"auctions"`
	Series      Series           `json:"series"`

	// waits is the range's waiting-time histogram, for the page's distribution chart.
	waits map[int]int64
}

// Summary is the range's totals of the queue.
type Summary struct {
	Joined      int64            `json:"joined"`
	Served      int64            `json:"served"`
	GaveUp      int64            `json:"gave_up"`
	Completed   int64            `json:"completed"`
	Abandoned   int64            `json:"abandoned"`
	Expired     int64            `json:"expired"`
	Revoked     int64            `json:"revoked"`
	Refused     map[string]int64 `json:"refused"`
	WaitSeconds Waits            `json:"wait_seconds"`
	Turnstile   Turnstile        `json:"turnstile"`
	Lottery     Lottery          `json:"lottery"`
}

// Waits are percentiles of the served visitors' waiting times, in seconds; null when nobody was served
// in the range.
type Waits struct {
	P50 Seconds `json:"p50"`
	P90 Seconds `json:"p90"`
	P99 Seconds `json:"p99"`
	Max Seconds `json:"max"`
}

// Seconds is a duration in seconds, to the centisecond; NaN (no data) is null in JSON.
type Seconds float64

func (s Seconds) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(s)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, math.Round(float64(s)*100)/100, 'f', -1, 64), nil
}

// Valid reports whether s holds a value.
func (s Seconds) Valid() bool { return !math.IsNaN(float64(s)) }

// Turnstile counts the join-time checks.
type Turnstile struct {
	Passed int64 `json:"passed"`
	Failed int64 `json:"failed"`
}

// Lottery is the queue's pre-queue draw at its opening: how many places it ordered and the SHA-256 of
// its seed (the seed itself stays secret); size 0 when none was drawn.
type Lottery struct {
	Size       int64  `json:"size"`
	SeedSHA256 string `json:"seed_sha256"`
}

// NewLottery describes a draw of size places with seed ("" none).
func NewLottery(size int64, seed string) Lottery {
	if size == 0 || seed == "" {
		return Lottery{}
	}
	sum := sha256.Sum256([]byte(seed))
	return Lottery{Size: size, SeedSHA256: hex.EncodeToString(sum[:])}
}

// ProductSummary is one product's range.
type ProductSummary struct {
	ID        string           `json:"id"`
	Admitted  int64            `json:"admitted"`
	Committed int64            `json:"committed"`
	Released  int64            `json:"released"`
	Cancelled int64            `json:"cancelled"`
	Refused   map[string]int64 `json:"refused"`
	// SoldOutAt is the first time in the range its stock reached 0 (the tick that saw it).
	SoldOutAt *time.Time `json:"sold_out_at"`
	Restocked int64      `json:"restocked"`
	// FirstAdmittedAt is the range's first admission (the tick that counted it); StockLeft the last
	// stock sampled by the range's end (null: never sampled).
	FirstAdmittedAt *time.Time `json:"first_admitted_at"`
	StockLeft       *int64     `json:"stock_left"`
}

// AuctionSummary is one auction's range.
type AuctionSummary struct {
	ID       string           `json:"id"`
	Accepted int64            `json:"accepted"`
	Refused  map[string]int64 `json:"refused"`
}

// Series are the range's points, oldest first; Minute[i] starts point i.
type Series struct {
	Minute          []time.Time              `json:"minute"`
	Joined          []int64                  `json:"joined"`
	Served          []int64                  `json:"served"`
	GaveUp          []int64                  `json:"gave_up"`
	Completed       []int64                  `json:"completed"`
	Abandoned       []int64                  `json:"abandoned"`
	Expired         []int64                  `json:"expired"`
	TurnstilePassed []int64                  `json:"turnstile_passed"`
	TurnstileFailed []int64                  `json:"turnstile_failed"`
	Waiting         Gauge                    `json:"waiting"`
	Active          Gauge                    `json:"active"`
	Assigned        Gauge                    `json:"assigned"`
	Serving         Gauge                    `json:"serving"`
	WaitP50         []Seconds                `json:"wait_p50"`
	WaitP90         []Seconds                `json:"wait_p90"`
	Refused         map[string][]int64       `json:"refused"`
	Products        map[string]ProductSeries `json:"products"`
	Auctions        map[string]AuctionSeries `json:"auctions"`
}

// Gauge is a sampled value per point; -1 (never sampled) is null in JSON.
type Gauge []int64

func (g Gauge) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(g)*4)
	b = append(b, '[')
	for i, x := range g {
		if i > 0 {
			b = append(b, ',')
		}
		if x < 0 {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendInt(b, x, 10)
		}
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads null as -1 (unknown), as MarshalJSON writes it.
func (g *Gauge) UnmarshalJSON(b []byte) error {
	var raw []*int64
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*g = make(Gauge, len(raw))
	for i, v := range raw {
		(*g)[i] = -1
		if v != nil {
			(*g)[i] = *v
		}
	}
	return nil
}

// UnmarshalJSON reads null as NaN (no data), as MarshalJSON writes it.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Seconds(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	*s = Seconds(f)
	return err
}

// ProductSeries is one product's points: Refused sums every code, RefusedByCode splits them.
type ProductSeries struct {
	Admitted      []int64            `json:"admitted"`
	Committed     []int64            `json:"committed"`
	Released      []int64            `json:"released"`
	Cancelled     []int64            `json:"cancelled"`
	Refused       []int64            `json:"refused"`
	RefusedByCode map[string][]int64 `json:"refused_by_code"`
	Stock         Gauge              `json:"stock"`
}

// AuctionSeries is one auction's points.
type AuctionSeries struct {
	Accepted      []int64            `json:"accepted"`
	Refused       []int64            `json:"refused"`
	RefusedByCode map[string][]int64 `json:"refused_by_code"`
}

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
	Lottery            Lottery
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
	rep := &Report{Queue: q.Queue, From: w.from, To: to.UTC(), StepSeconds: int64(step / time.Second), waits: map[int]int64{}}
	for _, h := range qd.waits {
		for b, n := range h {
			rep.waits[b] += n
		}
	}
	rep.Summary = Summary{
		Joined: qd.total(Joined), Served: qd.total(Served), GaveUp: qd.total(GaveUp), Completed: qd.total(Completed),
		Abandoned: qd.total(Abandoned), Expired: qd.total(Expired), Revoked: qd.total(Revoked), Refused: qd.refusals(),
		Turnstile: Turnstile{Passed: qd.total(TurnstilePassed), Failed: qd.total(TurnstileFailed)},
		Lottery:   q.Lottery,
		WaitSeconds: Waits{P50: Seconds(percentile(rep.waits, .5)), P90: Seconds(percentile(rep.waits, .9)),
			P99: Seconds(percentile(rep.waits, .99)), Max: Seconds(percentile(rep.waits, 1))},
	}
	s := &rep.Series
	s.Minute = make([]time.Time, w.n)
	for i := range s.Minute {
		s.Minute[i] = w.from.Add(time.Duration(i) * step)
	}
	s.Joined, s.Served, s.GaveUp = qd.points(Joined, w), qd.points(Served, w), qd.points(GaveUp, w)
	s.Completed, s.Abandoned, s.Expired = qd.points(Completed, w), qd.points(Abandoned, w), qd.points(Expired, w)
	s.TurnstilePassed, s.TurnstileFailed = qd.points(TurnstilePassed, w), qd.points(TurnstileFailed, w)
	s.Waiting, s.Active = qd.gaugePoints(Waiting, w), qd.gaugePoints(Active, w)
	s.Assigned, s.Serving = qd.gaugePoints(Assigned, w), qd.gaugePoints(Serving, w)
	s.WaitP50, s.WaitP90 = make([]Seconds, w.n), make([]Seconds, w.n)
	for i, h := range qd.waits {
		s.WaitP50[i], s.WaitP90[i] = Seconds(percentile(h, .5)), Seconds(percentile(h, .9))
	}
	s.Refused = qd.byCode(w)
	s.Products, s.Auctions = map[string]ProductSeries{}, map[string]AuctionSeries{}
	rep.Products, rep.Auctions = []ProductSummary{}, []AuctionSummary{}
	for i, id := range q.Products {
		pd := products[i]
		if !pd.any {
			continue
		}
		ps := ProductSummary{ID: id, Admitted: pd.total(Admitted), Committed: pd.total(Committed),
			Released: pd.total(Released), Cancelled: pd.total(Cancelled), Restocked: pd.total(Restocked), Refused: pd.refusals()}
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
		rep.Products = append(rep.Products, ps)
		s.Products[id] = ProductSeries{Admitted: pd.points(Admitted, w), Committed: pd.points(Committed, w),
			Released: pd.points(Released, w), Cancelled: pd.points(Cancelled, w), Refused: pd.refusedPoints(w),
			RefusedByCode: pd.byCode(w), Stock: stock}
	}
	for i, id := range q.Auctions {
		ad := auctions[i]
		if !ad.any {
			continue
		}
		rep.Auctions = append(rep.Auctions, AuctionSummary{ID: id, Accepted: ad.total(Accepted), Refused: ad.refusals()})
		s.Auctions[id] = AuctionSeries{Accepted: ad.points(Accepted, w), Refused: ad.refusedPoints(w), RefusedByCode: ad.byCode(w)}
	}
	return rep, nil
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

// WaitHistogram is the range's waiting times as (bucket midpoint, visitors), shortest first.
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

// Trim cuts the points before the first and after the last that counted anything, keeping pad points
// on each side: the page of a queue's last 24 hours then shows the drop, not a day of flat lines. The
// summary is unchanged (nothing was counted in what is cut).
func (r *Report) Trim(pad int) {
	s := &r.Series
	n := len(s.Minute)
	busy := func(i int) bool {
		for _, v := range [][]int64{s.Joined, s.Served, s.GaveUp, s.Completed, s.Abandoned, s.Expired, s.TurnstilePassed, s.TurnstileFailed} {
			if v[i] > 0 {
				return true
			}
		}
		for _, v := range s.Refused {
			if v[i] > 0 {
				return true
			}
		}
		for _, p := range s.Products {
			if p.Admitted[i]+p.Refused[i]+p.Released[i]+p.Cancelled[i]+p.Committed[i] > 0 {
				return true
			}
		}
		for _, a := range s.Auctions {
			if a.Accepted[i]+a.Refused[i] > 0 {
				return true
			}
		}
		return false
	}
	first, last := -1, -1
	for i := range n {
		if busy(i) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return
	}
	lo, hi := max(first-pad, 0), min(last+pad+1, n)
	if lo == 0 && hi == n {
		return
	}
	cut := func(v []int64) []int64 { return v[lo:hi] }
	step := time.Duration(r.StepSeconds) * time.Second
	r.From = s.Minute[lo]
	if hi < n {
		r.To = s.Minute[hi-1].Add(step)
	}
	s.Minute = s.Minute[lo:hi]
	s.Joined, s.Served, s.GaveUp, s.Completed = cut(s.Joined), cut(s.Served), cut(s.GaveUp), cut(s.Completed)
	s.Abandoned, s.Expired, s.TurnstilePassed, s.TurnstileFailed = cut(s.Abandoned), cut(s.Expired), cut(s.TurnstilePassed), cut(s.TurnstileFailed)
	s.Waiting, s.Active, s.Assigned, s.Serving = cut(s.Waiting), cut(s.Active), cut(s.Assigned), cut(s.Serving)
	s.WaitP50, s.WaitP90 = s.WaitP50[lo:hi], s.WaitP90[lo:hi]
	for code, v := range s.Refused {
		s.Refused[code] = cut(v)
	}
	for id, p := range s.Products {
		p.Admitted, p.Committed, p.Released, p.Cancelled, p.Refused, p.Stock = cut(p.Admitted), cut(p.Committed),
			cut(p.Released), cut(p.Cancelled), cut(p.Refused), cut(p.Stock)
		for code, v := range p.RefusedByCode {
			p.RefusedByCode[code] = cut(v)
		}
		s.Products[id] = p
	}
	for id, a := range s.Auctions {
		a.Accepted, a.Refused = cut(a.Accepted), cut(a.Refused)
		for code, v := range a.RefusedByCode {
			a.RefusedByCode[code] = cut(v)
		}
		s.Auctions[id] = a
	}
}
