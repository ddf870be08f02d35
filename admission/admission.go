// Package admission admits requests of protected routes with one atomic Lua call on Redis before the
// origin sees them (CONTRACT sections 4 and 6): stock admission reserves units of a product (no
// oversell, per-user limits, one purchase in flight per user) and gives them back when the origin
// fails. Every admission is an event on the product's stream; a worker turns the events into the admin
// indexes (seed 003).
package admission

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
)

// Options configures the admission service.
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
	Backoff     []time.Duration // retries of a failing event: 1 s, 2 s, 4 s
	ClaimIdle   time.Duration   // pending events of a silent consumer are taken over after this: 30 s
	StreamBound int64           // approximate length bound of each product's event stream: 100,000
}

// Service is stock (and, later, bid) admission, its worker and its admin views.
type Service struct {
	o          Options
	client     redis.UniversalClient
	keys       store.Keys
	pseudonyms pseudonyms
	logger     *slog.Logger
	responder  *web.Responder
	metrics    *serviceMetrics
	products   productCache
	reads      auctionReads
	comp       compensations
}

// New builds the service; Run runs its event worker.
func New(o Options) *Service {
	if len(o.Backoff) == 0 {
		o.Backoff = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	}
	if o.ClaimIdle == 0 {
		o.ClaimIdle = 30 * time.Second
	}
	if o.StreamBound == 0 {
		o.StreamBound = 100_000
	}
	if o.ClaimTTL == 0 {
		o.ClaimTTL = time.Minute
	}
	return &Service{
		o: o, client: o.Store.Client, keys: o.Store.Keys, pseudonyms: newPseudonyms(o.IdentityKey),
		logger: o.Logger, responder: o.Responder, metrics: newMetrics(o.Registry),
		products: productCache{entries: map[string]cachedProduct{}},
		comp:     compensations{wake: make(chan struct{}, 1)},
		reads:    newAuctionReads(),
	}
}

// errUserMissing refuses an admission whose user cannot be identified.
var errUserMissing = web.ErrInvalidRequest.With("field", "user")

// Headers edgeq sends the origin on admitted requests.
const HeaderAdmissionID = "Edgeq-Admission-Id"

// Requirement is the route setting this step enforces (proxy.RequireAdmission).
func (s *Service) Requirement() string { return "admission" }

// Wrap returns the route's handler: next without admission, the stock or bid step otherwise.
func (s *Service) Wrap(route config.Route, next http.Handler) (http.Handler, error) {
	switch route.Admission.Type {
	case "":
		return next, nil
	case config.AdmissionStock:
		return s.stockStep(route, next)
	case config.AdmissionBid:
		return s.bidStep(route, next)
	}
	return nil, fmt.Errorf("unknown admission type %q", route.Admission.Type)
}

// admissionRequest is what a stock request asks for.
type admissionRequest struct {
	product  string
	quantity int64
	user     string // pseudonym
}

// stockStep builds the handler of a stock route from its sources (validated by config).
func (s *Service) stockStep(route config.Route, next http.Handler) (http.Handler, error) {
	a := route.Admission
	productSrc, err := config.ParseFieldSource(a.Product)
	if err != nil {
		return nil, err
	}
	var quantitySrc *config.FieldSource
	if a.Quantity != "" {
		src, err := config.ParseFieldSource(a.Quantity)
		if err != nil {
			return nil, err
		}
		quantitySrc = &src
	}
	userSrc, err := config.ParseUserSource(a.User)
	if err != nil {
		return nil, err
	}
	releaseOn, err := parseReleaseOn(a.ReleaseOn)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if web.RequestFrom(r.Context()).Store.Degraded {
			s.storeFailed(w, r, "stock", next, web.ErrDegraded, start)
			return
		}
		req, e := s.readStock(r, productSrc, quantitySrc, userSrc)
		if e != nil {
			s.refuseAs(w, r, "stock", e, start)
			return
		}
		id := s.o.IDs.NextString()
		res, err := reserveScript.Run(r.Context(), s.client, stockKeys(s.keys, req.product, req.user, id),
			id, req.user, req.quantity, s.o.ClaimTTL.Milliseconds(), int64(recordTTL/time.Second), s.o.StreamBound).Int64Slice()
		if err != nil || len(res) != 3 {
			// No answer: the script may have run. Its effect is undone as soon as the store answers.
			s.compensateLater(compensation{owner: req.product, user: req.user, id: id})
			s.storeFailed(w, r, "stock", next, fmt.Errorf("reserve: %v %v", res, err), start)
			return
		}
		if e := refusal(res[0], res[1], res[2]); e != nil {
			s.refuseAs(w, r, "stock", e, start)
			return
		}
		s.metrics.admissions.WithLabelValues("stock", "admitted").Inc()
		s.metrics.duration.WithLabelValues("stock").Observe(time.Since(start).Seconds())
		s.products.forget(req.product)
		r.Header.Set(HeaderAdmissionID, id)
		next.ServeHTTP(w, r)
		s.settle(r, req, id, releaseOn)
	}), nil
}

