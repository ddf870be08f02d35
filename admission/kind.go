package admission

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// A kind is one admission behaviour (docs/architecture.md "Adding an admission kind"): its files are
// the ones named after it, and one register call in their init adds it. Every kind runs through the same pipeline (step.go, Wrap): read a claim from the request,
// one script that admits or refuses it atomically, the origin, then one script that commits or gives
// it back on the origin's answer. The same worker (worker.go) turns every kind's event stream into
// its admin records, and the same retry loop (compensate.go) gives back what the store could not
// confirm.
//
// kind is what every kind must do; the interfaces below it are parts a kind may have, found by type
// assertion (as caddy finds a module's Provision or Validate). The route fields a kind reads are its
// entry in config.AdmissionKinds.
type kind interface {
	// name is the route's admission.type and the metrics label "type".
	name() string
	// owner names what a claim is about: the refusal of a request that does not say which, and the
	// dead letters' "<owner>_id" field.
	owner() string
	// value turns the route's value field into the claim's number; found is
	// false when the route or the request gives none.
	value(text string, found bool) (int64, *web.Error)
	// header carries the admission id to the origin.
	header() string
	// refusals are the kind's own refusals: the metrics label of each is its code in lower case.
	refusals() []*web.Error
	// notFound is the refusal of an owner the store does not know (a 404); a route whose
	// unknown-owner setting is pass forwards such a request without admission instead.
	notFound() *web.Error

	// reserve runs the kind's admission script: nil when admitted, the refusal otherwise. An error
	// means the store did not answer: the script may have run.
	reserve(ctx context.Context, c claim) (*web.Error, error)
	// release gives an admission back (the origin refused it, or a compensation): idempotent per id;
	// an id the store never saw gets a tombstone so that a reserve still on its way takes nothing.
	// It returns the script's code (0 released, 1 unknown, 2 already released, 3 already committed).
	release(ctx context.Context, c claim) (int64, error)
	// commit keeps an admission the origin accepted.
	commit(ctx context.Context, c claim) error
	// record is the key of c's record: the one a batched commit marks committed (commits.lua).
	record(c claim) string
	// commits says whether the shop's acceptance writes anything to the store (a kind may need a
	// commit only for the ledger).
	commits() bool

	// ownersKey is the set of the kind's owner ids (each has an event stream); spellingsKey the hash
	// of their other spellings (spellings.go). Both are written by s.indexOwner.
	ownersKey() string
	spellingsKey() string
	// stream is one owner's event stream.
	stream(owner string) string
	// deadPrefix starts the dead-letter ids (and applied-event markers) of this kind's entries.
	deadPrefix() string
	// parse reads one stream entry and returns what applying it writes (exactly once: applyBatch):
	// none for an entry meant for the ledger alone, several for an entry naming several admissions.
	parse(owner string, msg redis.XMessage) ([]application, error)
}

// holder is a kind whose admissions can be held unsettled for an operator, listed with why (a kind
// whose admissions simply stand until given back has no need of it).
type holder interface {
	// hold marks an admission held unsettled for an operator, and why (holdAmbiguous).
	hold(ctx context.Context, c claim, why string) error
}

// discoverer is a kind that can ask elsewhere (the shop) about an owner the store does not know, and
// writes it to the store when found. e is a refusal of its own (sourceDown: the source could not be
// asked); err a store error while writing.
type discoverer interface {
	discover(ctx context.Context, owner string) (found bool, e *web.Error, err error)
	// sourceDown is the refusal of a request whose owner could not be looked up: it says nothing
	// about the owner (the report leaves it out).
	sourceDown() *web.Error
}

// groupedKind is a kind whose admit script writes one entry per grouped call in a second stream of
// the owner, and whose admissions wait in an unsettled set until settled, each with its user's
// in-flight claim, which its settlement ends. The kind groups its calls per owner with a batcher of
// its own (package group), which also carries commits.
type groupedKind interface {
	admitsStream(owner string) string
	unsettledSet(owner string) string
	claims(owner string) string
	// rideCommit hands c's commit to the owner's next grouped call (one is sent at once when none is
	// on its way), and calls done with whether that call applied it; false when no call takes it.
	rideCommit(c claim, done func(applied bool)) bool
}

// busyKind is a kind with a refusal that means the user's previous admission is still being
// settled: when this replica is about to commit that one, the pipeline waits for the commit and
// tries once more (step.go).
type busyKind interface {
	busy() *web.Error
}

// runnerKind has work of its own that runs beside the event worker until ctx ends (its batchers).
type runnerKind interface {
	run(ctx context.Context)
}

