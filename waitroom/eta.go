package waitroom

import "time"

// rateMeter measures how fast the serving position moves, over the last minute.
type rateMeter struct {
	samples []rateSample
}

type rateSample struct {
	at      time.Time
	serving int64
}

const rateWindow = time.Minute

// observe records a sample and returns positions per second over the window (0 when unknown).
func (m *rateMeter) observe(at time.Time, serving int64) float64 {
	m.samples = append(m.samples, rateSample{at, serving})
	cut := 0
	for cut < len(m.samples)-1 && at.Sub(m.samples[cut].at) > rateWindow {
		cut++
	}
	m.samples = m.samples[cut:]
	first := m.samples[0]
	elapsed := at.Sub(first.at).Seconds()
	if elapsed < 2 || serving < first.serving {
		return 0
	}
	return float64(serving-first.serving) / elapsed
}

// eta estimates the seconds until a visitor with ahead visitors in front is served; -1 when unknown.
func (s *snapshot) eta(ahead int64) int64 {
	if ahead <= 0 {
		return 0
	}
	if s.ServingRate <= 0 {
		return -1
	}
	return int64(float64(ahead)/s.ServingRate + 0.999)
}
