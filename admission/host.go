package admission

// What a kind of its own package reaches of the pipeline (docs/architecture.md "Adding an admission
// kind"): the store, its keys, the ledger, the answers, the admission library of Lua, a user's
// "mine" identity, and the admin records the event worker keeps. The kinds of this package use them
// too; docs/architecture.md says which still shares internals of the pipeline.

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/luascript"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// Client is the store every kind's scripts run on.
func (s *Service) Client() redis.UniversalClient { return s.client }

// Keys name the store's keys: a kind keeps its keys under its owner's hash tag (Keys.Global).
func (s *Service) Keys() store.Keys { return s.keys }

// Ledger is the durable record, nil without one (ledger.postgres_url unset).
func (s *Service) Ledger() *ledger.Ledger { return s.o.Ledger }

// Responder answers a kind's views as every answer of edgeq is written.
func (s *Service) Responder() *web.Responder { return s.responder }

// Store is the store with its bounded calls (Store.Bound, Store.RunAckedAll).
func (s *Service) Store() *store.Store { return s.o.Store }

// Pseudonym is what a kind stores of a user id written as a field of fieldKind reads it ("path",
// "json", ...; "" as written): its HMAC pseudonym, never the id itself.
func (s *Service) Pseudonym(value, fieldKind string) (string, *web.Error) {
	return s.pseudonyms.identity(value, fieldKind)
}

// Logger is the service's logger.
func (s *Service) Logger() *slog.Logger { return s.logger }

// Registry takes a kind's own metrics (nil: none are registered).
func (s *Service) Registry() prometheus.Registerer { return s.o.Registry }

// Script is a kind's operation src (its own Lua) after the clock and the admission library
// (scripts/lib.lua), named for traces, as every admission script is built.
func Script(name, src string) *redis.Script {
	return luascript.Named(name, redis.NewScript(scripts.Lib()+"\n"+src))
}

// Scripts loads a kind's scripts from the scripts/ directory of fsys (its embedded files), each built
// as Script builds it: a kind's package keeps its script variables as Scripts(files)("reserve.lua").
func Scripts(fsys fs.FS) func(name string) *redis.Script {
	files := luascript.From(fsys, "scripts")
	return func(name string) *redis.Script { return Script(name, files.Read(name)) }
}

// ReadRecords reads a page of t's admin records, newest first, and how many there are: every
// record's (user "") or one user's (its pseudonym, as Whose gives it).
func (s *Service) ReadRecords(ctx context.Context, t *AdminTable, user string, page, size int64) ([]json.RawMessage, int64, error) {
	found, total, err := s.ReadStored(ctx, t, user, page, size)
	if err != nil {
		return nil, 0, err
	}
	out := make([]json.RawMessage, len(found))
	for i, l := range found {
		out[i] = json.RawMessage(l.Body)
	}
	return out, total, nil
}

// FindRecord reads t's admin record of admission id.
func (s *Service) FindRecord(ctx context.Context, t *AdminTable, id string) (json.RawMessage, bool, error) {
	st, found, err := s.FindStored(ctx, t, id)
	if err != nil || !found {
		return nil, false, err
	}
	return json.RawMessage(st.Body), true, nil
}

// StoredRecord is an admin record as the store keeps it: whose and which it is, its body (the event
// worker's JSON, or the kind's own form where its scripts write the record) and the orphan sweep's
// mark on it.
type StoredRecord struct{ Owner, ID, Body, Mark string }

// ReadStored is ReadRecords, each record as the store keeps it.
func (s *Service) ReadStored(ctx context.Context, t *AdminTable, user string, page, size int64) ([]StoredRecord, int64, error) {
	found, total, err := s.page(ctx, t, user, page, size)
	if err != nil {
		return nil, 0, err
	}
	out := make([]StoredRecord, len(found))
	for i, l := range found {
		out[i] = StoredRecord{Owner: l.owner, ID: l.id, Body: l.body, Mark: l.mark}
	}
	return out, total, nil
}

// FindStored is FindRecord, the record as the store keeps it.
func (s *Service) FindStored(ctx context.Context, t *AdminTable, id string) (StoredRecord, bool, error) {
	r, st, found, err := s.locate(ctx, t, id)
	if err != nil || !found {
		return StoredRecord{}, false, err
	}
	return StoredRecord{Owner: r.owner, ID: r.id, Body: st.body, Mark: st.mark}, true, nil
}

// Count counts one admission decision of k: the metrics' edgeq_admissions_total{type, result}.
func (s *Service) Count(k Kind, result string) {
	s.metrics.admissions.WithLabelValues(k.Name(), result).Inc()
}

// ReportScope is the report's series of one owner of a scope.
func (s *Service) ReportScope(scope report.Kind, owner string) *report.Scope {
	return s.tally.Scope(scope, owner)
}

// ClaimTTL is how long a user's in-flight claim holds (Options.ClaimTTL).
func (s *Service) ClaimTTL() time.Duration { return s.o.ClaimTTL }

// RecordsRetention is how long admin records are kept (admission.records_retention).
func (s *Service) RecordsRetention() time.Duration { return s.o.RecordsRetention }

// WritePage answers a page of items as every list does: items, total_count, page, page_size; with
// the Edgeq-Source header "ledger" when they were read from the ledger.
func WritePage[T any](w http.ResponseWriter, items []T, total, page, size int64, fromLedger bool) {
	if fromLedger {
		writeLedgerPage(w, items, total, page, size)
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

// Prefix starts the paths of every kind's public reads (admission.prefix).
func (s *Service) Prefix() string { return s.o.Prefix }

// SourceBreaker is the circuit breaker of a kind's source of unknown owners when its settings leave
// it unset: open after failures failures in a row, for cooldown (Options.SourceFailures and
// SourceCooldown).
func (s *Service) SourceBreaker() (failures int, cooldown time.Duration) {
	return s.o.SourceFailures, s.o.SourceCooldown
}

// Kind is the linked kind whose routes' admission.type is name, nil when none is.
func (s *Service) Kind(name string) Kind { return s.kindOf(name) }

// CommitNow commits cs, admissions of kind k the shop accepted, at once and in one batch, as the
// committer sends the commits it gathered (commits.lua per owner): for a kind's tests, which settle
// admissions they made themselves without a request in flight.
func (s *Service) CommitNow(ctx context.Context, k Kind, cs ...Claim) {
	batch := make([]pendingCommit, len(cs))
	for i, c := range cs {
		batch[i] = pendingCommit{kind: k, c: c, st: &settling{done: make(chan struct{})}}
	}
	s.applyCommits(ctx, batch)
}
