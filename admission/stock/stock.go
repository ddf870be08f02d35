// Package stock is stock admission, an admission kind of its own package (docs/architecture.md
// "Adding an admission kind"): a purchase is admitted only while its product has units left, one
// in-flight purchase per buyer and product, within the per-user limit, and reserve.lua calls carry
// the purchases of a product that arrive together (reserver.go). It owns its route fields' reading,
// its refusals and their texts in every language (texts/), its Lua (scripts/), its keys, its
// products (the configuration file's and the admin API's), the sold-out page, the orphan sweep, its
// public reads, admin views and "mine" listing, its ledger rows and its report series. It registers
// itself from its init: an import links it.
package stock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/group"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// stockKind is stock admission (docs/reference.md "Stock admission"): one script reserves the
// units of a product (a per-user in-flight claim, the per-user limit, no oversell) and records the
// buyer; the origin's answer commits or releases them.
type stockKind struct {
	admission.About
	s        *admission.Service
	products productCache          // public product reads (products.go)
	list     productList           // the public product list (products.go)
	table    *admission.AdminTable // the admissions' admin records (admission/records.go)
	// reserves groups each product's purchases (and commits) into reserve.lua calls
	// (reserver.go).
	reserves *group.Batcher[string, admission.Claim, Reserved]
	// buyers is how GET {prefix}/admissions/mine identifies a buyer (admission/mine.go); follows reloads.
	buyers atomic.Pointer[admission.MineIdentity]
	// orphanPolicies: stock route name -> admission.orphans (orphans.go); follows reloads.
	orphanPolicies atomic.Pointer[map[string]string]
	metrics        stockMetrics
}

func init() {
	admission.Register(10, config.AdmissionKind{Type: products.Kind, Owner: "product", Value: "quantity",
		Orphans: true, Fields: []string{"product", "quantity"}}, newStockKind)
	registerTable()
}

func newStockKind(s *admission.Service) admission.Kind {
	k := &stockKind{About: admission.About{Type: products.Kind, OwnerNoun: "product", IDHeader: HeaderAdmissionID,
		Unknown: errProductNotFound, Codes: []*web.Error{errInsufficientStock, errProductNotFound, errPurchaseInProgress, errAlreadyPurchased}},
		s: s, products: productCache{entries: map[string]cachedProduct{}}, table: stockTable(s.Keys()),
		metrics: newStockMetrics(s.Registry())}
	k.reserves = k.newReserver()
	none := map[string]string{}
	k.orphanPolicies.Store(&none)
	return k
}

func (k *stockKind) Run(ctx context.Context)                               { k.reserves.Run(ctx) }
func (k *stockKind) MineIdentity() *atomic.Pointer[admission.MineIdentity] { return &k.buyers }
func (k *stockKind) AdminTable() *admission.AdminTable                     { return k.table }

// Busy: the user's previous purchase of the product is still in flight.
func (*stockKind) Busy() *web.Error { return errPurchaseInProgress }

// Use takes the stock routes' orphans settings.
func (k *stockKind) Use(cfg *config.Config) error {
	k.UseOrphans(cfg.Routes)
	return nil
}

// RideCommit: a stock admission's commit rides the product's next reservation call (the reserver
// sends one at once when none is on its way): no call or round trip of its own.
func (k *stockKind) RideCommit(c admission.Claim, done func(applied bool)) bool {
	rides := c
	rides.Commit = true
	return k.reserves.Go(c.Owner, rides, func(r Reserved, err error) { done(err == nil && !r.NotAcked) })
}

// Sweep sets the unsettled gauge and applies the orphans settings (orphans.go).
func (k *stockKind) Sweep(ctx context.Context) {
	if n, err := k.unsettledCount(ctx, time.Now().Add(-UnsettledAfter)); err == nil {
		k.metrics.unsettled.Set(float64(n))
	}
	k.sweepOrphans(ctx)
}

// HeaderAdmissionID carries a stock admission's id to the origin.
const HeaderAdmissionID = "Edgeq-Admission-Id"

// Stock is no Discoverer: products come from the configuration file and the admin API only.

// Value is the quantity: 1 when the route or the request gives none.
func (*stockKind) Value(text string, found bool) (int64, *web.Error) {
	if !found {
		return 1, nil
	}
	q, err := strconv.ParseInt(text, 10, 64)
	if err != nil || q < 1 || q > 1_000_000 {
		return 0, web.ErrInvalidRequest.With("field", "quantity").Because(fmt.Errorf("quantity %q", fields.Clip(text)))
	}
	return q, nil
}

