package bid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
)

// auctionSource asks the shop about an auction a bid names but the store does not know
// (auctions_source; docs/reference.md "Auctions from the shop"): a short timeout, answers cached per
// auction, one request at a time per auction however many bids wait for it, and a circuit breaker so
// that a shop in trouble is not asked again and again. A found auction is created in the store only if
// it is still absent: auctions configured or pushed (PUT /api/auctions/{id}) always win. Known auctions
// never come here (bid.lua answers before), so a failing shop costs them nothing.
type auctionSource struct {
	settings auctions.Source
	client   *http.Client
	metrics  *sourceMetrics
	logger   *slog.Logger
	// create writes a found auction to the store, create-only.
	create  func(ctx context.Context, a auctions.Auction) error
	breaker *breaker

	mu      sync.Mutex
	cache   *lru.Cache[string, sourced]
	flights map[string]*sourceFlight
}

// sourceCacheSize bounds the answers a replica remembers: made-up ids must not grow memory.
const sourceCacheSize = 10_000

// maxSourceBody bounds the shop's answer: an auction is a few hundred bytes.
const maxSourceBody = 64 << 10

// sourced is a cached answer of the shop.
type sourced struct {
	auction auctions.Auction
	found   bool
	at      time.Time
}

// sourceFlight is a request to the shop in flight: every bid on the same auction waits for it.
type sourceFlight struct {
	done   chan struct{}
	result sourceResult
}

// sourceResult is what a bid learns: the auction is in the store now (found), or the shop does not
// know it (neither found nor e), or the shop could not be asked (e: 503 AUCTIONS_SOURCE_UNAVAILABLE);
// err is a store error while the auction was written.
type sourceResult struct {
	found bool
	e     *web.Error
	err   error
}

// Results of edgeq_auctions_source_requests_total.
const (
	sourceFound       = "found"
	sourceNotFound    = "not_found"
	sourceError       = "error"
	sourceTimeout     = "timeout"
	sourceBreakerOpen = "breaker_open"
)

var sourceResults = []string{sourceFound, sourceNotFound, sourceError, sourceTimeout, sourceBreakerOpen}

type sourceMetrics struct {
	requests    *prometheus.CounterVec
	breakerOpen prometheus.Gauge
}

func newSourceMetrics() *sourceMetrics {
	m := &sourceMetrics{
		requests: metrics.NewCounterVec("auctions_source_requests_total",
			"Questions to auctions_source about auctions the store does not know, by result (found, not_found, error, timeout, and breaker_open: not asked because the circuit breaker is open).", "result"),
		breakerOpen: metrics.NewGauge("auctions_source_breaker_open",
			"1 while the circuit breaker of auctions_source is open (or letting one probe through), 0 when closed."),
	}
	for _, r := range sourceResults {
		m.requests.WithLabelValues(r)
	}
	return m
}

func newAuctionSource(settings auctions.Source, failures int, cooldown time.Duration, m *sourceMetrics,
	logger *slog.Logger, create func(context.Context, auctions.Auction) error) *auctionSource {
	cache, _ := lru.New[string, sourced](sourceCacheSize) // only a size <= 0 fails
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 16 // bids on many new auctions at once: keep connections to the shop
	m.breakerOpen.Set(0)
	return &auctionSource{
		settings: settings, client: &http.Client{Transport: transport}, metrics: m, logger: logger,
		create: create, breaker: &breaker{threshold: failures, cooldown: cooldown, gauge: m.breakerOpen},
		cache: cache, flights: map[string]*sourceFlight{},
	}
}

// ensure makes sure the store has auction id if the shop knows it: from the cache, or by asking the
// shop (one request for every bid that waits on the same id).
func (s *auctionSource) ensure(ctx context.Context, id string) sourceResult {
	s.mu.Lock()
	if c, ok := s.cache.Get(id); ok && time.Since(c.at) < s.settings.CacheTTL {
		s.mu.Unlock()
		if !c.found {
			return sourceResult{}
		}
		// The shop answered a moment ago, yet bid.lua did not find it: its write failed, or raced a
		// deletion. Writing it again (create-only) costs the shop nothing.
		return sourceResult{found: true, err: s.create(ctx, c.auction)}
	}
	if f := s.flights[id]; f != nil {
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.result
		case <-ctx.Done():
			return sourceResult{err: ctx.Err()}
		}
	}
	f := &sourceFlight{done: make(chan struct{})}
	s.flights[id] = f
	s.mu.Unlock()

	f.result = s.ask(ctx, id)

	s.mu.Lock()
	delete(s.flights, id)
	s.mu.Unlock()
	close(f.done)
	return f.result
}

