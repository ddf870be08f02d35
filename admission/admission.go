// Package admission admits requests of protected routes with one atomic Lua call on Redis before the
// origin sees them (docs/reference.md, the admission kinds). Each admission kind is its own files,
// named after it, and scripts, and registers itself (kind.go says what a kind must do and what it
// may do). The kinds share one pipeline (step.go: read, reserve, origin, commit or release), one
// retry loop for what the store could not confirm (compensate.go) and one worker that turns every
// kind's event stream into its admin records (worker.go).
package admission

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// Options configures the admission service.
// DefaultRecordsRetention is how long the admin records stay in the store by default
// (admission.records_retention).
const DefaultRecordsRetention = 7 * 24 * time.Hour

type Options struct {
	Store        *store.Store
	IDs          *ids.Generator
	IdentityKey  []byte // HMAC key of user pseudonyms (identity.secret, or derived from the signing key)
	MaxBodyBytes int64
	// ClaimTTL bounds a user's in-flight claim if edgeq dies before the origin answers; it should exceed
	// origin.timeout.
	ClaimTTL  time.Duration
	Prefix    string
	Responder *web.Responder
	Logger    *slog.Logger
	Registry  prometheus.Registerer
	// Worker tuning; zero values take the defaults.
	Backoff   []time.Duration // retries of a failing event: 1 s, 2 s, 4 s
	ClaimIdle time.Duration   // pending events of a silent consumer are taken over after this: 30 s
	// StreamMaxEntries bounds each event stream (redis.stream_max_entries, 1,000,000): trim.go.
	StreamMaxEntries int64
	TrimEvery        time.Duration // how often the worker trims the streams: 5 s
	// OrphanAfter is how old an unsettled admission of a dead replica must be before its route's
	// orphans setting applies: origin.timeout (30 s), after which no shop answer can come.
	OrphanAfter time.Duration
	// Ledger, when set, receives every event (ledger.go) and serves the admin history lists.
	Ledger *ledger.Ledger
	// RecordsRetention is how long the admin records stay in the store, ledger or not (records.go);
	// default DefaultRecordsRetention.
	RecordsRetention time.Duration
	// Visitor returns the queue request id of a request's valid access token for a queue: how a
	// kind's "mine" listing identifies its user when the kind's route's user is "token" (mine.go).
	// Nil: such users cannot be identified there (400).
	Visitor func(r *http.Request, queue string) (requestID string, ok bool)
	// The circuit breaker of a kind's source of unknown owners (Discoverer) when its settings leave
	// it unset (0): open after SourceFailures failures in a row (5), for SourceCooldown (10 s). The
	// configuration file always sets it.
	SourceFailures int
	SourceCooldown time.Duration
	// ReportRetention is report.retention: how long the report's series are kept (report.go).
	ReportRetention time.Duration
	// Tracer makes the spans of admissions and of the event worker's passes (tracing.go); nil:
	// tracing is off.
	Tracer trace.Tracer
}

// Service is admission: its kinds, their event worker and their admin views.
type Service struct {
	o          Options
	client     redis.UniversalClient
	keys       store.Keys
	pseudonyms pseudonyms
	logger     *slog.Logger
	responder  *web.Responder
	metrics    *serviceMetrics
	comp       compensations
	commits    committer
	replay     settlementLog // recent settlements, sent again after a master change (replay.go)
	// tally counts what the report keeps; report writes it each tick (report.go).
	tally  *report.Tally
	report report.Writer

	// lease: this replica's view of its liveness lease, which fences what it admitted (lease.go).
	lease lease
	// traces are the recorded spans of admissions not yet applied by the event worker (tracing.go).
	traces tracedAdmissions

	kinds []Kind // every kind registered (kind.go): routes name one by admission.type; the worker reads each one's streams
}

// New builds the service; Run runs its event worker.
func New(o Options) *Service {
	if len(o.Backoff) == 0 {
		o.Backoff = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	}
	if o.ClaimIdle == 0 {
		o.ClaimIdle = 30 * time.Second
	}
	if o.StreamMaxEntries == 0 {
		o.StreamMaxEntries = 1_000_000
	}
	if o.TrimEvery == 0 {
		o.TrimEvery = 5 * time.Second
	}
	if o.OrphanAfter == 0 {
		o.OrphanAfter = 30 * time.Second
	}
	if o.RecordsRetention <= 0 {
		o.RecordsRetention = DefaultRecordsRetention
	}
	if o.ClaimTTL == 0 {
		o.ClaimTTL = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SourceFailures == 0 {
		o.SourceFailures = 5
	}
	if o.SourceCooldown == 0 {
		o.SourceCooldown = 10 * time.Second
	}
	s := &Service{
		o: o, client: o.Store.Client, keys: o.Store.Keys, pseudonyms: newPseudonyms(o.IdentityKey),
		logger: o.Logger, responder: o.Responder, comp: compensations{wake: make(chan struct{}, 1)},
	}
	kinds := make([]Kind, len(registered))
	for i, r := range registered {
		kinds[i] = r.newKind(s)
	}
	s.metrics = newMetrics(o.Registry, kinds)
	s.tally = report.NewTally()
	s.report = report.Writer{Client: o.Store.Client, Keys: o.Store.Keys, Retention: o.ReportRetention, Logger: o.Logger}
	for _, k := range kinds {
		s.register(k)
	}
	s.replay.gen = o.Store.Generation()
	return s
}

// register adds a kind: routes name it by admission.type (its entry in config.AdmissionKinds), the
// worker reads its streams, its metrics start at 0. Before the routes are compiled and Run.
func (s *Service) register(k Kind) {
	s.kinds = append(s.kinds, k)
	for _, r := range resultLabels(k) {
		s.metrics.admissions.WithLabelValues(k.Name(), r)
	}
}