func (k *stockKind) keys(c admission.Claim) []string { return stockKeys(k.s.Keys(), c.Owner, c.ID) }

func (k *stockKind) Reserve(ctx context.Context, c admission.Claim) (*web.Error, error) {
	r, err := k.reserveOne(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	if r.NotAcked {
		return nil, fmt.Errorf("reserve: %w", store.ErrNotAcked)
	}
	return stockRefusal(r.Code, r.Remaining, r.Limit), nil
}

// stockRefusal maps reserve.lua's answer to a refusal, nil when admitted.
func stockRefusal(code, remaining, limit int64) *web.Error {
	switch code {
	case 0:
		return nil
	case 1:
		return errInsufficientStock.With("remaining_stock", remaining)
	case 2:
		return errProductNotFound
	case 3:
		return errPurchaseInProgress
	case 4:
		return errAlreadyPurchased.With("per_user_limit", limit)
	case 5:
		return web.ErrInvalidRequest.With("field", "quantity").With("per_user_limit", limit)
	}
	return web.ErrStoreUnavailable.Because(fmt.Errorf("reserve answered %d", code))
}

func (k *stockKind) Release(ctx context.Context, c admission.Claim) (int64, error) {
	res, err := releaseScript.Run(ctx, k.s.Client(), k.keys(c), c.ID, k.recordKeep()).Int64Slice()
	if err != nil || len(res) != 2 {
		return 0, fmt.Errorf("release: %v %v", res, err)
	}
	return res[0], nil
}

func (k *stockKind) Commit(ctx context.Context, c admission.Claim) error {
	return commitScript.Run(ctx, k.s.Client(), k.keys(c), c.ID, admission.Flag(k.s.Ledger() != nil), c.User).Err()
}

// Commits: a stock admission's commit ends it (it leaves the unsettled set).
func (*stockKind) Commits() bool { return true }

func (k *stockKind) Record(c admission.Claim) string { return recordsKey(k.s.Keys(), c.Owner, c.ID) }

func (k *stockKind) UnsettledSet(product string) string { return unsettledKey(k.s.Keys(), product) }

func (k *stockKind) Claims(product string) string { return claimsKey(k.s.Keys(), product) }

func (k *stockKind) Forget(product string) { k.products.forget(product) }

// RefusalPage: a shopper whose purchase meets an empty stock sees the sold-out page.
func (*stockKind) RefusalPage(e *web.Error) string {
	if e.Code == errInsufficientStock.Code {
		return "soldout.html"
	}
	return ""
}

// Reserve runs reserve.lua once for cs, claims on one product whose users are already pseudonyms, as
// the kind's batcher sends the purchases that arrive together, on svc's stock kind: the answers in cs's
// order. It is what the store pays for stock admissions, for the benchmark that compares it with
// admissions through edgeq, and for tests that group purchases themselves.
func Reserve(ctx context.Context, svc *admission.Service, product string, cs []admission.Claim) ([]Reserved, error) {
	res, err := svc.Kind(products.Kind).(*stockKind).reserveNow(ctx, product, cs)
	if err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	return res, nil
}

// Record is an admission as the admin API shows it, written by the worker from the events.
type Record struct {
	ID         string `json:"id"`
	ProductID  string `json:"product_id"`
	User       string `json:"user"` // pseudonym
	Quantity   int64  `json:"quantity"`
	State      string `json:"state"` // admitted, committed (ledger only), released, cancelled
	AdmittedAt string `json:"admitted_at"`
	ReleasedAt string `json:"released_at,omitempty"`
	// CancelledAt is when an operator cancelled it (POST /api/admissions/{id}/cancel).
	CancelledAt string `json:"cancelled_at,omitempty"`
	// CommittedAt is when the shop's answer kept it; only the ledger records it (with the ledger on,
	// the admin lists read it from there).
	CommittedAt string `json:"committed_at,omitempty"`
	// Reason says why a released admission was given back when it was not the shop's answer:
	// "orphaned" (its replica died before settling it, and the route says orphans: release); and, in
	// the unsettled list, why one is held: "ambiguous" (the whole request reached the shop and its
	// answer never came: the shop may have sold the unit).
	Reason string `json:"reason,omitempty"`
	// Orphan, in the unsettled list: "held" when its replica died and its route says orphans: hold.
	Orphan string `json:"orphan,omitempty"`
}

func (k *stockKind) OwnersKey() string            { return productIndexKey(k.s.Keys()) }
func (k *stockKind) SpellingsKey() string         { return productSpellingsKey(k.s.Keys()) }
func (k *stockKind) Stream(product string) string { return eventsKey(k.s.Keys(), product) }

func (k *stockKind) AdmitsStream(product string) string { return admitsKey(k.s.Keys(), product) }

// Parse reads an entry of a product's streams (written by reserve.lua, release.lua, cancel.lua and,
// with the ledger on, the commit scripts). The admin records are the scripts' own, so only an
// admission is indexed: what gave its units back changed its record already, and a "committed" entry
// is for the ledger alone.
func (k *stockKind) Parse(product string, msg redis.XMessage) ([]admission.Application, error) {
	recs, _, err := parseAdmissions(product, msg)
	if err != nil {
		return nil, err
	}
	apps := make([]admission.Application, 0, len(recs))
	for _, rec := range recs {
		if rec.State == "admitted" {
			apps = append(apps, admission.Application{Table: k.table, Owner: product, ID: rec.ID, User: rec.User})
		}
	}
	return apps, nil
}

// parseAdmissions reads an entry of either of a product's streams: an entry of the admits stream
// names every purchase of one reserve.lua call or every admission of one commits.lua call; an entry
// of the events stream names one admission (as did the admitted entries of builds before the admits
// stream).
func parseAdmissions(product string, msg redis.XMessage) ([]Record, int64, error) {
	if _, grouped := msg.Values["admissions"]; grouped {
		return parseAdmitted(product, msg)
	}
	rec, at, err := parseAdmission(product, msg)
	if err != nil {
		return nil, 0, err
	}
	return []Record{rec}, at, nil
}

// parseAdmitted reads a grouped entry of the admissions stream: reserve.lua's (type "admitted", the
// call's time and the space-separated lists admissions, users and qtys, one item per purchase
// admitted) or commits.lua's (type "committed", committed_at and the admissions committed).
func parseAdmitted(product string, msg redis.XMessage) ([]Record, int64, error) {
	e := admission.Entry(msg)
	ids, users, qtys := strings.Fields(e.Str("admissions")), strings.Fields(e.Str("users")), strings.Fields(e.Str("qtys"))
	if e.Str("type") == "committed" {
		c, err := e.Num("committed_at")
		if err != nil || len(ids) == 0 {
			return nil, 0, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
		}
		committedAt := vocab.FormatUnixMilli(c)
		recs := make([]Record, len(ids))
		for i, id := range ids {
			recs[i] = Record{ID: id, ProductID: product, State: "committed", CommittedAt: committedAt}
		}
		return recs, 0, nil
	}
	at, err := e.Num("at")
	if e.Str("type") != "admitted" || err != nil || len(ids) == 0 || len(users) != len(ids) || len(qtys) != len(ids) {
		return nil, 0, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
	}
	admittedAt := vocab.FormatUnixMilli(at)
	recs := make([]Record, len(ids))
	for i, id := range ids {
		qty, err := strconv.ParseInt(qtys[i], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("malformed event %s: qty %q", msg.ID, qtys[i])
		}
		recs[i] = Record{ID: id, ProductID: product, User: users[i], Quantity: qty, State: "admitted", AdmittedAt: admittedAt}
	}
	return recs, at, nil
}

// parseAdmission reads an entry of a product's stream into the admission it records (for a
// "committed" entry only its id and state) and the admission's time in milliseconds.
func parseAdmission(product string, msg redis.XMessage) (Record, int64, error) {
	e := admission.Entry(msg)
	typ := e.Str("type")
	if typ == "committed" {
		c, err := e.Num("committed_at")
		if e.Str("admission") == "" || err != nil {
			return Record{}, 0, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
		}
		return Record{ID: e.Str("admission"), ProductID: product, State: typ,
			CommittedAt: vocab.FormatUnixMilli(c)}, 0, nil
	}
	qty, err1 := e.Num("qty")
	at, err2 := e.Num("at")
	if typ != "admitted" && typ != "released" && typ != "cancelled" || e.Str("admission") == "" || e.Str("user") == "" || errors.Join(err1, err2) != nil {
		return Record{}, 0, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
	}
	rec := Record{ID: e.Str("admission"), ProductID: product, User: e.Str("user"), Quantity: qty,
		State: typ, AdmittedAt: vocab.FormatUnixMilli(at)}
	if typ == "released" {
		rel, err := e.Num("released_at")
		if err != nil {
			return Record{}, 0, fmt.Errorf("malformed event %s: released_at", msg.ID)
		}
		rec.ReleasedAt, rec.Reason = vocab.FormatUnixMilli(rel), e.Str("reason")
	}
	if typ == "cancelled" {
		c, err := e.Num("cancelled_at")
		if err != nil {
			return Record{}, 0, fmt.Errorf("malformed event %s: cancelled_at", msg.ID)
		}
		rec.CancelledAt = vocab.FormatUnixMilli(c)
	}
	return rec, at, nil
}

func (k *stockKind) RegisterPublic(mux *http.ServeMux) {
	mux.HandleFunc("GET "+k.s.Prefix()+"/products/{id}", k.handleProduct)
	mux.HandleFunc("GET "+k.s.Prefix()+"/products", k.handleProducts)
	mux.HandleFunc("GET "+k.s.Prefix()+"/admissions/mine", k.handleMyAdmissions)
}

// RegisterAdmin adds the product and admission admin views.
func (k *stockKind) RegisterAdmin(admin *http.ServeMux) {
	admin.HandleFunc("POST /api/products", k.adminCreateProduct)
	admin.HandleFunc("POST /api/products/{id}/restock", k.adminRestock)
	admin.HandleFunc("DELETE /api/products/{id}", k.adminDeleteProduct)
	admin.HandleFunc("GET /api/products", k.adminListProducts)
	admin.HandleFunc("GET /api/products/{id}", k.adminGetProduct)
	admin.HandleFunc("GET /api/admissions", k.adminAdmissions)
	admin.HandleFunc("GET /api/admissions/{id}", k.adminAdmission)
	admin.HandleFunc("DELETE /api/admissions/{id}", k.adminDeleteAdmission)
	admin.HandleFunc("POST /api/admissions/{id}/cancel", k.adminCancel)
	admin.HandleFunc("POST /api/admissions/{id}/commit", k.adminCommit)
	admin.HandleFunc("GET /api/users/{user}/admissions", k.adminUserAdmissions)
	admin.HandleFunc("GET /api/leaderboard", k.adminLeaderboard)
}

// admissionState is the state of an admission whose record under its product says stored: a commit
// takes an admission out of its product's unsettled set and leaves the record "admitted"
// (commits.lua), so an admitted record outside the set is committed.
func admissionState(stored string, unsettled bool) string {
	if stored == "admitted" && !unsettled {
		return "committed"
	}
	return stored
}

// productRecord finds an admission by its record under its product (kept a day or two), for when the admin
// indexes do not have it yet.
func (k *stockKind) productRecord(ctx context.Context, id string) (Record, bool, error) {
	s := k.s
	products, err := s.Client().SMembers(ctx, productIndexKey(s.Keys())).Result()
	if err != nil {
		return Record{}, false, err
	}
	refs := make([]recordRef, len(products))
	for i, p := range products {
		refs[i] = recordRef{p, id}
	}
	recs, err := k.storeRecords(ctx, refs)
	if err != nil {
		return Record{}, false, err
	}
	for i, p := range products {
		h := recs[i]
		if h == nil {
			continue
		}
		qty, err1 := strconv.ParseInt(h.qty, 10, 64)
		at, err2 := strconv.ParseInt(h.at, 10, 64)
		if h.user == "" || errors.Join(err1, err2) != nil {
			continue // not this product's (or a tombstone)
		}
		_, err = s.Client().ZScore(ctx, unsettledKey(s.Keys(), p), id).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Record{}, false, err
		}
		return Record{ID: id, ProductID: p, User: h.user, Quantity: qty, State: admissionState(h.state, err == nil),
			AdmittedAt: vocab.FormatUnixMilli(at)}, true, nil
	}
	return Record{}, false, nil
}

// The report: a product's units admitted and settled, and its stock sampled each tick.
func (*stockKind) ReportScope() report.Kind { return report.Product }
func (*stockKind) ReportAdmitted(c admission.Claim) (string, int64) {
	return report.Admitted, max(c.Value, 1)
}
func (*stockKind) ReportSettled(c admission.Claim) int64 { return max(c.Value, 1) }
func (k *stockKind) ReportExtra(id string) report.Extra {
	return report.Extra{Aux: stockKey(k.s.Keys(), id), AuxGauge: report.Stock, Firsts: report.Admitted, Zeros: report.Stock}
}

// productReport is a product's scope in the report.
func (k *stockKind) productReport(product string) *report.Scope {
	s := k.s
	return s.ReportScope(report.Product, product)
}
