package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// checkEach checks every item of a list of the file (queues, products, auctions) with checkItem, under
// the path list[i], and that no two items share an id.
func checkEach[T any](c *check, list string, items []T, id func(T) string, checkItem func(c *check, p string, item T)) {
	seen := map[string]int{}
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", list, i)
		checkItem(c, p, item)
		if j, dup := seen[id(item)]; dup {
			c.add(p+".id", "%q is already the id of %s[%d]", id(item), list, j)
		}
		seen[id(item)] = i
	}
}

// ValidateQueue checks one queue's settings with the rules of the configuration file (for queues
// created through the admin API); problem paths start at the queue's own keys.
func ValidateQueue(q Queue) error {
	return validateOne(func(c *check) { checkQueue(c, "", q) })
}

// validateOne runs the checks of one list item outside a file: paths start at the item's keys.
func validateOne(run func(c *check)) error {
	c := &check{}
	run(c)
	for i := range c.problems {
		c.problems[i].Path = strings.TrimPrefix(c.problems[i].Path, ".")
	}
	if len(c.problems) > 0 {
		return asError(c.problems)
	}
	return nil
}

// MaxPlacesPerIP bounds queues[].places_per_ip: a join from an address at its limit reads the state of
// each of its places (waitroom's assign.lua), so the limit is what one join may cost.
const MaxPlacesPerIP = 1000

func checkQueue(c *check, p string, q Queue) {
	c.id(p+".id", q.ID)
	if len(q.Title) > 200 {
		c.add(p+".title", "must be at most 200 characters")
	}
	c.atLeast(p+".capacity", int64(q.Capacity), 0)
	c.atLeast(p+".release_per_minute", int64(q.ReleasePerMinute), 0)
	c.durationAtLeast(p+".token_ttl", q.TokenTTL, time.Second)
	if q.TokenTTL > MaxTokenTTL {
		c.add(p+".token_ttl", "must be at most %s, not %s", MaxTokenTTL, q.TokenTTL)
	}
	c.durationAtLeast(p+".position_expiry", q.PositionExpiry, 0)
	if q.AbandonAfter != 0 && q.AbandonAfter < MinAbandonAfter {
		c.add(p+".abandon_after", "must be 0 (off) or at least %s, not %s: the waiting page must be able to poll in time", MinAbandonAfter, q.AbandonAfter)
	}
	if q.GoneAfter != 0 && q.GoneAfter < MinAbandonAfter {
		c.add(p+".gone_after", "must be 0 (off) or at least %s, not %s: the waiting page must be able to poll in time", MinAbandonAfter, q.GoneAfter)
	}
	checkDrop(c, p, q)
	c.atLeast(p+".places_per_ip", int64(q.PlacesPerIP), 0)
	if q.PlacesPerIP > MaxPlacesPerIP {
		c.add(p+".places_per_ip", "must be at most %d, not %d (0 is no limit)", MaxPlacesPerIP, q.PlacesPerIP)
	}
	for _, d := range []struct {
		field string
		value time.Duration
	}{{"position_expiry", q.PositionExpiry}, {"abandon_after", q.AbandonAfter}, {"gone_after", q.GoneAfter}, {"token_ttl", q.TokenTTL}, {"prequeue", q.Prequeue}} {
		if d.value%time.Second != 0 {
			c.add(p+"."+d.field, "%s is not a whole number of seconds", d.value)
		}
	}
}

// checkDrop checks the settings of a scheduled drop (docs/operations.md "Running a drop").
func checkDrop(c *check, p string, q Queue) {
	c.oneOf(p+".method", q.Method, Methods...)
	opens, err := ParseQueueTime(q.OpensAt)
	if err != nil {
		c.add(p+".opens_at", "%q is not an RFC 3339 time such as 2026-12-01T18:00:00+01:00", q.OpensAt)
	}
	closes, err2 := ParseQueueTime(q.ClosesAt)
	if err2 != nil {
		c.add(p+".closes_at", "%q is not an RFC 3339 time such as 2026-12-01T20:00:00+01:00", q.ClosesAt)
	}
	c.durationAtLeast(p+".prequeue", q.Prequeue, 0)
	if q.Prequeue > 0 && q.OpensAt == "" {
		c.add(p+".prequeue", "needs opens_at: a pre-queue is the time before the opening")
	}
	if q.Shuffle && (q.OpensAt == "" || q.Prequeue <= 0) {
		c.add(p+".shuffle", "needs opens_at and a prequeue: the lottery draws the order of the pre-queue at the opening")
	}
	if err == nil && err2 == nil && !opens.IsZero() && !closes.IsZero() && !closes.After(opens) {
		c.add(p+".closes_at", "must be after opens_at (%s)", q.OpensAt)
	}
	if len(q.SoldOutWith) > 100 {
		c.add(p+".sold_out_with", "at most 100 products, not %d", len(q.SoldOutWith))
	}
	for i, id := range q.SoldOutWith {
		c.id(fmt.Sprintf("%s.sold_out_with[%d]", p, i), id)
	}
	checkSessions(c, p, q)
}

