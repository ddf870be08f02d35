package admission

import "github.com/prometheus/client_golang/prometheus"

// stockMetrics are the stock kind's own metrics.
type stockMetrics struct {
	unsettled prometheus.Gauge
	// orphans: unsettled admissions of dead replicas, by route and what became of them
	// (stock_orphans.go).
	orphans *prometheus.CounterVec
}

func newStockMetrics(reg prometheus.Registerer) stockMetrics {
	m := stockMetrics{
		unsettled: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "edgeq", Name: "admissions_unsettled",
			Help: "Stock admissions neither committed nor given back for more than 5 minutes (their replica died before settling them), every product together.",
		}),
		orphans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgeq", Name: "orphaned_admissions_total",
			Help: "Unsettled stock admissions of replicas that died (their liveness lease ran out), by route and result: held (for an operator) or released (units back), per routes[].admission.orphans.",
		}, []string{"route", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.unsettled, m.orphans)
	}
	return m
}
