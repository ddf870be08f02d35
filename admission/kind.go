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

// A Kind is one admission behaviour (docs/architecture.md "Adding an admission Kind"): its files are
// the ones named after it, and one register call in their init adds it. Every Kind runs through the same pipeline (step.go, Wrap): read a claim from the request,
// one script that admits or refuses it atomically, the origin, then one script that commits or gives
// it back on the origin's answer. The same worker (worker.go) turns every Kind's event stream into
// its admin records, and the same retry loop (compensate.go) gives back what the store could not
// confirm.
//
// Kind is what every Kind must do; the interfaces below it are parts a Kind may have, found by type
// assertion (as caddy finds a module's Provision or Validate). The route fields a Kind reads are its
// entry in config.AdmissionKinds.
type Kind interface {
	// Name is the route's admission.type and the metrics label "type".
	Name() string
	// Owner names what a claim is about: the refusal of a request that does not say which, and the
	// dead letters' "<Owner>_id" field.
	Owner() string
	// Value turns the route's Value field into the claim's number; found is
	// false when the route or the request gives none.
	Value(text string, found bool) (int64, *web.Error)
	// Header carries the admission id to the origin.
	Header() string
	// Refusals are the kind's own Refusals: the metrics label of each is its code in lower case.
	Refusals() []*web.Error
	// NotFound is the refusal of an owner the store does not know (a 404); a route whose
	// unknown-owner setting is pass forwards such a request without admission instead.
	NotFound() *web.Error

	// Reserve runs the kind's admission script: nil when admitted, the refusal otherwise. An error
	// means the store did not answer: the script may have run.
	Reserve(ctx context.Context, c Claim) (*web.Error, error)
	// Release gives an admission back (the origin refused it, or a compensation): idempotent per id;
	// an id the store never saw gets a tombstone so that a reserve still on its way takes nothing.
	// It returns the script's code (0 released, 1 unknown, 2 already released, 3 already committed).
	Release(ctx context.Context, c Claim) (int64, error)
	// Commit keeps an admission the origin accepted.
	Commit(ctx context.Context, c Claim) error
	// Record is the key of c's Record: the one a batched commit marks committed (commits.lua).
	Record(c Claim) string
	// Commits says whether the shop's acceptance writes anything to the store (a kind may need a
	// commit only for the ledger).
	Commits() bool

	// OwnersKey is the set of the kind's owner ids (each has an event stream); spellingsKey the hash
	// of their other spellings (spellings.go). Both are written by s.indexOwner.
	OwnersKey() string
	SpellingsKey() string
	// Stream is one owner's event Stream.
	Stream(owner string) string
	// DeadPrefix starts the dead-letter ids (and applied-event markers) of this kind's entries.
	DeadPrefix() string
	// Parse reads one stream entry and returns what applying it writes (exactly once: applyBatch):
	// none for an entry meant for the ledger alone, several for an entry naming several admissions.
	Parse(owner string, msg redis.XMessage) ([]Application, error)
}

// HoldAmbiguous is why the pipeline holds an admission (Holder.Hold): the shop's answer never came
// after the whole request was sent.
const HoldAmbiguous = "ambiguous"

// Holder is a kind whose admissions can be held unsettled for an operator, listed with why (a kind
// whose admissions simply stand until given back has no need of it).
type Holder interface {
	// Hold marks an admission held unsettled for an operator, and why (holdAmbiguous).
	Hold(ctx context.Context, c Claim, why string) error
}

// Discoverer is a kind that can ask elsewhere (the shop) about an owner the store does not know, and
// writes it to the store when found. e is a refusal of its own (sourceDown: the source could not be
// asked); err a store error while writing.
type Discoverer interface {
	Discover(ctx context.Context, owner string) (found bool, e *web.Error, err error)
	// SourceDown is the refusal of a request whose owner could not be looked up: it says nothing
	// about the owner (the report leaves it out).
	SourceDown() *web.Error
}

// GroupedKind is a kind whose admit script writes one entry per grouped call in a second stream of
// the owner, and whose admissions wait in an unsettled set until settled, each with its user's
// in-flight claim, which its settlement ends. The kind groups its calls per owner with a batcher of
// its own (package group), which also carries commits.
type GroupedKind interface {
	AdmitsStream(owner string) string
	UnsettledSet(owner string) string
	Claims(owner string) string
	// RideCommit hands c's commit to the owner's next grouped call (one is sent at once when none is
	// on its way), and calls done with whether that call applied it; false when no call takes it.
	RideCommit(c Claim, done func(applied bool)) bool
}

// BusyKind is a kind with a refusal that means the user's previous admission is still being
// settled: when this replica is about to commit that one, the pipeline waits for the commit and
// tries once more (step.go).
type BusyKind interface {
	Busy() *web.Error
}

// RunnerKind has work of its own that runs beside the event worker until ctx ends (its batchers).
type RunnerKind interface {
	Run(ctx context.Context)
}

// SweepingKind looks over its owners on the event worker's slow beat (every few seconds): gauges,
// admissions a dead replica left.
type SweepingKind interface {
	Sweep(ctx context.Context)
}

// ConfiguredKind takes its part of the configuration (its routes' settings, sections of its own) at
// start and on every reload (Service.Use).
type ConfiguredKind interface {
	Use(cfg *config.Config) error
}

