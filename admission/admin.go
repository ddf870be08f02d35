package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

const maxAdminBody = 64 << 10

// RegisterAdmin adds the product and admission admin API (CONTRACT section 7) to the admin mux.
func (s *Service) RegisterAdmin(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/products", s.adminCreateProduct)
	mux.HandleFunc("POST /api/products/{id}/restock", s.adminRestock)
	mux.HandleFunc("DELETE /api/products/{id}", s.adminDeleteProduct)
	mux.HandleFunc("GET /api/products", s.adminListProducts)
	mux.HandleFunc("GET /api/admissions", s.adminAdmissions)
	mux.HandleFunc("GET /api/admissions/{id}", s.adminAdmission)
	mux.HandleFunc("DELETE /api/admissions/{id}", s.adminDeleteAdmission)
	mux.HandleFunc("GET /api/users/{user}/admissions", s.adminUserAdmissions)
	mux.HandleFunc("GET /api/leaderboard", s.adminLeaderboard)
	mux.HandleFunc("GET /api/dead-letters", s.adminDeadLetters)
	mux.HandleFunc("POST /api/dead-letters/{id}/retry", s.adminRetry)
	mux.HandleFunc("PUT /api/auctions/{id}", s.adminPutAuction)
	mux.HandleFunc("GET /api/auctions/{id}", s.adminGetAuction)
	mux.HandleFunc("GET /api/auctions", s.adminListAuctions)
	mux.HandleFunc("GET /api/users/{user}/bids", s.adminUserBids)
}

// rawJSON passes a stored JSON record through unchanged.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func (s *Service) adminCreateProduct(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID           *string `json:"id"`
		Stock        *int64  `json:"stock"`
		PerUserLimit *int    `json:"per_user_limit"`
		Name         string  `json:"name"`
		Price        int64   `json:"price"`
		ImageURL     string  `json:"image_url"`
	}
	if e := fields.DecodeJSON(w, r, maxAdminBody, &body); e != nil {
		s.responder.Error(w, r, e)
		return
	}
	if body.ID == nil || body.Stock == nil {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("problems", "id and stock are required"))
		return
	}
	p := config.Product{ID: *body.ID, Stock: *body.Stock, PerUserLimit: 1, Name: body.Name, Price: body.Price, ImageURL: body.ImageURL}
	if body.PerUserLimit != nil {
		p.PerUserLimit = *body.PerUserLimit
	}
	if err := config.ValidateProduct(p); err != nil {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("problems", config.OneLine(err)).Because(err))
		return
	}
	if _, err := s.writeProduct(r.Context(), "create", p); err != nil {
		if errors.Is(err, errProductExists) {
			s.responder.Error(w, r, web.ErrProductExists)
			return
		}
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	s.writeProductJSON(w, r, p.ID)
}

func (s *Service) writeProductJSON(w http.ResponseWriter, r *http.Request, id string) {
	p, found, err := s.product(r.Context(), id)
	switch {
	case err != nil:
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !found:
		s.responder.Error(w, r, web.ErrProductNotFound)
	default:
		web.WriteJSON(w, http.StatusOK, p)
	}
}

func (s *Service) adminRestock(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	amount, e := s.amount(w, r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	if !config.ID.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	res, err := restockScript.Run(r.Context(), s.client, []string{infoKey(s.keys, id), stockKey(s.keys, id)}, amount).Int64Slice()
	if err != nil || len(res) != 2 {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(fmt.Errorf("restock: %v %v", res, err)))
		return
	}
	if res[0] == 1 {
		s.responder.Error(w, r, web.ErrProductNotFound)
		return
	}
	s.products.forget(id)
	s.writeProductJSON(w, r, id)
}

// amount reads the restock amount from a JSON body {"amount": n} or a form field.
func (s *Service) amount(w http.ResponseWriter, r *http.Request) (int64, *web.Error) {
	var amount int64
	if r.Header.Get("Content-Type") == "application/json" {
		var body struct {
			Amount *int64 `json:"amount"`
		}
		if e := fields.DecodeJSON(w, r, maxAdminBody, &body); e != nil {
			return 0, e
		}
		if body.Amount == nil {
			return 0, web.ErrInvalidRequest.With("field", "amount")
		}
		amount = *body.Amount
	} else {
		r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
		n, err := strconv.ParseInt(r.PostFormValue("amount"), 10, 64)
		if err != nil {
			return 0, web.ErrInvalidRequest.With("field", "amount")
		}
		amount = n
	}
	if amount < 1 || amount > 1_000_000_000 {
		return 0, web.ErrInvalidRequest.With("field", "amount").With("problems", "amount must be 1..1000000000")
	}
	return amount, nil
}