// recordTTL is how long an admission's record stays for release and commit to find.
const recordTTL = 24 * time.Hour

// readStock extracts and checks the fields of a stock request. Nothing is stored for a bad request.
func (s *Service) readStock(r *http.Request, productSrc config.FieldSource, quantitySrc *config.FieldSource, userSrc config.UserSource) (admissionRequest, *web.Error) {
	f := fields.New(r, s.o.MaxBodyBytes)
	product, found, e := f.Get(productSrc)
	if e != nil {
		return admissionRequest{}, e
	}
	if !found {
		return admissionRequest{}, web.ErrInvalidRequest.With("field", "product").Because(fmt.Errorf("no %s", productSrc))
	}
	if !config.ID.MatchString(product) {
		return admissionRequest{}, web.ErrInvalidRequest.With("field", "product").Because(fmt.Errorf("product %q", product))
	}
	req := admissionRequest{product: product, quantity: 1}
	if quantitySrc != nil {
		text, found, e := f.Get(*quantitySrc)
		if e != nil {
			return admissionRequest{}, e
		}
		if found {
			q, err := strconv.ParseInt(text, 10, 64)
			if err != nil || q < 1 || q > 1_000_000 {
				return admissionRequest{}, web.ErrInvalidRequest.With("field", "quantity").Because(fmt.Errorf("quantity %q", text))
			}
			req.quantity = q
		}
	}
	user, e := s.userOf(r, f, userSrc)
	if e != nil {
		return admissionRequest{}, e
	}
	req.user = s.pseudonyms.of(user)
	return req, nil
}

// userOf finds the raw user identity: the queue request id of the access token, or a cookie/header.
func (s *Service) userOf(r *http.Request, f *fields.Reader, src config.UserSource) (string, *web.Error) {
	if src.FromToken {
		id := web.RequestFrom(r.Context()).QueueRequestID
		if id == "" {
			return "", errUserMissing.Because(fmt.Errorf("no queue token on the request"))
		}
		return id, nil
	}
	v, found, e := f.Get(src.Field)
	if e != nil {
		return "", e
	}
	if !found || len(v) > 1024 {
		return "", errUserMissing.Because(fmt.Errorf("no %s", src.Field))
	}
	return v, nil
}

// refusal maps reserve.lua's answer to an error, nil when admitted.
func refusal(code, remaining, limit int64) *web.Error {
	switch code {
	case 0:
		return nil
	case 1:
		return web.ErrInsufficientStock.With("remaining_stock", remaining)
	case 2:
		return web.ErrProductNotFound
	case 3:
		return web.ErrPurchaseInProgress
	case 4:
		return web.ErrAlreadyPurchased.With("per_user_limit", limit)
	case 5:
		return web.ErrInvalidRequest.With("field", "quantity").With("per_user_limit", limit)
	}
	return web.ErrStoreUnavailable.Because(fmt.Errorf("reserve answered %d", code))
}

// storeFailed handles an admission that cannot use the store: the route's on_store_error decides
// (web.Request.StoreFailed). Open, the request goes to the origin without admission (counted as
// "bypassed"); closed, it is answered 503.
func (s *Service) storeFailed(w http.ResponseWriter, r *http.Request, typ string, next http.Handler, cause error, start time.Time) {
	if e := web.RequestFrom(r.Context()).StoreFailed("admission", cause); e != nil {
		s.refuseAs(w, r, typ, e, start)
		return
	}
	s.metrics.admissions.WithLabelValues(typ, "bypassed").Inc()
	s.metrics.duration.WithLabelValues(typ).Observe(time.Since(start).Seconds())
	next.ServeHTTP(w, r)
}

