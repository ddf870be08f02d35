package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Report is what GET {admin}/api/report answers (docs/reference.md "The report"; docs/report.md
// defines each figure).
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
	// Scopes are the owners of the registered scopes (RegisterScope) that counted something in the
	// range, by the scope's name, in id order; a scope without such owners is left out, and so is the
	// key when none has any.
	Scopes map[string][]ScopeSummary `json:"scopes,omitempty"`
	Series Series                    `json:"series"`

	// waits is the range's histogram of the served visitors' waits, for the page's distribution
	// chart; unserved that of the visitors never served.
	waits, unserved map[int]int64
}

// Summary is the range's totals of the queue.
type Summary struct {
	Joined      int64            `json:"joined"`
	Served      int64            `json:"served"`
	GaveUp      int64            `json:"gave_up"`
	TurnedAway  TurnedAway       `json:"turned_away"`
	Completed   int64            `json:"completed"`
	Abandoned   int64            `json:"abandoned"`
	Expired     int64            `json:"expired"`
	Revoked     int64            `json:"revoked"`
	Refused     map[string]int64 `json:"refused"`
	WaitSeconds WaitSeconds      `json:"wait_seconds"`
	Turnstile   Turnstile        `json:"turnstile"`
	Lottery     Lottery          `json:"lottery"`
}

// TurnedAway counts the visitors still waiting, and there, when the queue sold out or closed: they
// were shown the end of the drop, not a turn.
type TurnedAway struct {
	SoldOut int64 `json:"sold_out"`
	Closed  int64 `json:"closed"`
}

// WaitSeconds are the range's waits: of the served visitors alone, and of everyone who waited (the
// served, and those who gave up or were turned away, up to when they left or the drop ended). The
// served alone look better than the drop was when many never got a turn.
type WaitSeconds struct {
	Served   Waits `json:"served"`
	Everyone Waits `json:"everyone"`
}

// Waits are percentiles of waiting times, in seconds; null when nobody's wait was counted in the
// range.
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

// ProductSummary is one product's range, in units. An admission ends sold (the shop's answer kept
// it), released or cancelled; until then it is held.
type ProductSummary struct {
	ID       string `json:"id"`
	Admitted int64  `json:"admitted"`
	// Held is admitted and not yet known to be sold, released or cancelled (never below 0: a
	// settlement in the range may be of an admission before it).
	Held      int64            `json:"held"`
	Sold      int64            `json:"sold"`
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
	TurnedAway      TurnedAwaySeries         `json:"turned_away"`
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
	// Scopes are the points of Report.Scopes' owners: by the scope's name, then the owner's id.
	Scopes map[string]map[string]ScopeSeries `json:"scopes,omitempty"`
}

// TurnedAwaySeries is the visitors turned away per point, at sell-out and at close.
type TurnedAwaySeries struct {
	SoldOut []int64 `json:"sold_out"`
	Closed  []int64 `json:"closed"`
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

// ProductSeries is one product's points: Sold is the units the shop's answers kept in each point;
// Refused sums every code, RefusedByCode splits them.
type ProductSeries struct {
	Admitted      []int64            `json:"admitted"`
	Sold          []int64            `json:"sold"`
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
