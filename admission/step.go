package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/graphql"
	"github.com/edgeq/edgeq/internal/idmatch"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// Claim is what one admitted (or refused) request asks for.
type Claim struct {
	Owner string // the owner's id (Kind.Owner): the hash tag of every key its scripts touch
	User  string // pseudonym
	ID    string // the admission's id
	Value int64  // the route's value field as the kind reads it (Kind.Value)
	Route string // the route that admitted it (scripts' records keep it for the orphan sweep)
	// Commit: not an admission but the Commit of admission id, riding the owner's next grouped
	// call (GroupedKind.RideCommit)
	Commit bool
}

// RecordTTL is how long an admission's record stays for release and commit to find.
const RecordTTL = 24 * time.Hour

// kindOf returns the kind of an admission type, nil if there is none.
func (s *Service) kindOf(typ string) Kind {
	for _, k := range s.kinds {
		if k.Name() == typ {
			return k
		}
	}
	return nil
}

// Requirement is the route setting this step enforces.
func (s *Service) Requirement() string { return config.RequireAdmission }

// Wrap returns the route's handler: next without admission, the kind's pipeline otherwise.
func (s *Service) Wrap(route config.Route, next http.Handler) (http.Handler, error) {
	a := route.Admission
	if a.Type == "" {
		return next, nil
	}
	k := s.kindOf(a.Type)
	if k == nil {
		return nil, fmt.Errorf("unknown admission type %q", a.Type)
	}
	ownerText, valueText := a.Sources()
	var src fieldSources
	var err error
	if src.owner, err = config.ParseFieldSource(ownerText); err != nil {
		return nil, err
	}
	if valueText != "" {
		v, err := config.ParseFieldSource(valueText)
		if err != nil {
			return nil, err
		}
		src.value = &v
	}
	if src.user, err = config.ParseUserSource(a.User); err != nil {
		return nil, err
	}
	passUnknown := a.UnknownOwner == config.UnknownPass
	match, err := idmatch.Parse(a.IDMatch)
	if err != nil {
		return nil, err
	}
	releaseOn := make([]config.ReleaseOutcome, 0, len(a.ReleaseOn))
	for _, text := range a.ReleaseOn {
		o, err := config.ParseReleaseOutcome(text)
		if err != nil {
			return nil, err
		}
		releaseOn = append(releaseOn, o)
	}
	readAnswer := wantsAnswer(releaseOn)
	return s.traceAdmission(k, route.Name, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if e, degraded := web.RequestFrom(r.Context()).StoreDegraded(config.RequireAdmission); degraded {
			s.storeFailed(w, r, k, next, e, start)
			return
		}
		// The whole request is read before anything is reserved: a visitor who leaves mid-upload
		// takes nothing, and an admitted request reaches the origin whole.
		f := fields.New(r, s.o.MaxBodyBytes)
		if e := f.ReadBody(); e != nil {
			s.refuse(w, r, k, "", e, start)
			return
		}
		c, e := s.read(r, f, k, src)
		if e != nil {
			s.refuse(w, r, k, "", e, start)
			return
		}
		if r.Context().Err() != nil {
			return // the visitor left before anything was taken (logged as 499)
		}
		c.ID, c.Route = s.o.IDs.NextString(), route.Name
		// The store call does not end with the visitor's connection: a hang-up must not pass for a
		// store that did not answer. The store bounds each call (store.CallTimeout).
		e, err := s.reserveTraced(context.WithoutCancel(r.Context()), k, c)
		if err == nil && e != nil && e.Code == k.NotFound().Code {
			// Not known as spelled: another spelling of a guarded id is reserved as that id or refused,
			// never passed; a Discoverer kind may ask its source. spellings.go.
			c, e, err = s.unknownOwner(context.WithoutCancel(r.Context()), k, match, c)
		}
		if err == nil && isBusy(k, e) && s.waitCommit(k, c) {
			// The user's last admission was answered and its commit is on its way from this replica.
			e, err = s.reserveTraced(context.WithoutCancel(r.Context()), k, c)
		}
		if errors.Is(err, store.ErrNotAcked) {
			// The store answered but its replicas did not confirm in time: a failover now could lose the
			// reservation and sell the unit again, so the shop never sees it (whatever on_store_error says:
			// that is for a store that does not answer).
			s.giveBackUnacked(w, r, k, c, err, start)
			return
		}
		if err != nil {
			// No answer: the script may have run. Its effect is undone as soon as the store answers.
			if !errors.Is(err, errNothingTaken) {
				s.compensateLater(k, c)
			}
			s.storeFailed(w, r, k, next, web.RequestFrom(r.Context()).StoreFailed(config.RequireAdmission, err), start)
			return
		}
		if e != nil && passUnknown && e.Code == k.NotFound().Code {
			// an unknown-owner pass — a shop's one add-to-cart URL serves every owner; only the
			// ones edgeq knows are guarded. Nothing was taken (the script refused before any write).
			s.metrics.admissions.WithLabelValues(k.Name(), "unknown_passed").Inc()
			s.observe(r, k, start)
			next.ServeHTTP(w, r)
			return
		}
		if e != nil {
			s.refuse(w, r, k, c.Owner, e, start)
			return
		}
		s.metrics.admissions.WithLabelValues(k.Name(), "admitted").Inc()
		s.countAdmitted(k, c)
		s.observe(r, k, start)
		forget(k, c.Owner)
		r.Header.Set(k.Header(), c.ID)
		// From here the request is the shop's: it reaches the origin and is settled on the origin's
		// own answer, whatever the visitor does (bounded by origin.timeout). A hang-up is never a
		// release by itself: most shops complete an order whose visitor closed the tab. settle is
		// deferred so that it also runs when the response copy aborts (http.ErrAbortHandler).
		o := web.OutcomeFrom(r.Context())
		if o != nil {
			o.Settles = true
			if readAnswer {
				o.KeepAnswer().Want = true
			}
		}
		fwd, done := web.OutlastVisitor(r)
		defer done()
		// The replica's lease fences the request: it reaches the shop only if the lease holds without a
		// gap from now until it is written (docs/reference.md "Failover").
		fence, holds := s.lease.fence()
		if fence != nil && o != nil {
			o.Fence = fence
		}
		st := s.startSettling(k, c, o)
		defer s.settleTraced(fwd, k, c, releaseOn, st)
		if !holds {
			if o != nil {
				o.Fenced = true
			}
			s.responder.Error(w, r, web.ErrStoreUnavailable.Because(web.ErrFenced))
			return
		}
		next.ServeHTTP(w, fwd)
	}), nil
}

