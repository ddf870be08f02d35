package waitroom

import "github.com/prometheus/client_golang/prometheus"

// The queue metrics of CONTRACT section 9. Gauges are read from the snapshots at scrape time, so a
// deleted queue's series simply stop.
var (
	descWaiting  = prometheus.NewDesc("edgeq_queue_waiting", "Visitors waiting: behind the serving position, or reached without a token yet.", []string{"queue"}, nil)
	descServing  = prometheus.NewDesc("edgeq_queue_serving_position", "The queue's serving position.", []string{"queue"}, nil)
	descAssigned = prometheus.NewDesc("edgeq_queue_assigned_position", "The last position handed out.", []string{"queue"}, nil)
	descActive   = prometheus.NewDesc("edgeq_queue_active_tokens", "Live access tokens (visitors inside).", []string{"queue"}, nil)
)

// Collector returns the room's metrics: the queue gauges and edgeq_tokens_issued_total.
func (r *Room) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Room }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWaiting
	ch <- descServing
	ch <- descAssigned
	ch <- descActive
	c.r.tokensIssued.Describe(ch)
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
	}
	c.r.tokensIssued.Collect(ch)
}
