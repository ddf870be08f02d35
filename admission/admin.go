package admission

// The admission admin API (docs/reference.md "Stock admission", "Bid admission"): its routes, what
// every kind's views share (paging, listOwners, the Edgeq-Source header of an answer read from the
// ledger), and the views of admissions: every one or a buyer's, newest first, from the ledger when it
// is on and from the store's indexes otherwise; one admission, and its deletion; the products' sales
// leaderboard. Unsettled admissions are in unsettled.go, dead letters in deadletters.go.

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/web"
)

const maxAdminBody = 64 << 10

// RegisterAdmin adds the admission admin API to the admin mux: every kind's
// views and the dead letters they share.
func (s *Service) RegisterAdmin(mux *http.ServeMux) {
	for _, k := range s.kinds {
		if v, ok := k.(viewedKind); ok {
			v.registerAdmin(mux)
		}
	}
	mux.HandleFunc("GET /api/dead-letters", s.adminDeadLetters)
	mux.HandleFunc("POST /api/dead-letters/{id}/retry", s.adminRetry)
	mux.HandleFunc("DELETE /api/dead-letters/{id}", s.adminDismiss)
}

// Register adds every kind's public reads under the prefix (GET {prefix}/products/{id}, the auction
// reads).
func (s *Service) Register(mux *http.ServeMux) {
	for _, k := range s.kinds {
		if v, ok := k.(viewedKind); ok {
			v.registerPublic(mux)
		}
	}
}

// rawJSON passes a stored JSON record through unchanged.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// listOwners answers an admin list of a kind's owners (products, auctions) sorted by id: every one,
// or a page of them with page and page_size (then only that page's owners are read with load).
func listOwners[T any](s *Service, w http.ResponseWriter, r *http.Request, k kind, load func(ctx context.Context, id string) (T, bool, error)) {
	page, size, e := web.Paging(r, 0)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	ids, err := s.client.SMembers(r.Context(), k.ownersKey()).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	slices.Sort(ids)
	lo, hi, size := web.Window(int64(len(ids)), page, size)
	items := []T{}
	for _, id := range ids[lo:hi] {
		item, found, err := load(r.Context(), id)
		if err != nil {
			s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		if found {
			items = append(items, item)
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": len(ids), "page": page, "page_size": size})
}

// headerSource tells, with the ledger on, where an admin history answer was read: "ledger", or
// "store" when the ledger could not be read (or did not have the record yet).
const headerSource = "Edgeq-Source"

func writeLedgerPage[T any](w http.ResponseWriter, items []T, total, page, size int64) {
	w.Header().Set(headerSource, "ledger")
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

// fromLedger answers a page of history from the ledger (read), each row as of makes it; false when
// the ledger could not be read (logged), and the store answers instead.
func fromLedger[R, T any](s *Service, w http.ResponseWriter, r *http.Request, page, size int64, of func(R) T, read func() ([]R, int64, error)) bool {
	rows, total, err := read()
	if err != nil {
		s.ledgerReadFailed(r, err)
		return false
	}
	items := make([]T, len(rows))
	for i, row := range rows {
		items[i] = of(row)
	}
	writeLedgerPage(w, items, total, page, size)
	return true
}

// ledgerReadFailed notes a history read that falls back to the store: the store keeps the last
// records_retention of records.
func (s *Service) ledgerReadFailed(r *http.Request, err error) {
	web.RequestFrom(r.Context()).Logger().Warn("ledger: reading the history failed; answering from the store", "error", err.Error())
}

// pathID is the path's {id} of a product or an auction; a malformed one is answered 400.
func (s *Service) pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !config.ID.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return "", false
	}
	return id, true
}

// paging reads page (from 1) and page_size (1..100, default 20).
func paging(r *http.Request) (page, size int64, e *web.Error) {
	return web.Paging(r, 20)
}

// pageOf lists a page of admissions, newest first: every buyer's (buyer "") or one buyer's, from
// the store's admin records (records.go).
func (s *Service) pageOf(ctx context.Context, buyer string, page, size int64) ([]Record, int64, error) {
	found, total, err := s.page(ctx, s.stock.table, buyer, page, size)
	if err != nil {
		return nil, 0, err
	}
	records := make([]Record, 0, len(found))
	for _, l := range found {
		if rec, ok := stockRecord(l.ref, l.stored); ok {
			records = append(records, rec)
		}
	}
	return records, total, nil
}

// writePage answers a page of admissions: from the ledger when it is on (buyer "" for every
// buyer's), from the store's admin records otherwise or when the ledger cannot be read.
func (s *Service) writePage(w http.ResponseWriter, r *http.Request, buyer string) {
	page, size, e := paging(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	if s.o.Ledger != nil && fromLedger(s, w, r, page, size, recordOf, func() ([]ledger.Admission, int64, error) {
		return s.o.Ledger.Admissions(r.Context(), buyer, page, size)
	}) {
		return
	}
	items, total, err := s.pageOf(r.Context(), buyer, page, size)
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

func (s *Service) adminAdmissions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch state := q.Get("state"); state {
	case "":
		if q.Has("older_than") {
			s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "older_than").With("problems", "older_than goes with state=admitted"))
			return
		}
		s.writePage(w, r, "")
	case "admitted":
		s.adminUnsettled(w, r)
	default:
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "state").With("problems", "state lists unsettled admissions: admitted"))
	}
}