// fieldSources are a route's parsed field sources.
type fieldSources struct {
	owner config.FieldSource
	value *config.FieldSource
	user  config.UserSource
}

// read extracts and checks a claim's owner, value and user. Nothing is stored for a bad request.
func (s *Service) read(r *http.Request, f *fields.Reader, k Kind, src fieldSources) (Claim, *web.Error) {
	owner, found, e := get(r, f, src.owner)
	if e != nil {
		return Claim{}, e
	}
	if !found || !config.ID.MatchString(owner) {
		return Claim{}, web.ErrInvalidRequest.With("field", k.Owner()).Because(fmt.Errorf("%s %q from %s", k.Owner(), fields.Clip(owner), src.owner))
	}
	c := Claim{Owner: owner}
	var text string
	found = false
	if src.value != nil {
		if text, found, e = get(r, f, *src.value); e != nil {
			return Claim{}, e
		}
	}
	if c.Value, e = k.Value(text, found); e != nil {
		return Claim{}, e
	}
	if c.User, e = s.userOf(r, f, src.user); e != nil {
		return Claim{}, e
	}
	return c, nil
}

// get reads a field source: an argument of the matched GraphQL field (graphql:), or a field of the
// request (fields.Reader).
func get(r *http.Request, f *fields.Reader, src config.FieldSource) (string, bool, *web.Error) {
	if src.Kind == "graphql" {
		m := graphql.MatchFrom(r.Context())
		if m == nil {
			return "", false, nil
		}
		return m.Argument(src.JSONPath())
	}
	return f.Get(src)
}

// errUserMissing refuses an admission whose user cannot be identified; errNoVisitor one identified by
// visitor id whose request carries none that edgeq signed.
var (
	errUserMissing = web.ErrInvalidRequest.With("field", "user")
	errNoVisitor   = web.ErrNoVisitor.With("field", "user").Because(errors.New("no signed visitor id on the request"))
)

