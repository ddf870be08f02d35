package config

// A route's configuration: the path it protects and what it asks of the gate chain.

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/idmatch"
)

// Requirements a route can ask the gate for (docs/architecture.md "A request's way through"): each is
// enforced by one step, which names it as its Requirement. They live here, beside Route, because the
// steps (waitroom, turnstile, admission) cannot import proxy, which chains them.
const (
	RequireQueue     = "queue"
	RequireTurnstile = "turnstile"
	RequireAdmission = "admission"
)

// Route is one protected path pattern. Requests matching no route pass through ungated.
type Route struct {
	Name  string `yaml:"name"`
	Match string `yaml:"match"`
	// Host scopes the route to one site: a host name, or "*." and a name for any single label under
	// it; "" applies the route to every host (docs/reference.md "Several sites").
	Host         string `yaml:"host"`
	Queue        string `yaml:"queue"`
	Turnstile    bool   `yaml:"turnstile"`
	OnStoreError string `yaml:"on_store_error"`
	// Origin names the pool of shop servers the route's requests go to (origins[].name); "" is the
	// pool of origin:.
	Origin string `yaml:"origin"`
	// MaxInFlight > 0: at most this many requests of the route at the origin at once, across every
	// replica (a lease in the store); a request over it waits up to Hold, first come first served,
	// then gets 503 BUSY (docs/reference.md "In-flight limits").
	MaxInFlight int           `yaml:"max_in_flight"`
	Hold        time.Duration `yaml:"hold"`
	// HoldPerClient > 0: the requests one client (its token's queue request id, else its address) may
	// have waiting in the route's hold line; past it 503 BUSY at once. 0: no bound.
	HoldPerClient int `yaml:"hold_per_client"`
	// CompleteOn: origin outcomes (release_on's words) that complete the visitor's queue session.
	CompleteOn []string  `yaml:"complete_on"`
	Refusal    Refusal   `yaml:"refusal"`
	Admission  Admission `yaml:"admission"`
	// GraphQL, when it names fields, makes the route apply only to requests on its path whose executed
	// GraphQL operation selects one of them (docs/reference.md "GraphQL routes"; internal/graphql).
	GraphQL GraphQL `yaml:"graphql"`
}

// GraphQL is a route's graphql: block: which operation of a shared GraphQL endpoint the route guards.
type GraphQL struct {
	// Operation is the operation type of the guarded fields: mutation (default) or query.
	Operation string `yaml:"operation"`
	// Fields are root fields of that type; the route applies when the executed operation selects one
	// (directly or through fragments). Empty: not a graphql: route.
	Fields []string `yaml:"fields"`
	// RefuseFields are root fields refused on the route's path while it is configured (403
	// OPERATION_REFUSED): those that change a guarded quantity without naming the product.
	RefuseFields []string `yaml:"refuse_fields"`
	// Documents is a JSON file of trusted documents (id -> document, or an Apollo persisted query
	// manifest) for shops that execute persisted queries only; "" for none.
	Documents string `yaml:"documents"`
}

// On reports whether the route is a graphql: route.
func (g GraphQL) On() bool { return len(g.Fields) > 0 }

// GraphQL.Operation values.
const (
	GraphQLMutation = "mutation"
	GraphQLQuery    = "query"
)

// Refusal is how edgeq's refusals on a route look to non-navigation clients.
type Refusal struct {
	// JSON is a text/template producing the JSON body of a refusal ("" = the standard body), with
	// .Status .Code .Message and .Fields, values escaped for use inside a JSON string.
	JSON string `yaml:"json"`
	// Status, when set, is the status of edgeq's 4xx refusals on the route (200 for clients that drop
	// the bodies of 4xx answers); 5xx refusals keep theirs. 0: each refusal's own status.
	Status int `yaml:"status"`
}

func (r *Route) applyDefaults() {
	r.OnStoreError = OnStoreErrorClosed
	r.Hold = 10 * time.Second
	r.HoldPerClient = 2
	r.Admission.applyDefaults()
	r.GraphQL.Operation = GraphQLMutation
}

// Route.OnStoreError values.
const (
	OnStoreErrorClosed = "closed"
	OnStoreErrorOpen   = "open"
)