// ask asks the shop about id, unless the breaker is open, and writes a found auction to the store.
func (s *auctionSource) ask(ctx context.Context, id string) sourceResult {
	retry, ok := s.breaker.allow(time.Now())
	if !ok {
		s.metrics.requests.WithLabelValues(sourceBreakerOpen).Inc()
		return sourceResult{e: errAuctionsSourceUnavailable.WithRetryAfter(retry).Because(errors.New("auctions_source: circuit breaker open"))}
	}
	a, found, status, result, err := s.fetch(ctx, id)
	s.metrics.requests.WithLabelValues(result).Inc()
	if err != nil {
		opened := s.breaker.failure(time.Now())
		// The shop's answer is not logged: it may be large, or not meant for logs; the reason is.
		web.RequestFrom(ctx).Logger().Warn("auctions_source failed", "auction", id, "result", result,
			"status", status, "error", web.ClipErr(err), "breaker_open", opened)
		return sourceResult{e: errAuctionsSourceUnavailable.WithRetryAfter(time.Second).Because(err)}
	}
	s.breaker.success()
	s.cache.Add(id, sourced{auction: a, found: found, at: time.Now()})
	if !found {
		return sourceResult{}
	}
	return sourceResult{found: true, err: s.create(ctx, a)}
}

// fetch asks the shop: 200 with the auction; a 4xx about the id asked for (404, 410, 400, ...) when
// it has none; an answer that says the shop is unwell (unwell) is a failure, as is a 200 that is not
// an auction. result is the metrics label; status is the shop's (0 when it did not answer).
func (s *auctionSource) fetch(ctx context.Context, id string) (a auctions.Auction, found bool, status int, result string, err error) {
	// The request serves every bid waiting on this auction: it does not end with the bidder who
	// started it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.settings.Timeout)
	defer cancel()
	target := strings.Replace(s.settings.URL, auctions.SourceID, url.PathEscape(id), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return a, false, 0, sourceError, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "edgeq")
	req.Header.Set(web.CorrelationHeader, web.RequestFrom(ctx).CorrelationID)
	resp, err := s.client.Do(req)
	if err != nil {
		return a, false, 0, failure(ctx), err
	}
	defer func() { _ = resp.Body.Close() }() // a read-only body: nothing to lose on close
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
	case unwell(code):
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxSourceBody)) // keep the connection; a failed read only loses it
		return a, false, code, failure(ctx), fmt.Errorf("the shop answered %d", code)
	default:
		// The shop's word on the id a bidder chose (400 for an id its validation refuses): an unknown
		// auction, however many bidders make up such ids, never a reason to stop asking about others.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxSourceBody))
		return a, false, code, sourceNotFound, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSourceBody+1))
	if err != nil {
		return a, false, resp.StatusCode, failure(ctx), fmt.Errorf("reading the answer: %w", err)
	}
	if len(body) > maxSourceBody {
		return a, false, resp.StatusCode, sourceError, fmt.Errorf("the answer is over %d bytes", maxSourceBody)
	}
	if a, err = parseSourcedAuction(id, body); err != nil {
		return a, false, resp.StatusCode, sourceError, err
	}
	return a, true, resp.StatusCode, sourceFound, nil
}

// unwell reports whether an answer other than 200 says the shop cannot answer about any auction now,
// whatever the id: a 5xx; 401, 403 or 407 (edgeq is not let in: a key or proxy
// problem); 408 and 429 (the shop is overloaded or limits edgeq); and anything outside 4xx (another
// 2xx such as 204, a redirect the client did not follow): not the documented answer. Every other 4xx
// (400, 404, 410, 414, 422, ...) is about the id asked for, and a bidder picks the id: counting those
// would let anyone open the breaker.
func unwell(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired, http.StatusRequestTimeout,
		http.StatusTooManyRequests:
		return true
	}
	return status < 400 || status >= 500
}

// failure is the label of a request that failed: timeout when its deadline passed.
func failure(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return sourceTimeout
	}
	return sourceError
}