// userOf finds the user's pseudonym: of the visitor id, of the queue request id of the access token,
// or of the route's user field, normalised (pseudonyms.identity).
func (s *Service) userOf(r *http.Request, f *fields.Reader, src config.UserSource) (string, *web.Error) {
	if src.FromVisitor {
		id := web.RequestFrom(r.Context()).VisitorID // checked by the proxy (internal/visitor)
		if id == "" {
			return "", errNoVisitor
		}
		return s.pseudonyms.of(id), nil // minted by edgeq: already canonical
	}
	if src.FromToken {
		id := web.RequestFrom(r.Context()).QueueRequestID
		if id == "" {
			return "", errUserMissing.Because(fmt.Errorf("no queue token on the request"))
		}
		return s.pseudonyms.of(id), nil // minted by edgeq: already canonical
	}
	v, found, e := get(r, f, src.Field)
	if e != nil {
		return "", e
	}
	if !found || len(v) > 1024 {
		return "", errUserMissing.Because(fmt.Errorf("no %s", src.Field))
	}
	return s.pseudonyms.identity(v, src.Field.Kind)
}

// settle gives the admission back when the origin's outcome is in release_on, and commits it
// otherwise. It outlives the visitor's connection: nothing must stay reserved because the visitor
// left.
func (s *Service) settle(r *http.Request, k Kind, c Claim, releaseOn []config.ReleaseOutcome, st *settling) {
	handed := false // to the committer, which ends st
	defer func() {
		if !handed {
			s.endSettling(k, c, st)
		}
	}()
	o := web.OutcomeFrom(r.Context())
	// The store calls made here have a context of their own (a committed admission handed to the
	// committer needs none).
	storeCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	}
	// The request's logger is built on first use (web.Request.Logger): only when a line is logged,
	// not for every commit.
	logger := func() *slog.Logger { return web.RequestFrom(r.Context()).Logger() }
	if releases(o, releaseOn) {
		ctx, cancel := storeCtx()
		defer cancel()
		code, err := k.Release(ctx, c)
		if err != nil {
			logger().Warn("giving an admission back failed: retried until the store answers",
				"type", k.Name(), "id", c.ID, k.Owner(), c.Owner, "error", err.Error())
			s.compensateLater(k, c)
			return
		}
		s.remember(k, c, true)
		forget(k, c.Owner)
		if code != 0 {
			// Given back already: by another replica's orphan sweep while this one was paused (a
			// fenced request), counted there.
			logger().Info("admission given back already", "type", k.Name(), "id", c.ID, k.Owner(), c.Owner, "result", code)
			return
		}
		s.metrics.admissions.WithLabelValues(k.Name(), "released").Inc()
		s.CountSettled(k, c, report.Released)
		logger().Info("admission given back", "type", k.Name(), "id", c.ID, k.Owner(), c.Owner,
			"origin_status", statusOf(o), "result", code)
		return
	}
	if o != nil && o.Ambiguous() {
		// The whole request reached the shop and no answer came: it may have sold the unit. Neither
		// given back nor committed: held as unsettled, "ambiguous", until the shop's answer is known
		// (docs/operations.md "Ambiguous admissions").
		s.metrics.admissions.WithLabelValues(k.Name(), resultAmbiguous).Inc()
		if h, ok := k.(Holder); ok {
			ctx, cancel := storeCtx()
			defer cancel()
			if err := h.Hold(ctx, c, HoldAmbiguous); err != nil {
				logger().Warn("marking an ambiguous admission failed", "type", k.Name(), "id", c.ID, "error", err.Error())
			}
		}
		logger().Warn("no answer from the shop after the whole request was sent: the admission is held as ambiguous "+
			"(release_on does not name timeout); settle it once the shop's order is known", "type", k.Name(), "id", c.ID,
			k.Owner(), c.Owner)
		return
	}
	s.remember(k, c, false)
	s.CountSettled(k, c, report.Committed)
	if s.commitLater(k, c, st) {
		handed = true
		return
	}
	ctx, cancel := storeCtx()
	defer cancel()
	if err := k.Commit(ctx, c); err != nil {
		// A claim expires by itself (ClaimTTL); what the admission took is kept either way.
		logger().Warn("committing an admission failed", "type", k.Name(), "id", c.ID, "error", err.Error())
	}
}

