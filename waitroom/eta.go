package waitroom

import (
	"time"

	"github.com/edgeq/edgeq/internal/config"
)

// rateMeter measures how fast waiters are decided (served or skipped), over the last minute.
type rateMeter struct {
	samples []rateSample
}

type rateSample struct {
	at    time.Time
	moved int64
}

const rateWindow = time.Minute

// observe records a sample and returns waiters decided per second over the window (0 when unknown).
func (m *rateMeter) observe(at time.Time, moved int64) float64 {
	m.samples = append(m.samples, rateSample{at, moved})
	cut := 0
	for cut < len(m.samples)-1 && at.Sub(m.samples[cut].at) > rateWindow {
		cut++
	}
	m.samples = m.samples[cut:]
	first := m.samples[0]
	elapsed := at.Sub(first.at).Seconds()
	if elapsed < 2 || moved < first.moved {
		return 0
	}
	return float64(moved-first.moved) / elapsed
}

// eta estimates the seconds until a visitor is served who is togo places from being reached (its rank
// minus the serving rank, less those served out of turn in between; for the random method, the draws
// expected before its own), as docs/reference.md "Waiting room" (ETA) has it:
// -1 (not known yet) until a serving rate has been measured, and never shorter than full sessions
// allow while nobody has left before their token expired (fullSessions).
func (s *snapshot) eta(togo int64) int64 {
	if togo <= 0 {
		return 0
	}
	if s.ServingRate <= 0 {
		return -1
	}
	return max(int64(float64(togo)/s.ServingRate+0.999), s.fullSessions(togo))
}

// fullSessions is the wait for the togo-th free place when the queue is full and every visitor inside
// stays until their deadline: the place frees at the ((togo-1) mod capacity)-th oldest deadline, plus
// one token lifetime for each full round of capacity before it. The active set's deadlines are known
// from a sample (advance.lua), so the sampled deadline at or before that index is used: a little
// early, never late. 0 when it does not apply (someone has left early lately, or there is room).
func (s *snapshot) fullSessions(togo int64) int64 {
	if !s.FullSessions || s.Capacity <= 0 || s.Active < s.Capacity || len(s.Deadlines) == 0 {
		return 0
	}
	k, rounds := (togo-1)%s.Capacity, (togo-1)/s.Capacity
	at := s.Deadlines[0].at
	for _, d := range s.Deadlines {
		if d.index <= k {
			at = d.at
		}
	}
	return secondsUntil(s.storeNow(), at) + rounds*int64(s.TokenTTL/time.Second)
}

// togo is how many places a waiting visitor at pos still is from being reached.
func (s *snapshot) togo(pos int64) int64 {
	if s.Method == config.MethodRandom {
		// Each draw picks one of those waiting: on average half of them go first.
		return (s.Pool + 2) / 2
	}
	if s.Lottery.rank(pos) <= s.Serving {
		return 0 // reached
	}
	return s.ahead(pos) + 1 // those served out of turn are not in its way
}