// sweepingKind looks over its owners on the event worker's slow beat (every few seconds): gauges,
// admissions a dead replica left.
type sweepingKind interface {
	sweep(ctx context.Context)
}

// configuredKind takes its part of the configuration (its routes' settings, sections of its own) at
// start and on every reload (Service.Use).
type configuredKind interface {
	use(cfg *config.Config) error
}

// minedKind is a kind with a "mine" listing (mine.go): its users are identified like the user of the
// kind's first route, kept in the pointer it returns.
type minedKind interface {
	mineIdentity() *atomic.Pointer[mineIdentity]
}

// tabledKind keeps admin records of its admissions (records.go).
type tabledKind interface {
	adminTable() *adminTable
}

// cachingKind keeps cached reads of its owners on each replica, dropped after an admission or a
// release of that owner.
type cachingKind interface {
	forget(owner string)
}

// pagedKind answers a browser's refusal with a page of its own (the sold-out page) instead of the
// error page; "" for that.
type pagedKind interface {
	refusalPage(e *web.Error) string
}

// viewedKind adds the kind's public reads and admin views.
type viewedKind interface {
	registerPublic(mux *http.ServeMux)
	registerAdmin(mux *http.ServeMux)
}

// seededKind writes the owners the configuration file lists at start and on each reload; previous is the running configuration (nil at start): only changed entries are
// written.
type seededKind interface {
	seed(ctx context.Context, next, previous *config.Config) error
}

// ledgeredKind is a kind whose events are kept in the ledger (ledger.go) and compared with it by
// `edgeq reconcile` (reconcile.go).
type ledgeredKind interface {
	// ledgerRow reads one stream entry into the ledger row it writes.
	ledgerRow(owner string, msg redis.XMessage, b *ledger.Batch) error
	// reconcile compares the kind's store records with its ledger rows, adding to r.
	reconcile(ctx context.Context, r *Reconciliation) error
}

// reportedKind is a kind whose owners have series in the report: the scope they are kept in, the
// series and amount an admission counts, the amount a settlement counts (0: settlements are not
// counted), and what the report's writer adds for an owner each tick.
type reportedKind interface {
	reportScope() report.Kind
	reportAdmitted(c claim) (series string, n int64)
	reportSettled(c claim) int64
	reportExtra(owner string) report.Extra
}

// Apply writes what the configuration file lists of every kind (seededKind) at start (previous nil)
// and on a reload.
func (s *Service) Apply(ctx context.Context, next, previous *config.Config) error {
	var errs []error
	for _, k := range s.kinds {
		if sk, ok := k.(seededKind); ok {
			errs = append(errs, sk.seed(ctx, next, previous))
		}
	}
	return errors.Join(errs...)
}

// forget drops this replica's cached reads of an owner of k, if k keeps any.
func forget(k kind, owner string) {
	if c, ok := k.(cachingKind); ok {
		c.forget(owner)
	}
}

// admitsStream is the owner's grouped-admissions stream, "" for a kind without one.
func admitsStream(k kind, owner string) string {
	if g, ok := k.(groupedKind); ok {
		return g.admitsStream(owner)
	}
	return ""
}

// refusalPage is k's page for a browser's refusal e, "" for the error page.
func refusalPage(k kind, e *web.Error) string {
	if p, ok := k.(pagedKind); ok {
		return p.refusalPage(e)
	}
	return ""
}

// ledgered reports whether k's events go to the ledger.
func ledgered(k kind) (ledgeredKind, bool) {
	l, ok := k.(ledgeredKind)
	return l, ok
}

// registration is a kind as its files register it.
type registration struct {
	rank    int // the kinds' order in every list (routes, streams, reconciliation)
	newKind func(s *Service) kind
}

// registered are the kinds linked in, sorted by rank.
var registered []registration

// register adds a kind: called once from the init of the kind's own file, with its place among the
// kinds and its constructor (run by New for each Service).
func register(rank int, newKind func(s *Service) kind) {
	registered = append(registered, registration{rank, newKind})
	sort.SliceStable(registered, func(i, j int) bool { return registered[i].rank < registered[j].rank })
}

// isBusy reports whether e is k's refusal of a user whose previous admission is being settled.
func isBusy(k kind, e *web.Error) bool {
	b, ok := k.(busyKind)
	return ok && e != nil && e.Code == b.busy().Code
}

// sourceDown reports whether e is k's refusal of a request whose owner could not be looked up.
func sourceDown(k kind, e *web.Error) bool {
	d, ok := k.(discoverer)
	return ok && e.Code == d.sourceDown().Code
}