// releases reports whether an origin outcome gives the admission back: a request that never reached
// the shop (not forwarded, or fenced) always does.
func releases(o *web.Outcome, releaseOn []config.ReleaseOutcome) bool {
	if o == nil || !o.Forwarded || o.Fenced {
		return true
	}
	for _, want := range releaseOn {
		if o.Matches(want) {
			return true
		}
	}
	return false
}

// wantsAnswer reports whether an outcome list reads the shop's answer (answer: entries).
func wantsAnswer(outcomes []config.ReleaseOutcome) bool {
	for _, o := range outcomes {
		if o.Answer != nil {
			return true
		}
	}
	return false
}

func statusOf(o *web.Outcome) int {
	if o == nil {
		return 0
	}
	return o.Status
}

// giveBackUnacked gives back an admission the replicas did not confirm (redis.wait_replicas) and answers
// 503 STORE_UNAVAILABLE, counted as replica_timeout. The give-back itself is not waited for: if a
// failover loses it, the unit is held again, listed as unsettled (docs/reference.md, "Failover").
func (s *Service) giveBackUnacked(w http.ResponseWriter, r *http.Request, k Kind, c Claim, cause error, start time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if _, err := k.Release(ctx, c); err != nil {
		s.compensateLater(k, c)
	} else {
		s.remember(k, c, true)
		forget(k, c.Owner)
	}
	s.metrics.admissions.WithLabelValues(k.Name(), resultReplicaTimeout).Inc()
	s.observe(r, k, start)
	s.responder.Error(w, r, web.ErrStoreUnavailable.Because(cause))
}

// resultReplicaTimeout is the admissions metric's result for an admission the replicas did not confirm;
// resultAmbiguous for one held because the shop's answer never came after the whole request was sent.
const (
	resultReplicaTimeout = "replica_timeout"
	resultAmbiguous      = "ambiguous"
)

// storeFailed handles an admission that cannot use the store as the route's on_store_error decided
// (web.Request.StoreFailed: e). Open (e nil), the request goes to the origin without admission
// (counted as "bypassed"); closed, it is answered e (503).
func (s *Service) storeFailed(w http.ResponseWriter, r *http.Request, k Kind, next http.Handler, e *web.Error, start time.Time) {
	if e != nil {
		s.refuse(w, r, k, "", e, start)
		return
	}
	s.metrics.admissions.WithLabelValues(k.Name(), "bypassed").Inc()
	s.observe(r, k, start)
	next.ServeHTTP(w, r)
}

// refuse answers a refused admission without contacting the origin: JSON for API clients, a page for
// browsers (the kind's own page where it has one, such as the sold-out page). owner is the claim's, ""
// before one was read.
func (s *Service) refuse(w http.ResponseWriter, r *http.Request, k Kind, owner string, e *web.Error, start time.Time) {
	s.metrics.admissions.WithLabelValues(k.Name(), resultLabel(k, e)).Inc()
	s.countRefused(k, owner, e)
	s.observe(r, k, start)
	if page := refusalPage(k, e); page != "" && web.IsNavigation(r) {
		s.responder.Page(w, r, e.Status, page, web.RefusalPage{
			ErrorPage: web.ErrorPage{PageBase: s.responder.Base(r), Status: e.Status, Code: e.Code},
			Fields:    e.Fields, Back: web.BackPath(r)})
		return
	}
	s.responder.Error(w, r, e)
}

// resultLabel is the metrics result of a refusal: the code in lower case for the kind's own refusals
// and STORE_UNAVAILABLE, "invalid_request" for anything wrong with the request.
func resultLabel(k Kind, e *web.Error) string {
	if e.Code == web.ErrStoreUnavailable.Code || slices.ContainsFunc(k.Refusals(), func(r *web.Error) bool { return r.Code == e.Code }) {
		return strings.ToLower(e.Code)
	}
	return "invalid_request"
}

// resultLabels are every result of a kind, for the metrics to start at 0.
func resultLabels(k Kind) []string {
	labels := []string{"admitted", "released", "bypassed", "unknown_passed", "invalid_request", "store_unavailable", resultReplicaTimeout, resultAmbiguous}
	for _, e := range k.Refusals() {
		labels = append(labels, strings.ToLower(e.Code))
	}
	return labels
}