// refuseAs answers a refused admission of a type (stock, bid) without contacting the origin: JSON for
// API clients, a page for browsers (the sold-out page when out of stock).
func (s *Service) refuseAs(w http.ResponseWriter, r *http.Request, typ string, e *web.Error, start time.Time) {
	s.metrics.admissions.WithLabelValues(typ, resultLabel(e)).Inc()
	s.metrics.duration.WithLabelValues(typ).Observe(time.Since(start).Seconds())
	if e.Code == web.ErrInsufficientStock.Code && web.IsNavigation(r) {
		base := s.responder.Base(r)
		s.responder.Page(w, r, e.Status, "soldout.html", web.ErrorPage{PageBase: base, Status: e.Status, Code: e.Code})
		return
	}
	s.responder.Error(w, r, e)
}

// settle gives the units back when the origin's outcome is in release_on, and commits them otherwise.
// It outlives the visitor's connection: a unit must never stay reserved because the visitor left.
func (s *Service) settle(r *http.Request, req admissionRequest, id string, releaseOn []config.ReleaseOutcome) {
	o := web.OutcomeFrom(r.Context())
	release := releases(o, releaseOn)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	keys := stockKeys(s.keys, req.product, req.user, id)
	logger := web.RequestFrom(r.Context()).Logger()
	if release {
		res, err := releaseScript.Run(ctx, s.client, keys, id, s.o.StreamBound, int64(recordTTL/time.Second)).Int64Slice()
		if err != nil {
			logger.Warn("releasing an admission failed: retried until the store answers",
				"admission", id, "product", req.product, "error", err.Error())
			s.compensateLater(compensation{owner: req.product, user: req.user, id: id})
			return
		}
		s.metrics.admissions.WithLabelValues("stock", "released").Inc()
		s.products.forget(req.product)
		logger.Info("admission released", "admission", id, "product", req.product, "origin_status", statusOf(o), "result", res[0])
		return
	}
	if err := commitScript.Run(ctx, s.client, keys, id).Err(); err != nil {
		// The claim expires by itself (ClaimTTL); the units are kept either way.
		logger.Warn("committing an admission failed", "admission", id, "error", err.Error())
	}
}

func statusOf(o *web.Outcome) int {
	if o == nil {
		return 0
	}
	return o.Status
}

func resultLabel(e *web.Error) string {
	switch e.Code {
	case web.ErrInsufficientStock.Code:
		return "insufficient_stock"
	case web.ErrProductNotFound.Code:
		return "product_not_found"
	case web.ErrPurchaseInProgress.Code:
		return "purchase_in_progress"
	case web.ErrAlreadyPurchased.Code:
		return "already_purchased"
	case web.ErrStoreUnavailable.Code:
		return "store_unavailable"
	case web.ErrAuctionNotFound.Code:
		return "auction_not_found"
	case web.ErrAuctionEnded.Code:
		return "auction_ended"
	case web.ErrSelfBid.Code:
		return "self_bid"
	case web.ErrInvalidBid.Code:
		return "invalid_bid"
	case web.ErrBidTooLow.Code:
		return "bid_too_low"
	}
	return "invalid_request"
}

// Reserve runs reserve.lua alone for one unit of product, as user (already a pseudonym), under
// admission id. It is what every stock admission costs the store, exported for the benchmark that
// compares it with admissions through edgeq.
func Reserve(ctx context.Context, st *store.Store, product, user, id string) (code int64, err error) {
	res, err := reserveScript.Run(ctx, st.Client, stockKeys(st.Keys, product, user, id), id, user, 1,
		time.Minute.Milliseconds(), int64(recordTTL/time.Second), 100_000).Int64Slice()
	if err != nil || len(res) == 0 {
		return 0, fmt.Errorf("reserve: %v %v", res, err)
	}
	return res[0], nil
}
