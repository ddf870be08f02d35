package admission

import "github.com/prometheus/client_golang/prometheus"

type serviceMetrics struct {
	admissions  *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	deadLetters prometheus.Gauge
	// compensations: releases and withdrawals waiting for the store to answer.
	compensations prometheus.Gauge
	unsettled     prometheus.Gauge
	// The ledger (ledger.go): events written, by result, and the age of the oldest one waiting.
	ledgerWrites *prometheus.CounterVec
	ledgerLag    prometheus.Gauge
	// trimmedUnread: stream entries trimmed past redis.stream_max_entries before every group read them.
	trimmedUnread prometheus.Counter
	// orphans: unsettled admissions of dead replicas, by route and what became of them (orphans.go).
	orphans *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *serviceMetrics {
	m := &serviceMetrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgeq", Name: "admissions_total",
			Help: "Admission decisions by type (stock, bid) and result (admitted, released, and each refusal).",
		}, []string{"type", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "edgeq", Name: "admission_duration_seconds",
			Help:    "Time to decide an admission (field extraction and the Lua call), by type.",
			Buckets: []float64{.0002, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"type"}),
		deadLetters: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "edgeq", Name: "dead_letters",
			Help: "Admission events that failed every retry and wait in the dead-letter set.",
		}),
		unsettled: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "edgeq", Name: "admissions_unsettled",
			Help: "Stock admissions neither committed nor given back for more than 5 minutes (their replica died before settling them), every product together.",
		}),
		compensations: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "edgeq", Name: "pending_compensations",
			Help: "Releases and bid withdrawals this replica retries until the store answers.",
		}),
		ledgerWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgeq", Name: "ledger_writes_total",
			Help: "Events the ledger worker handled, by result: written (to PostgreSQL), retried (a failed write, retried), dead_lettered (refused by PostgreSQL), malformed (skipped).",
		}, []string{"result"}),
		ledgerLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "edgeq", Name: "ledger_lag_seconds",
			Help: "Age of the oldest event this replica read and has not yet written to the ledger (0 when it is caught up).",
		}),
	}
	m.trimmedUnread = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "edgeq", Name: "stream_trimmed_unread_total",
		Help: "Event stream entries trimmed past redis.stream_max_entries before every consumer group (the admin indexes, the ledger) had read them.",
	})
	m.orphans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "edgeq", Name: "orphaned_admissions_total",
		Help: "Unsettled stock admissions of replicas that died (their liveness lease ran out), by route and result: held (for an operator) or released (units back), per routes[].admission.orphans.",
	}, []string{"route", "result"})
	for _, r := range []string{"written", "retried", "dead_lettered", "malformed"} {
		m.ledgerWrites.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.admissions, m.duration, m.deadLetters, m.compensations, m.unsettled, m.ledgerWrites, m.ledgerLag,
			m.trimmedUnread, m.orphans)
	}
	return m
}
