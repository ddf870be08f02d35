package certfiles

import (
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/vocab"
)

// expiryDesc is made with prometheus.NewDesc itself (as every desc is): promlinter follows a
// constant metric's desc to the call that made it and reads that call as prometheus.NewDesc's four
// arguments.
var expiryDesc = prometheus.NewDesc(vocab.Namespace+"_tls_certificate_expiry_seconds",
	"Seconds until the leaf of a TLS certificate in service expires (NotAfter), by the leaf's first name; "+
		"of several certificates with one first name, the soonest. Negative once expired.", []string{"name"}, nil)

// Collector reports edgeq_tls_certificate_expiry_seconds for the certificates in service at scrape
// time, so a reloaded certificate replaces the old one's series and the clock never needs a ticker.
// Labels are bounded by the configuration: one per configured certificate at most.
func (s *Store) Collector() prometheus.Collector { return ExpiryCollector(s.opts.Now, s.Leaves) }

// ExpiryCollector reports edgeq_tls_certificate_expiry_seconds for the leaves every source has in
// service at scrape time (certificate files, automatic certificates): one collector, as the metric
// can be registered once.
func ExpiryCollector(now func() time.Time, sources ...func() []*x509.Certificate) prometheus.Collector {
	return collector{now: now, sources: sources}
}

type collector struct {
	now     func() time.Time
	sources []func() []*x509.Certificate
}

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	soonest := map[string]time.Time{}
	var order []string
	for _, source := range c.sources {
		for _, leaf := range source() {
			name := "" // a leaf with neither DNS names nor a common name
			if n := names(leaf); len(n) > 0 {
				name = n[0]
			}
			at, seen := soonest[name]
			if !seen {
				order = append(order, name)
			}
			if !seen || leaf.NotAfter.Before(at) {
				soonest[name] = leaf.NotAfter
			}
		}
	}
	for _, name := range order {
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, soonest[name].Sub(now).Seconds(), name)
	}
}
