package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/vocab"
)

// The collectors every package of edgeq makes, named edgeq_<name> (vocab.Namespace) with their help
// text and, for a vector, their label names: one way to write a metric's options.

// NewCounter is the counter edgeq_<name>.
func NewCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: vocab.Namespace, Name: name, Help: help})
}

// NewCounterVec is the counter edgeq_<name> by labels.
func NewCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: vocab.Namespace, Name: name, Help: help}, labels)
}

// NewGauge is the gauge edgeq_<name>.
func NewGauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: vocab.Namespace, Name: name, Help: help})
}

// NewGaugeVec is the gauge edgeq_<name> by labels.
func NewGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: vocab.Namespace, Name: name, Help: help}, labels)
}

// NewHistogram is the histogram edgeq_<name> with these buckets.
func NewHistogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: vocab.Namespace, Name: name, Help: help, Buckets: buckets})
}

// NewHistogramVec is the histogram edgeq_<name> with these buckets, by labels.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: vocab.Namespace, Name: name, Help: help, Buckets: buckets}, labels)
}