// checkSessions checks session renewal, invitations and bypass addresses (docs/reference.md
// "Waiting room").
func checkSessions(c *check, p string, q Queue) {
	if q.MaxSession < q.TokenTTL && q.TokenTTL <= MaxTokenTTL {
		c.add(p+".max_session", "must be at least token_ttl (%s), not %s", q.TokenTTL, q.MaxSession)
	}
	if q.MaxSession > MaxSession {
		c.add(p+".max_session", "must be at most %s, not %s", MaxSession, q.MaxSession)
	}
	if q.MaxSession%time.Second != 0 {
		c.add(p+".max_session", "%s is not a whole number of seconds", q.MaxSession)
	}
	if len(q.BypassCIDRs) > 1000 {
		c.add(p+".bypass_cidrs", "at most 1000 entries, not %d", len(q.BypassCIDRs))
	}
	for i, text := range q.BypassCIDRs {
		if _, err := ParseCIDR(text); err != nil {
			c.add(fmt.Sprintf("%s.bypass_cidrs[%d]", p, i), "%v", err)
		}
	}
}

// ValidateProduct checks one product with the rules of the configuration file (for products created
// through the admin API); problem paths start at the product's own keys.
func ValidateProduct(pr Product) error {
	return validateOne(func(c *check) { checkProduct(c, "", pr) })
}

func checkProduct(c *check, p string, pr Product) {
	c.id(p+".id", pr.ID)
	c.atLeast(p+".stock", pr.Stock, 0)
	c.atLeast(p+".per_user_limit", int64(pr.PerUserLimit), 1)
	c.atLeast(p+".price", pr.Price, 0)
	if len(pr.Name) > 200 {
		c.add(p+".name", "must be at most 200 characters")
	}
	if pr.ImageURL != "" && !strings.HasPrefix(pr.ImageURL, "/") {
		c.httpURL(p+".image_url", pr.ImageURL)
	}
}

// ValidateAuction checks one auction with the rules of the configuration file (PUT /api/auctions).
func ValidateAuction(a Auction) error {
	return validateOne(func(c *check) { checkAuction(c, "", a) })
}

func checkAuction(c *check, p string, a Auction) {
	c.id(p+".id", a.ID)
	c.money(p+".starting_price", a.StartingPrice)
	c.money(p+".min_increment", a.MinIncrement)
	if a.EndsAt.IsZero() {
		c.add(p+".ends_at", "required (RFC 3339 time such as 2026-12-01T12:00:00Z)")
	}
	if len(a.Owner) > 256 {
		c.add(p+".owner", "must be at most 256 characters")
	}
}

// checkAuctionsSource checks auctions_source (docs/reference.md "Auctions from the shop"). The timeout
// is bounded because a bid on an unknown auction waits for it; the cache keeps the shop from being
// asked about one auction more than once a second per replica.
func checkAuctionsSource(c *check, s AuctionsSource) {
	if s.URL != "" {
		if strings.Count(s.URL, AuctionsSourceID) != 1 {
			c.add("auctions_source.url", "%q must contain %s once: it is replaced by the auction id", s.URL, AuctionsSourceID)
		}
		c.httpURL("auctions_source.url", strings.ReplaceAll(s.URL, AuctionsSourceID, "id"))
		if u, err := url.Parse(strings.ReplaceAll(s.URL, AuctionsSourceID, "id")); err == nil && (u.User != nil || u.Fragment != "") {
			c.add("auctions_source.url", "must not carry credentials or a fragment")
		}
	}
	c.durationAtLeast("auctions_source.timeout", s.Timeout, time.Millisecond)
	if s.Timeout > 10*time.Second {
		c.add("auctions_source.timeout", "must be at most 10s, not %s: a bid on an unknown auction waits for it", s.Timeout)
	}
	c.durationAtLeast("auctions_source.cache_ttl", s.CacheTTL, time.Second)
	if s.CacheTTL > 24*time.Hour {
		c.add("auctions_source.cache_ttl", "must be at most 24h, not %s", s.CacheTTL)
	}
	c.atLeast("auctions_source.breaker_failures", int64(s.BreakerFailures), 1)
	if s.BreakerFailures > 1000 {
		c.add("auctions_source.breaker_failures", "must be at most 1000, not %d", s.BreakerFailures)
	}
	c.durationAtLeast("auctions_source.breaker_open_for", s.BreakerOpenFor, time.Second)
	if s.BreakerOpenFor > time.Hour {
		c.add("auctions_source.breaker_open_for", "must be at most 1h, not %s: bids on new auctions are refused meanwhile", s.BreakerOpenFor)
	}
}
