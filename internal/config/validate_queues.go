package config

import (
	"fmt"
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
