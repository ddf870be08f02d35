package admission

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/metrics"
)

type serviceMetrics struct {
	admissions  *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	deadLetters prometheus.Gauge
	// compensations: releases and withdrawals waiting for the store to answer.
	compensations prometheus.Gauge
	// The ledger (ledger.go): events written, by result, and the age of the oldest one waiting.
	ledgerWrites *prometheus.CounterVec
	ledgerLag    prometheus.Gauge
	// trimmedUnread: stream entries trimmed past redis.stream_max_entries before every group read them.
	trimmedUnread prometheus.Counter
}

// newMetrics makes the metrics every kind shares; kinds names the kinds for their help.
func newMetrics(reg prometheus.Registerer, kinds []Kind) *serviceMetrics {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name()
	}
	m := &serviceMetrics{
		admissions: metrics.NewCounterVec("admissions_total",
			"Admission decisions by type ("+strings.Join(names, ", ")+") and result (admitted, released, and each refusal).", "type", "result"),
		duration: metrics.NewHistogramVec("admission_duration_seconds",
			"Time to decide an admission (field extraction and the Lua call), by type.",
			[]float64{.0002, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}, "type"),
		deadLetters: metrics.NewGauge("dead_letters",
			"Admission events that failed every retry and wait in the dead-letter set."),
		compensations: metrics.NewGauge("pending_compensations",
			"Releases and withdrawals this replica retries until the store answers."),
		ledgerWrites: metrics.NewCounterVec("ledger_writes_total",
			"Events the ledger worker handled, by result: written (to PostgreSQL), retried (a failed write, retried), dead_lettered (refused by PostgreSQL), malformed (skipped).", "result"),
		ledgerLag: metrics.NewGauge("ledger_lag_seconds",
			"Age of the oldest event this replica read and has not yet written to the ledger (0 when it is caught up)."),
	}
	m.trimmedUnread = metrics.NewCounter("stream_trimmed_unread_total",
		"Event stream entries trimmed past redis.stream_max_entries before every consumer group (the admin indexes, the ledger) had read them.")
	for _, r := range []string{"written", "retried", "dead_lettered", "malformed"} {
		m.ledgerWrites.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.admissions, m.duration, m.deadLetters, m.compensations, m.ledgerWrites, m.ledgerLag,
			m.trimmedUnread)
	}
	return m
}