// parseSourcedAuction reads the shop's answer: a JSON object with the fields of an auctions[] entry
// (starting_price, min_increment, ends_at, owner), checked with the rules of the configuration file.
// Money may be a string ("12.50") or a JSON number (12.5), as YAML allows both; min_increment
// defaults to 1.00 as in the file. An "id" field, when there, must be the id asked for (a URL
// template that points at the wrong resource shows up here). Other fields (a title, images) are
// the shop's and are ignored.
func parseSourcedAuction(id string, body []byte) (auctions.Auction, error) {
	var doc struct {
		ID            json.RawMessage `json:"id"`
		StartingPrice json.RawMessage `json:"starting_price"`
		MinIncrement  json.RawMessage `json:"min_increment"`
		EndsAt        *string         `json:"ends_at"`
		Owner         *string         `json:"owner"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return auctions.Auction{}, fmt.Errorf("the answer is not an auction object: %w", err)
	}
	a := auctions.Auction{ID: id}
	a.Defaults() // the file's defaults for what the answer leaves out
	var err error
	var problems []error
	if doc.ID != nil {
		if got, _, err := scalarText(doc.ID); err != nil || got != id {
			problems = append(problems, fmt.Errorf("id: the answer is about another auction"))
		}
	}
	if a.StartingPrice, _, err = scalarText(doc.StartingPrice); err != nil {
		problems = append(problems, fmt.Errorf("starting_price: %w", err))
	}
	if text, set, err := scalarText(doc.MinIncrement); err != nil {
		problems = append(problems, fmt.Errorf("min_increment: %w", err))
	} else if set {
		a.MinIncrement = text
	}
	if doc.EndsAt != nil {
		if a.EndsAt, err = time.Parse(time.RFC3339, *doc.EndsAt); err != nil {
			problems = append(problems, fmt.Errorf("ends_at: not an RFC 3339 time"))
		}
	}
	if doc.Owner != nil {
		a.Owner = *doc.Owner
	}
	if len(problems) == 0 {
		if err := auctions.Validate(a); err != nil {
			problems = append(problems, errors.New(config.OneLine(err)))
		}
	}
	return a, errors.Join(problems...)
}

// scalarText is the text of a JSON string or number; set is false for a missing or null value.
func scalarText(raw json.RawMessage) (text string, set bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true, nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), true, nil
	}
	return "", false, errors.New("must be a string or a number")
}

// breaker is the circuit breaker of auctions_source: closed, it lets every request through; after
// threshold failures in a row (auctions_source.breaker_failures) it opens for cooldown
// (breaker_open_for), refusing at once; then it lets one request through (half-open): its success
// closes it, its failure opens it again for another cooldown. A "not found" (any answer about the id:
// fetch) is a success: the shop answered.
type breaker struct {
	threshold int
	cooldown  time.Duration
	gauge     prometheus.Gauge

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	probing   bool
}

// allow reports whether a request may go to the shop now; when not, retry is how long until it may.
func (b *breaker) allow(now time.Time) (retry time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.failures < b.threshold:
		return 0, true
	case now.Before(b.openUntil):
		return b.openUntil.Sub(now), false
	case b.probing:
		return time.Second, false // the probe's answer comes within the timeout
	}
	b.probing = true
	return 0, true
}

func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.probing, b.openUntil = 0, false, time.Time{}
	b.gauge.Set(0)
}

// failure counts a failure and reports whether the breaker is open now.
func (b *breaker) failure(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.probing = false
	if b.failures >= b.threshold {
		b.openUntil = now.Add(b.cooldown)
		b.gauge.Set(1)
		return true
	}
	return false
}

// useSource puts auctions_source in force, at start and on every reload; "" turns it off.
// New settings start afresh: an empty cache and a closed breaker.
func (k *kind) useSource(settings auctions.Source) {
	old := k.source.Load()
	if old != nil && old.settings == settings {
		return
	}
	var next *auctionSource
	if settings.On() {
		failures, cooldown := settings.BreakerFailures, settings.BreakerOpenFor
		defaultFailures, defaultCooldown := k.s.SourceBreaker()
		if failures <= 0 {
			failures = defaultFailures
		}
		if cooldown <= 0 {
			cooldown = defaultCooldown
		}
		next = newAuctionSource(settings, failures, cooldown, k.sourceMetrics, k.s.Logger(),
			func(ctx context.Context, a auctions.Auction) error { return k.writeAuction(ctx, a, true) })
	} else {
		k.sourceMetrics.breakerOpen.Set(0)
	}
	k.source.Store(next)
	if old != nil {
		old.client.CloseIdleConnections()
	}
}
