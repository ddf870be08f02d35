package store

import "time"

// SetClock replaces the clock of a Health for tests of the cooldown.
func SetClock(h *Health, now func() time.Time) { h.now = now }
