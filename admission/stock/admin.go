package stock

// The stock admin views (docs/reference.md "Stock admission"): admissions, every one or a buyer's,
// newest first, from the ledger when it is on and from the store's indexes otherwise; one admission,
// and its deletion; the products' sales leaderboard. Unsettled admissions are in unsettled.go.

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/redis/go-redis/v9"
)

// pageOf lists a page of admissions, newest first: every buyer's (buyer "") or one buyer's, from
// the store's admin records (admission/records.go).
func (k *stockKind) pageOf(ctx context.Context, buyer string, page, size int64) ([]Record, int64, error) {
	s := k.s
	found, total, err := s.ReadStored(ctx, k.table, buyer, page, size)
	if err != nil {
		return nil, 0, err
	}
	records := make([]Record, 0, len(found))
	for _, l := range found {
		if rec, ok := stockRecord(l); ok {
			records = append(records, rec)
		}
	}
	return records, total, nil
}

// writePage answers a page of admissions: from the ledger when it is on (buyer "" for every
// buyer's), from the store's admin records otherwise or when the ledger cannot be read.
func (k *stockKind) writePage(w http.ResponseWriter, r *http.Request, buyer string) {
	s := k.s
	page, size, e := admission.Paging(r)
	if e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	if s.Ledger() != nil && admission.FromLedger(s, w, r, page, size, recordOf, func() ([]Row, int64, error) {
		return ledgerPage(r.Context(), s.Ledger(), buyer, page, size)
	}) {
		return
	}
	items, total, err := k.pageOf(r.Context(), buyer, page, size)
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

func (k *stockKind) adminAdmissions(w http.ResponseWriter, r *http.Request) {
	s := k.s
	q := r.URL.Query()
	switch state := q.Get("state"); state {
	case "":
		if q.Has("older_than") {
			s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "older_than").With("problems", "older_than goes with state=admitted"))
			return
		}
		k.writePage(w, r, "")
	case "admitted":
		k.adminUnsettled(w, r)
	default:
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "state").With("problems", "state lists unsettled admissions: admitted"))
	}
}

var admissionIDSyntax = regexp.MustCompile(`^[0-9]{1,20}$`)

// admissionID is the path's {id}, an admission id; a malformed one is answered 400.
func (k *stockKind) admissionID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !admissionIDSyntax.MatchString(id) {
		k.s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return "", false
	}
	return id, true
}

// adminRecord is an admission's admin record.
func (k *stockKind) adminRecord(ctx context.Context, id string) (Record, bool, error) {
	s := k.s
	st, found, err := s.FindStored(ctx, k.table, id)
	if err != nil || !found {
		return Record{}, false, err
	}
	rec, ok := stockRecord(st)
	return rec, ok, nil
}

func (k *stockKind) adminAdmission(w http.ResponseWriter, r *http.Request) {
	s := k.s
	id, ok := k.admissionID(w, r)
	if !ok {
		return
	}
	if s.Ledger() != nil {
		a, found, err := ledgerRow(r.Context(), s.Ledger(), id)
		if err == nil && found {
			w.Header().Set(admission.HeaderSource, "ledger")
			web.WriteJSON(w, http.StatusOK, recordOf(a))
			return
		}
		if err != nil {
			s.LedgerReadFailed(r, err)
		}
		// Not in the ledger (yet): the store may have it, the ledger a moment behind.
	}
	rec, found, err := k.adminRecord(r.Context(), id)
	s.WriteFound(w, r, rec, found, err, errAdmissionNotFound)
}

// adminDeleteAdmission removes an admission record and every index that names it in one transaction,
// so no index is left pointing at nothing. Stock and sales are not changed: this deletes
// the record of a sale, it does not undo the sale.
func (k *stockKind) adminDeleteAdmission(w http.ResponseWriter, r *http.Request) {
	s := k.s
	id, ok := k.admissionID(w, r)
	if !ok {
		return
	}
	deleted, err := s.DeleteRecord(r.Context(), k.table, id)
	switch {
	case errors.Is(err, admission.ErrUnsettled):
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "id").With("problems", err.Error()))
	case err != nil:
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !deleted:
		s.Responder().Error(w, r, errAdmissionNotFound)
	default:
		web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	}
}

// adminUserAdmissions lists a user's admissions (userParam), newest first.
func (k *stockKind) adminUserAdmissions(w http.ResponseWriter, r *http.Request) {
	s := k.s
	user, ok := s.PathUser(w, r)
	if !ok {
		return
	}
	k.writePage(w, r, user)
}

// adminLeaderboard lists the products by sales, highest first (ties by id): the units held, which
// each product's own counters give (total stock less remaining stock), read live in one pipeline.
func (k *stockKind) adminLeaderboard(w http.ResponseWriter, r *http.Request) {
	s := k.s
	limit := int64(10)
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 100 {
			s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "limit"))
			return
		}
		limit = n
	}
	sales, err := k.sales(r.Context())
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
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
func (k *stockKind) sales(ctx context.Context) ([]productSales, error) {
	s := k.s
	ids, err := s.Client().SMembers(ctx, productIndexKey(s.Keys())).Result()
	if err != nil {
		return nil, err
	}
	pipe := s.Client().Pipeline()
	totals := make([]*redis.StringCmd, len(ids))
	stocks := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		totals[i] = pipe.HGet(ctx, infoKey(s.Keys(), id), "total_stock")
		stocks[i] = pipe.Get(ctx, stockKey(s.Keys(), id))
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