func (s *Service) adminDeleteProduct(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !config.ID.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	// One slot, one command: the product, its stock, its buyers and its events go together.
	n, err := s.client.Del(r.Context(), infoKey(s.keys, id), stockKey(s.keys, id), buyersKey(s.keys, id), eventsKey(s.keys, id)).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	s.client.SRem(r.Context(), productIndexKey(s.keys), id)
	s.products.forget(id)
	if n == 0 {
		s.responder.Error(w, r, web.ErrProductNotFound)
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// adminListProducts lists the products sorted by id: every one, or a page of them with page and
// page_size (then only that page's products are read).
func (s *Service) adminListProducts(w http.ResponseWriter, r *http.Request) {
	page, size, e := web.Paging(r, 0)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	ids, err := s.client.SMembers(r.Context(), productIndexKey(s.keys)).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	slices.Sort(ids)
	lo, hi, size := web.Window(int64(len(ids)), page, size)
	items := []Product{}
	for _, id := range ids[lo:hi] {
		p, found, err := s.product(r.Context(), id)
		if err != nil {
			s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		if found {
			items = append(items, p)
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": len(ids), "page": page, "page_size": size})
}

// paging reads page (from 1) and page_size (1..100, default 20).
func paging(r *http.Request) (page, size int64, e *web.Error) {
	return web.Paging(r, 20)
}

// pageOf lists an index newest first: ZREVRANGE for the page's ids, then one MGET for their records
// (seed 003). Equal times are ordered by id, so pages are stable.
func (s *Service) pageOf(ctx context.Context, index string, page, size int64) ([]Record, int64, error) {
	total, err := s.client.ZCard(ctx, index).Result()
	if err != nil {
		return nil, 0, err
	}
	start := (page - 1) * size
	ids, err := s.client.ZRevRange(ctx, index, start, start+size-1).Result()
	if err != nil || len(ids) == 0 {
		return []Record{}, total, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = admissionKey(s.keys, id)
	}
	values, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, 0, err
	}
	records := make([]Record, 0, len(values))
	for _, v := range values {
		if str, ok := v.(string); ok {
			var rec Record
			if json.Unmarshal([]byte(str), &rec) == nil {
				records = append(records, rec)
			}
		}
	}
	return records, total, nil
}

func (s *Service) writePage(w http.ResponseWriter, r *http.Request, index string) {
	page, size, e := paging(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	items, total, err := s.pageOf(r.Context(), index, page, size)
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

func (s *Service) adminAdmissions(w http.ResponseWriter, r *http.Request) {
	s.writePage(w, r, byTimeKey(s.keys))
}

var admissionIDSyntax = regexp.MustCompile(`^[0-9]{1,20}$`)

func (s *Service) record(ctx context.Context, id string) (Record, bool, error) {
	v, err := s.client.Get(ctx, admissionKey(s.keys, id)).Result()
	if errors.Is(err, redis.Nil) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	var rec Record
	return rec, json.Unmarshal([]byte(v), &rec) == nil, nil
}

func (s *Service) adminAdmission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !admissionIDSyntax.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
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

// adminDeleteAdmission removes an admission record and every index that names it in one transaction
// (seed 003), so no index is left pointing at nothing. Stock and sales are not changed: this deletes
// the record of a sale, it does not undo the sale.
func (s *Service) adminDeleteAdmission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !admissionIDSyntax.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	ctx := r.Context()
	key := admissionKey(s.keys, id)
	deleted := false
	err := s.client.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			return err
		}
		var rec Record
		if err := json.Unmarshal([]byte(v), &rec); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			p.ZRem(ctx, byTimeKey(s.keys), id)
			p.ZRem(ctx, userKey(s.keys, rec.User), id)
			return nil
		})
		deleted = err == nil
		return err
	}, key)
	switch {
	case err != nil:
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !deleted:
		s.responder.Error(w, r, web.ErrAdmissionNotFound)
	default:
		web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	}
}

var pseudonymSyntax = regexp.MustCompile(`^[0-9a-f]{32}$`)

// adminUserAdmissions lists a user's admissions. {user} is the user id as the route sees it (the cookie
// or header value, or the queue request id); with ?pseudonym=1 it is the pseudonym the records show.
func (s *Service) adminUserAdmissions(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	if r.URL.Query().Get("pseudonym") == "1" {
		if !pseudonymSyntax.MatchString(user) {
			s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "user"))
			return
		}
	} else {
		user = s.pseudonyms.of(user)
	}
	s.writePage(w, r, userKey(s.keys, user))
}

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
	rows, err := s.client.ZRevRangeByScoreWithScores(r.Context(), leaderboardKey(s.keys), &redis.ZRangeBy{
		Min: "(0", Max: "+inf", Count: limit,
	}).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	items := make([]map[string]any, 0, len(rows))
	for _, z := range rows {
		items = append(items, map[string]any{"product_id": z.Member, "sales": int64(z.Score)})
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Service) adminDeadLetters(w http.ResponseWriter, r *http.Request) {
	page, size, e := paging(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	ctx := r.Context()
	total, err := s.client.ZCard(ctx, deadByTimeKey(s.keys)).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	start := (page - 1) * size
	ids, err := s.client.ZRevRange(ctx, deadByTimeKey(s.keys), start, start+size-1).Result()
	items := []DeadLetter{}
	if err == nil && len(ids) > 0 {
		values, err := s.client.HMGet(ctx, deadKey(s.keys), ids...).Result()
		if err == nil {
			for _, v := range values {
				if str, ok := v.(string); ok {
					var d DeadLetter
					if json.Unmarshal([]byte(str), &d) == nil {
						items = append(items, d)
					}
				}
			}
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

// adminRetry applies a dead-lettered event again; on success it leaves the dead-letter set.
func (s *Service) adminRetry(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	v, err := s.client.HGet(ctx, deadKey(s.keys), id).Result()
	if errors.Is(err, redis.Nil) {
		s.responder.Error(w, r, web.ErrDeadLetterNotFound)
		return
	}
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	var d DeadLetter
	if err := json.Unmarshal([]byte(v), &d); err != nil {
		s.responder.Error(w, r, web.ErrDeadLetterRetryFail.Because(err))
		return
	}
	values := map[string]any{}
	for k, val := range d.Fields {
		values[k] = val
	}
	apply, err := s.applier(d.source(), redis.XMessage{ID: d.StreamID, Values: values})
	if err == nil {
		err = apply(ctx)
	}
	if err != nil {
		s.responder.Error(w, r, web.ErrDeadLetterRetryFail.With("error", err.Error()).Because(err))
		return
	}
	s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, deadKey(s.keys), id)
		p.ZRem(ctx, deadByTimeKey(s.keys), id)
		return nil
	})
	s.metrics.deadLetters.Dec()
	web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "retried": true})
}
