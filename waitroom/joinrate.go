package waitroom

import "sync"

// joinRateWindow is how far back a queue's join rate looks, in store milliseconds.
const joinRateWindow = 5000

// joinMeter is a queue's recent join rate: positions handed out per second over the last few
// seconds, from the counter every tick reads (every replica's joins, so all replicas see one rate).
// It costs no store call of its own.
type joinMeter struct {
	mu      sync.Mutex
	epoch   string
	samples []joinSample // within joinRateWindow of the newest, oldest first
}

func (m *joinMeter) observe(epoch string, at, counter int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != m.epoch {
		m.epoch, m.samples = epoch, m.samples[:0]
	}
	if n := len(m.samples); n > 0 && at <= m.samples[n-1].at {
		return
	}
	m.samples = append(m.samples, joinSample{at: at, counter: counter})
	drop := 0
	for drop < len(m.samples)-2 && at-m.samples[drop+1].at >= joinRateWindow {
		drop++
	}
	m.samples = append(m.samples[:0], m.samples[drop:]...)
}

// rate is the joins per second between the oldest and newest samples; 0 over less than a second.
func (m *joinMeter) rate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.samples)
	if n < 2 {
		return 0
	}
	first, last := m.samples[0], m.samples[n-1]
	if last.at-first.at < 1000 || last.counter < first.counter {
		return 0
	}
	return float64(last.counter-first.counter) * 1000 / float64(last.at-first.at)
}

// JoinRate is a queue's recent joins per second (0 for a queue this replica does not track).
func (r *Room) JoinRate(queueID string) float64 {
	if q := r.tracked(queueID); q != nil {
		return q.joinRate.rate()
	}
	return 0
}