// Admission is the atomic check a route runs on Redis before the origin sees the request. Type "" means
// the route has no admission step. The field sources use the syntax of FieldSource.
type Admission struct {
	Type string `yaml:"type"`
	// Own holds the route fields the kinds read (AdmissionKind.Fields), by name: stock's
	// `product: path:id` and `quantity: form:qty`, bid's `auction` and `amount`, a raffle's `drawing`.
	// The route's kind says which it reads (validation refuses the others).
	Own       map[string]string `yaml:",inline"`
	User      string            `yaml:"user"`
	ReleaseOn []string          `yaml:"release_on"`
	// UnknownOwner (unknown_product, for products and auctions alike): refuse (404 PRODUCT_NOT_FOUND / AUCTION_NOT_FOUND) or pass (forwarded without
	// admission, counted as unknown_passed) a product or auction edgeq does not know.
	UnknownOwner string `yaml:"unknown_product"`
	// IDMatch: how the shop compares the route's product or auction ids (idmatch.Rules: exact,
	// case_insensitive, numeric). Whatever it says, an id that a common reading makes a guarded one is
	// admitted as that id or refused, never passed as unknown.
	IDMatch string `yaml:"id_match"`
	// Orphans: what happens to the unsettled stock admissions of a replica that stopped renewing its
	// liveness lease, once older than origin.timeout: hold (listed for an operator) or release (the
	// units go back).
	Orphans string `yaml:"orphans"`
}

// Admission.Orphans values.
const (
	OrphansHold    = "hold"
	OrphansRelease = "release"
)

// Admission.UnknownOwner values.
const (
	UnknownRefuse = "refuse"
	UnknownPass   = "pass"
)

// An AdmissionKind is what the configuration knows of one admission.type: the fields its routes
// fill. The kind's package implements it and adds this entry with RegisterAdmissionKind; route
// validation reads only the entry (docs/architecture.md "Adding an admission kind").
type AdmissionKind struct {
	Type string
	// Order places the kind among the others where they are listed (in errors): admission.Register
	// sets it to the kind's rank.
	Order int
	// Owner and Value name the route fields (admission.<field>) that say what a claim is about and
	// how much it asks; Value is "" for a kind without a value, ValueRequired when a request must give
	// one.
	Owner, Value  string
	ValueRequired bool
	// Orphans is true for a kind whose units a dead replica can hold (admission.orphans: release).
	Orphans bool
	// Fields are the route fields the kind reads: admission.<field> keys decoded into
	// Admission.Own. Owner and Value name two of them.
	Fields []string
}

// AdmissionKinds are the registered admission types, in Order.
var AdmissionKinds []AdmissionKind

// RegisterAdmissionKind adds a kind's entry to AdmissionKinds: called from the init of the kind's
// package. A type registered twice, or a field that is a shared key of admission: or another kind's,
// panics.
func RegisterAdmissionKind(k AdmissionKind) {
	keys := fieldsByKey(admissionType)
	for _, f := range k.Fields {
		if _, taken := keys[f]; taken || ownField(f) || f == "" || f != strings.ToLower(f) {
			panic(fmt.Sprintf("config: admission kind %q: field %q is taken or not a lower-case key", k.Type, f))
		}
	}
	if _, dup := AdmissionKindOf(k.Type); dup || k.Type == "" {
		panic(fmt.Sprintf("config: admission kind %q registered twice or empty", k.Type))
	}
	at := slices.IndexFunc(AdmissionKinds, func(e AdmissionKind) bool { return e.Order > k.Order })
	if at < 0 {
		at = len(AdmissionKinds)
	}
	AdmissionKinds = slices.Insert(AdmissionKinds, at, k)
}

// ownField reports whether some registered kind reads the route field name of its own.
func ownField(name string) bool {
	for _, k := range AdmissionKinds {
		if slices.Contains(k.Fields, name) {
			return true
		}
	}
	return false
}

var admissionType = reflect.TypeFor[Admission]()

// AdmissionKindOf returns the kind of an admission type.
func AdmissionKindOf(typ string) (AdmissionKind, bool) {
	for _, k := range AdmissionKinds {
		if k.Type == typ {
			return k, true
		}
	}
	return AdmissionKind{}, false
}

// Fields are the route's admission field settings by name (a copy of Own, never nil).
func (a Admission) Fields() map[string]string {
	fields := make(map[string]string, len(a.Own))
	maps.Copy(fields, a.Own)
	return fields
}

// Sources are the route's field sources of its kind's owner and value ("" when it has none).
func (a Admission) Sources() (owner, value string) {
	k, _ := AdmissionKindOf(a.Type)
	return a.Own[k.Owner], a.Own[k.Value]
}

func (a *Admission) applyDefaults() {
	a.User = UserToken
	a.UnknownOwner = UnknownRefuse
	a.IDMatch = string(idmatch.Exact)
	a.ReleaseOn = []string{"5xx", "error"}
	a.Orphans = OrphansHold
}