var admissionIDSyntax = regexp.MustCompile(`^[0-9]{1,20}$`)

// record is an admission's admin record.
func (s *Service) record(ctx context.Context, id string) (Record, bool, error) {
	r, st, found, err := s.locate(ctx, s.stock.table, id)
	if err != nil || !found {
		return Record{}, false, err
	}
	rec, ok := stockRecord(r, st)
	return rec, ok, nil
}

func (s *Service) adminAdmission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !admissionIDSyntax.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	if s.o.Ledger != nil {
		a, found, err := s.o.Ledger.Admission(r.Context(), id)
		if err == nil && found {
			w.Header().Set(headerSource, "ledger")
			web.WriteJSON(w, http.StatusOK, recordOf(a))
			return
		}
		if err != nil {
			s.ledgerReadFailed(r, err)
		}
		// Not in the ledger (yet): the store may have it, the ledger a moment behind.
	}
	rec, found, err := s.record(r.Context(), id)
	switch {
	case err != nil:
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !found:
		s.responder.Error(w, r, web.ErrAdmissionNotFound)
	default:
		web.WriteJSON(w, http.StatusOK, rec)
	}
}

// adminDeleteAdmission removes an admission record and every index that names it in one transaction,
// so no index is left pointing at nothing. Stock and sales are not changed: this deletes
// the record of a sale, it does not undo the sale.
func (s *Service) adminDeleteAdmission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !admissionIDSyntax.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	deleted, err := s.deleteRecord(r.Context(), s.stock.table, id)
	switch {
	case errors.Is(err, errUnsettled):
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id").With("problems", err.Error()))
	case err != nil:
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !deleted:
		s.responder.Error(w, r, web.ErrAdmissionNotFound)
	default:
		web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	}
}

var pseudonymSyntax = regexp.MustCompile(`^[0-9a-f]{32}$`)

// userParam is the pseudonym of the path's {user}: the user id as the route sees it (the cookie or
// header value, or the queue request id), or, with ?pseudonym=1, the pseudonym the records show.
func (s *Service) userParam(r *http.Request) (string, *web.Error) {
	user := r.PathValue("user")
	if r.URL.Query().Get("pseudonym") != "1" {
		return s.pseudonyms.identity(user, "path")
	}
	if !pseudonymSyntax.MatchString(user) {
		return "", web.ErrInvalidRequest.With("field", "user")
	}
	return user, nil
}

// adminUserAdmissions lists a user's admissions (userParam), newest first.
func (s *Service) adminUserAdmissions(w http.ResponseWriter, r *http.Request) {
	user, e := s.userParam(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	s.writePage(w, r, user)
}

// adminLeaderboard lists the products by sales, highest first (ties by id): the units held, which
// each product's own counters give (total stock less remaining stock), read live in one pipeline.
func (s *Service) adminLeaderboard(w http.ResponseWriter, r *http.Request) {
	limit := int64(10)
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 100 {
			s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "limit"))
			return
		}
		limit = n
	}
	sales, err := s.sales(r.Context())
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	items := make([]map[string]any, 0, min(int64(len(sales)), limit))
	for _, p := range sales[:min(int64(len(sales)), limit)] {
		items = append(items, map[string]any{"product_id": p.id, "sales": p.units})
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

type productSales struct {
	id    string
	units int64
}

// sales is every product with sales above 0, highest first.
func (s *Service) sales(ctx context.Context) ([]productSales, error) {
	ids, err := s.client.SMembers(ctx, productIndexKey(s.keys)).Result()
	if err != nil {
		return nil, err
	}
	pipe := s.client.Pipeline()
	totals := make([]*redis.StringCmd, len(ids))
	stocks := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		totals[i] = pipe.HGet(ctx, infoKey(s.keys, id), "total_stock")
		stocks[i] = pipe.Get(ctx, stockKey(s.keys, id))
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	out := make([]productSales, 0, len(ids))
	for i, id := range ids {
		total, err1 := totals[i].Int64()
		remaining, err2 := stocks[i].Int64()
		if err1 != nil || err2 != nil || total-remaining <= 0 {
			continue // gone, or nothing sold
		}
		out = append(out, productSales{id, total - remaining})
	}
	slices.SortFunc(out, func(a, b productSales) int {
		return cmp.Or(cmp.Compare(b.units, a.units), cmp.Compare(a.id, b.id))
	})
	return out, nil
}
