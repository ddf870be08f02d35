package stock

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/metrics"
)

// stockMetrics are the stock kind's own metrics.
type stockMetrics struct {
	unsettled prometheus.Gauge
	// orphans: unsettled admissions of dead replicas, by route and what became of them
	// (orphans.go).
	orphans *prometheus.CounterVec
}

func newStockMetrics(reg prometheus.Registerer) stockMetrics {
	m := stockMetrics{
		unsettled: metrics.NewGauge("admissions_unsettled",
			"Stock admissions neither committed nor given back for more than 5 minutes (their replica died before settling them), every product together."),
		orphans: metrics.NewCounterVec("orphaned_admissions_total",
			"Unsettled stock admissions of replicas that died (their liveness lease ran out), by route and result: held (for an operator) or released (units back), per routes[].admission.orphans.", "route", "result"),
	}
	if reg != nil {
		reg.MustRegister(m.unsettled, m.orphans)
	}
	return m
}