// MinedKind is a kind with a "mine" listing (mine.go): its users are identified like the user of the
// kind's first route, kept in the pointer it returns.
type MinedKind interface {
	MineIdentity() *atomic.Pointer[MineIdentity]
}

// TabledKind keeps admin records of its admissions (records.go).
type TabledKind interface {
	AdminTable() *AdminTable
}

// CachingKind keeps cached reads of its owners on each replica, dropped after an admission or a
// release of that owner.
type CachingKind interface {
	Forget(owner string)
}

// PagedKind answers a browser's refusal with a page of its own (the sold-out page) instead of the
// error page; "" for that.
type PagedKind interface {
	RefusalPage(e *web.Error) string
}

// ViewedKind adds the kind's public reads and admin views.
type ViewedKind interface {
	RegisterPublic(mux *http.ServeMux)
	RegisterAdmin(mux *http.ServeMux)
}

// SeededKind writes the owners the configuration file lists at start and on each reload; previous is the running configuration (nil at start): only changed entries are
// written.
type SeededKind interface {
	Seed(ctx context.Context, next, previous *config.Config) error
}

// LedgeredKind is a kind whose events are kept in the ledger (ledger.go) and compared with it by
// `edgeq reconcile` (reconcile.go).
type LedgeredKind interface {
	// LedgerRow reads one stream entry into the ledger row it writes.
	LedgerRow(owner string, msg redis.XMessage, b *ledger.Batch) error
	// Reconcile compares the kind's store records with its ledger rows, adding to r.
	Reconcile(ctx context.Context, r *Reconciliation) error
}

// ReportedKind is a kind whose owners have series in the report: the scope they are kept in, the
// series and amount an admission counts, the amount a settlement counts (0: settlements are not
// counted), and what the report's writer adds for an owner each tick.
type ReportedKind interface {
	ReportScope() report.Kind
	ReportAdmitted(c Claim) (series string, n int64)
	ReportSettled(c Claim) int64
	ReportExtra(owner string) report.Extra
}

// Apply writes what the configuration file lists of every kind (SeededKind) at start (previous nil)
// and on a reload.
func (s *Service) Apply(ctx context.Context, next, previous *config.Config) error {
	var errs []error
	for _, k := range s.kinds {
		if sk, ok := k.(SeededKind); ok {
			errs = append(errs, sk.Seed(ctx, next, previous))
		}
	}
	return errors.Join(errs...)
}

// forget drops this replica's cached reads of an owner of k, if k keeps any.
func forget(k Kind, owner string) {
	if c, ok := k.(CachingKind); ok {
		c.Forget(owner)
	}
}

// admitsStream is the owner's grouped-admissions stream, "" for a kind without one.
func admitsStream(k Kind, owner string) string {
	if g, ok := k.(GroupedKind); ok {
		return g.AdmitsStream(owner)
	}
	return ""
}

// refusalPage is k's page for a browser's refusal e, "" for the error page.
func refusalPage(k Kind, e *web.Error) string {
	if p, ok := k.(PagedKind); ok {
		return p.RefusalPage(e)
	}
	return ""
}

// ledgered reports whether k's events go to the ledger.
func ledgered(k Kind) (LedgeredKind, bool) {
	l, ok := k.(LedgeredKind)
	return l, ok
}

// registration is a kind as its files register it.
type registration struct {
	rank    int // the kinds' order in every list (routes, streams, reconciliation)
	newKind func(s *Service) Kind
}

// registered are the kinds linked in, sorted by rank.
var registered []registration

// Register adds a kind: called once from the init of the kind's package, with its place among the
// kinds, what the configuration knows of its routes (config.RegisterAdmissionKind, at the same place)
// and its constructor (run by New for each Service).
func Register(rank int, routes config.AdmissionKind, newKind func(s *Service) Kind) {
	routes.Order = rank
	config.RegisterAdmissionKind(routes)
	registered = append(registered, registration{rank, newKind})
	sort.SliceStable(registered, func(i, j int) bool { return registered[i].rank < registered[j].rank })
}

// isBusy reports whether e is k's refusal of a user whose previous admission is being settled.
func isBusy(k Kind, e *web.Error) bool {
	b, ok := k.(BusyKind)
	return ok && e != nil && e.Code == b.Busy().Code
}

// sourceDown reports whether e is k's refusal of a request whose owner could not be looked up.
func sourceDown(k Kind, e *web.Error) bool {
	d, ok := k.(Discoverer)
	return ok && e.Code == d.SourceDown().Code
}

// About is what a kind says of itself, fixed when it is built: embedded in the kind's type, it
// answers the Kind methods Name, Owner, Header, DeadPrefix, NotFound and Refusals.
type About struct {
	Type      string       // the routes' admission.type and the metrics label "type" (Name)
	OwnerNoun string       // what a claim is about (Owner)
	IDHeader  string       // the header that carries an admission's id to the origin (Header)
	Dead      string       // the start of its dead letters' ids (DeadPrefix)
	Unknown   *web.Error   // the refusal of an owner the store does not know (NotFound)
	Codes     []*web.Error // every refusal of its own (Refusals)
}

func (a About) Name() string           { return a.Type }
func (a About) Owner() string          { return a.OwnerNoun }
func (a About) Header() string         { return a.IDHeader }
func (a About) DeadPrefix() string     { return a.Dead }
func (a About) NotFound() *web.Error   { return a.Unknown }
func (a About) Refusals() []*web.Error { return a.Codes }
