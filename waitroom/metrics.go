package waitroom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/vocab"
)

// The queue metrics (docs/reference.md "Metrics in this build"). Gauges are read from the snapshots at
// scrape time, so a deleted queue's series simply stop.
var (
	descWaiting  = prometheus.NewDesc(vocab.Namespace+"_queue_waiting", "Visitors waiting: behind the serving position, or reached without a token yet.", []string{"queue"}, nil)
	descServing  = prometheus.NewDesc(vocab.Namespace+"_queue_serving_position", "The queue's serving position.", []string{"queue"}, nil)
	descAssigned = prometheus.NewDesc(vocab.Namespace+"_queue_assigned_position", "The last position handed out.", []string{"queue"}, nil)
	descActive   = prometheus.NewDesc(vocab.Namespace+"_queue_active_tokens", "Live access tokens (visitors inside).", []string{"queue"}, nil)

	// Beyond the four above: the settings and the measured pace, so dashboards and alerts can put the
	// line next to the room it waits for without asking the admin API.
	descCapacity = prometheus.NewDesc(vocab.Namespace+"_queue_capacity", "The queue's capacity: visitors allowed inside at once.", []string{"queue"}, nil)
	descPaused   = prometheus.NewDesc(vocab.Namespace+"_queue_paused", "1 while the queue is paused (nobody is let in), else 0.", []string{"queue"}, nil)
	descRate     = prometheus.NewDesc(vocab.Namespace+"_queue_serving_rate", "Waiters decided (let in or skipped) per second, measured over the last minute (0 until known).", []string{"queue"}, nil)
	descState    = prometheus.NewDesc(vocab.Namespace+"_queue_state", "1 for the queue's current state (not_open, prequeue, open, paused, sold_out, closed), 0 for the others.", []string{"queue", "state"}, nil)
	descOpensIn  = prometheus.NewDesc(vocab.Namespace+"_queue_opens_in_seconds", "Seconds until a scheduled queue opens (0 once open or unscheduled).", []string{"queue"}, nil)
)

// Collector returns the room's metrics: the queue gauges, edgeq_tokens_issued_total and
// edgeq_rate_limited_total.
func (r *Room) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Room }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWaiting
	ch <- descServing
	ch <- descAssigned
	ch <- descActive
	ch <- descCapacity
	ch <- descPaused
	ch <- descRate
	ch <- descState
	ch <- descOpensIn
	c.r.tokensIssued.Describe(ch)
	c.r.sessionsRenewed.Describe(ch)
	c.r.bypassed.Describe(ch)
	c.r.invites.Describe(ch)
	c.r.rateLimited.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.r.all() {
		s := q.snap.Load()
		if s == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(s.Waiting()), q.id)
		ch <- prometheus.MustNewConstMetric(descServing, prometheus.GaugeValue, float64(s.Serving), q.id)
		ch <- prometheus.MustNewConstMetric(descAssigned, prometheus.GaugeValue, float64(s.Counter), q.id)
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(s.Tokens()), q.id)
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(s.Capacity), q.id)
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, paused, q.id)
		ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, s.ServingRate, q.id)
		current := s.state()
		for _, state := range QueueStates {
			v := 0.0
			if state == current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, q.id, state)
		}
		opensIn := 0.0
		if !s.open() {
			opensIn = float64(secondsUntil(s.storeNow(), s.OpensAt))
		}
		ch <- prometheus.MustNewConstMetric(descOpensIn, prometheus.GaugeValue, opensIn, q.id)
	}
	c.r.tokensIssued.Collect(ch)
	c.r.sessionsRenewed.Collect(ch)
	c.r.bypassed.Collect(ch)
	c.r.invites.Collect(ch)
	c.r.rateLimited.Collect(ch)
}
