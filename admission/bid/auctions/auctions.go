// Package auctions is the bid kind's part of the configuration file: the auctions: list and the
// auctions_source: settings, their defaults and their checks. It is a package of its own, importing
// no part of admission, so that the admission pipeline's own tests can build auctions without
// linking the kind.
package auctions

import (
	"net/url"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/config"
)

// Kind is the bid kind's admission.type in a route.
const Kind = "bid"

// The sections' names, their keys in the file.
const (
	Section       = "auctions"
	SourceSection = "auctions_source"
)

func init() {
	config.RegisterSection(config.SectionSpec{Name: Section, Order: 20, Hot: true, New: func() config.Section { return &List{} }})
	config.RegisterSection(config.SectionSpec{Name: SourceSection, Order: 21, Hot: true, New: func() config.Section {
		s := defaultSource()
		return &s
	}})
}

// Auction is a bid-admitted item. Money values are decimal strings with at most two places.
type Auction struct {
	ID            string    `yaml:"id"`
	StartingPrice string    `yaml:"starting_price"`
	MinIncrement  string    `yaml:"min_increment"`
	EndsAt        time.Time `yaml:"ends_at"`
	Owner         string    `yaml:"owner"`
}

// Defaults sets the fields an auction of the file may leave out.
func (a *Auction) Defaults() { a.MinIncrement = "1.00" }

// List is the auctions: section.
type List []Auction

// Check checks every auction (config.Owners).
func (l *List) Check(c config.Checker, cfg *config.Config) {
	config.Owners(c, cfg, Section, Kind, *l, func(a Auction) string { return a.ID }, check)
}

// Validate checks one auction with the rules of the file (PUT /api/auctions, the shop's answers).
func Validate(a Auction) error {
	return config.ValidateOne(func(c config.Checker) { check(c, "", a) })
}

func check(c config.Checker, p string, a Auction) {
	c.ID(p+".id", a.ID)
	c.Money(p+".starting_price", a.StartingPrice)
	c.Money(p+".min_increment", a.MinIncrement)
	if a.EndsAt.IsZero() {
		c.Add(p+".ends_at", "required (RFC 3339 time such as 2026-12-01T12:00:00Z)")
	}
	if len(a.Owner) > 256 {
		c.Add(p+".owner", "must be at most 256 characters")
	}
}

// Of is cfg's auctions: (none when cfg is nil or has no such section, as a Config built by hand).
func Of(cfg *config.Config) []Auction {
	l, _ := config.SectionOf[*List](cfg, Section)
	if l == nil {
		return nil
	}
	return *l
}

// With sets cfg's auctions: and returns cfg.
func With(cfg *config.Config, list ...Auction) *config.Config {
	l := List(list)
	return cfg.WithSection(Section, &l)
}

// Source is where edgeq asks the shop about an auction a bid names but the store does not know
// (docs/reference.md "Auctions from the shop"): URL with "{id}" in it ("" = off), answered with a
// JSON object with the fields of an auctions[] entry. Timeout bounds one request; CacheTTL is how long
// an answer (found or not found) is remembered per auction on a replica. The circuit breaker opens
// after BreakerFailures failures in a row (answers that say the shop is unwell, never one about the id
// asked for) and stays open for BreakerOpenFor.
type Source struct {
	URL             string        `yaml:"url"`
	Timeout         time.Duration `yaml:"timeout"`
	CacheTTL        time.Duration `yaml:"cache_ttl"`
	BreakerFailures int           `yaml:"breaker_failures"`
	BreakerOpenFor  time.Duration `yaml:"breaker_open_for"`
}

// On reports whether auctions are fetched from the shop.
func (s Source) On() bool { return s.URL != "" }

// SourceID is the placeholder of the auction id in auctions_source.url.
const SourceID = "{id}"

// defaultSource is auctions_source: at its defaults: off, and a short timeout, so that a bid on an
// unknown auction waits little for a slow shop once it is on.
func defaultSource() Source {
	return Source{Timeout: 100 * time.Millisecond, CacheTTL: 60 * time.Second, BreakerFailures: 5, BreakerOpenFor: 10 * time.Second}
}

// SourceOf is cfg's auctions_source: (its defaults when the section is not there, as in a Config
// built by hand).
func SourceOf(cfg *config.Config) Source {
	if s, ok := config.SectionOf[*Source](cfg, SourceSection); ok {
		return *s
	}
	return defaultSource()
}

// Check checks auctions_source. The timeout is bounded because a bid on an unknown auction waits for
// it; the cache keeps the shop from being asked about one auction more than once a second per
// replica.
func (s *Source) Check(c config.Checker, _ *config.Config) {
	const p = SourceSection
	if s.URL != "" {
		if strings.Count(s.URL, SourceID) != 1 {
			c.Add(p+".url", "%q must contain %s once: it is replaced by the auction id", s.URL, SourceID)
		}
		c.HTTPURL(p+".url", strings.ReplaceAll(s.URL, SourceID, "id"))
		if u, err := url.Parse(strings.ReplaceAll(s.URL, SourceID, "id")); err == nil && (u.User != nil || u.Fragment != "") {
			c.Add(p+".url", "must not carry credentials or a fragment")
		}
	}
	c.DurationAtLeast(p+".timeout", s.Timeout, time.Millisecond)
	if s.Timeout > 10*time.Second {
		c.Add(p+".timeout", "must be at most 10s, not %s: a bid on an unknown auction waits for it", s.Timeout)
	}
	c.DurationAtLeast(p+".cache_ttl", s.CacheTTL, time.Second)
	if s.CacheTTL > 24*time.Hour {
		c.Add(p+".cache_ttl", "must be at most 24h, not %s", s.CacheTTL)
	}
	c.AtLeast(p+".breaker_failures", int64(s.BreakerFailures), 1)
	if s.BreakerFailures > 1000 {
		c.Add(p+".breaker_failures", "must be at most 1000, not %d", s.BreakerFailures)
	}
	c.DurationAtLeast(p+".breaker_open_for", s.BreakerOpenFor, time.Second)
	if s.BreakerOpenFor > time.Hour {
		c.Add(p+".breaker_open_for", "must be at most 1h, not %s: bids on new auctions are refused meanwhile", s.BreakerOpenFor)
	}
}
