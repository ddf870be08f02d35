package stock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// Product is a product as the public and admin endpoints show it.
type Product struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	ImageURL       string `json:"image_url"`
	Price          int64  `json:"price"`
	PerUserLimit   int64  `json:"per_user_limit"`
	TotalStock     int64  `json:"total_stock"`
	RemainingStock int64  `json:"remaining_stock"`
}

// Seed writes the configuration file's products: a product absent from the store is created with
// its stock; one present gets its metadata (name, price, image, per-user limit) updated and keeps its
// live stock. On a reload only products whose entry changed are written.
func (k *stockKind) Seed(ctx context.Context, next, previous *config.Config) error {
	var errs []error
	for _, p := range products.Of(next) {
		if previous != nil && slices.Contains(products.Of(previous), p) {
			continue
		}
		if _, err := k.writeProduct(ctx, "seed", p); err != nil {
			errs = append(errs, fmt.Errorf("product %s: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

var errExistingProduct = errors.New("admission: product exists")

// writeProduct creates (mode "create") or seeds (mode "seed") a product, registers it in the product
// index and gives its event stream the worker's consumer group.
func (k *stockKind) writeProduct(ctx context.Context, mode string, p products.Product) (created bool, err error) {
	s := k.s
	res, err := productScript.Run(ctx, s.Client(), []string{infoKey(s.Keys(), p.ID), stockKey(s.Keys(), p.ID)},
		mode, p.Name, p.Price, p.ImageURL, p.PerUserLimit, p.Stock).Int64Slice()
	if err != nil {
		return false, err
	}
	if len(res) != 2 {
		return false, fmt.Errorf("product.lua answered %v", res)
	}
	if res[0] == 1 {
		return false, errExistingProduct
	}
	// Outside the product's hash tag, so not in the script: the index serves listings, the worker's
	// discovery and other spellings of the id (admission/spellings.go), and each checks the product
	// still exists.
	if err := s.IndexOwner(ctx, k, p.ID); err != nil {
		return res[1] == 1, err
	}
	k.products.forget(p.ID)
	k.productReport(p.ID).Touch() // the report samples its stock from now on
	return res[1] == 1, errors.Join(s.EnsureStreamGroup(ctx, eventsKey(s.Keys(), p.ID)), s.EnsureStreamGroup(ctx, admitsKey(s.Keys(), p.ID)))
}

// product reads a product from the store; ok is false if there is none.
func (k *stockKind) product(ctx context.Context, id string) (Product, bool, error) {
	s := k.s
	pipe := s.Client().Pipeline()
	info := pipe.HGetAll(ctx, infoKey(s.Keys(), id))
	stock := pipe.Get(ctx, stockKey(s.Keys(), id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Product{}, false, err
	}
	m := info.Val()
	if len(m) == 0 {
		return Product{}, false, nil
	}
	remaining, _ := stock.Int64()
	num := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	return Product{ID: id, Name: m["name"], ImageURL: m["image_url"], Price: num("price"),
		PerUserLimit: num("per_user_limit"), TotalStock: num("total_stock"), RemainingStock: remaining}, true, nil
}

// productCache keeps public product reads for a moment: a product page polled by thousands of
// shoppers costs the store a few reads a second per replica, and an admission of the product forgets
// its entry on this replica at once.
type productCache struct {
	mu      sync.Mutex
	entries map[string]cachedProduct
}

type cachedProduct struct {
	product Product
	found   bool
	at      time.Time
}

const productCacheTTL = 250 * time.Millisecond

func (c *productCache) get(id string) (cachedProduct, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok || time.Since(e.at) > productCacheTTL {
		return cachedProduct{}, false
	}
	return e, true
}

func (c *productCache) put(id string, e cachedProduct) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) > 10_000 {
		clear(c.entries) // only ids that exist are worth keeping; a flood of made-up ones is dropped
	}
	c.entries[id] = e
}

func (c *productCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}

func (k *stockKind) handleProduct(w http.ResponseWriter, r *http.Request) {
	s := k.s
	id, ok := s.PathID(w, r)
	if !ok {
		return
	}
	e, ok := k.products.get(id)
	if !ok {
		p, found, err := k.product(r.Context(), id)
		if err != nil {
			s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		e = cachedProduct{product: p, found: found, at: time.Now()}
		k.products.put(id, e)
	}
	if !e.found {
		s.Responder().Error(w, r, errProductNotFound)
		return
	}
	web.WriteJSON(w, http.StatusOK, publicProduct(e.product))
}

// publicProduct is a product as the shop's pages read it (GET {prefix}/products/{id}).
func publicProduct(p Product) map[string]any {
	return map[string]any{
		"id": p.ID, "name": p.Name, "image_url": p.ImageURL, "price": p.Price,
		"total_stock": p.TotalStock, "remaining_stock": p.RemainingStock,
	}
}

// productList is the public product list, read from the store at most every 250 ms per replica: a
// shop's pages may poll it from every visitor's browser.
type productList struct {
	mu    sync.Mutex
	items []map[string]any
	at    time.Time
}

// handleProducts lists every product edgeq guards, sorted by id, for the shop's own pages:
// `{"items","total_count","page","page_size"}`, 100 a page.
func (k *stockKind) handleProducts(w http.ResponseWriter, r *http.Request) {
	s := k.s
	page, size, e := web.Paging(r, web.MaxPageSize)
	if e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	k.list.mu.Lock()
	defer k.list.mu.Unlock()
	if k.list.items == nil || time.Since(k.list.at) > productCacheTTL {
		ids, err := s.Client().SMembers(r.Context(), k.OwnersKey()).Result()
		if err != nil {
			s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		slices.Sort(ids)
		items := make([]map[string]any, 0, len(ids))
		for _, id := range ids {
			p, found, err := k.product(r.Context(), id)
			if err != nil {
				s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
				return
			}
			if found {
				items = append(items, publicProduct(p))
			}
		}
		k.list.items, k.list.at = items, time.Now()
	}
	lo, hi, size := web.Window(int64(len(k.list.items)), page, size)
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": k.list.items[lo:hi], "total_count": len(k.list.items),
		"page": page, "page_size": size})
}

func (k *stockKind) adminCreateProduct(w http.ResponseWriter, r *http.Request) {
	s := k.s
	var body struct {
		ID           *string `json:"id"`
		Stock        *int64  `json:"stock"`
		PerUserLimit *int    `json:"per_user_limit"`
		Name         string  `json:"name"`
		Price        int64   `json:"price"`
		ImageURL     string  `json:"image_url"`
	}
	if e := fields.DecodeJSON(w, r, admission.MaxAdminBody, &body); e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	if body.ID == nil || body.Stock == nil {
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("problems", "id and stock are required"))
		return
	}
	p := products.Product{ID: *body.ID, Stock: *body.Stock, PerUserLimit: 1, Name: body.Name, Price: body.Price, ImageURL: body.ImageURL}
	if body.PerUserLimit != nil {
		p.PerUserLimit = *body.PerUserLimit
	}
	if err := products.Validate(p); err != nil {
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("problems", config.OneLine(err)).Because(err))
		return
	}
	if _, err := k.writeProduct(r.Context(), "create", p); err != nil {
		if errors.Is(err, errExistingProduct) {
			s.Responder().Error(w, r, errProductExists)
			return
		}
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	k.writeProductJSON(w, r, p.ID)
}

func (k *stockKind) writeProductJSON(w http.ResponseWriter, r *http.Request, id string) {
	s := k.s
	p, found, err := k.product(r.Context(), id)
	s.WriteFound(w, r, p, found, err, errProductNotFound)
}

func (k *stockKind) adminRestock(w http.ResponseWriter, r *http.Request) {
	s := k.s
	id := r.PathValue("id")
	amount, e := k.amount(w, r)
	if e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	if !config.ID.MatchString(id) {
		s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	res, err := restockScript.Run(r.Context(), s.Client(), []string{infoKey(s.Keys(), id), stockKey(s.Keys(), id)}, amount).Int64Slice()
	if err != nil || len(res) != 2 {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(fmt.Errorf("restock: %v %v", res, err)))
		return
	}
	if res[0] == 1 {
		s.Responder().Error(w, r, errProductNotFound)
		return
	}
	k.products.forget(id)
	k.productReport(id).Add(report.Restocked, amount)
	k.writeProductJSON(w, r, id)
}

// amount reads the restock amount from a JSON body {"amount": n} or a form field. A body that is a
// JSON object is read as JSON whatever its Content-Type says (`curl -d '{...}'` sends a form's), as
// the admin API's JSON-only endpoints read theirs.
func (k *stockKind) amount(w http.ResponseWriter, r *http.Request) (int64, *web.Error) {
	var amount int64
	body, e := fields.Buffer(r, admission.MaxAdminBody)
	if e != nil {
		return 0, e
	}
	media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if media == "application/json" || bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		var body struct {
			Amount *int64 `json:"amount"`
		}
		if e := fields.DecodeJSON(w, r, admission.MaxAdminBody, &body); e != nil {
			return 0, e
		}
		if body.Amount == nil {
			return 0, web.ErrInvalidRequest.With("field", "amount")
		}
		amount = *body.Amount
	} else {
		text, _, e := fields.New(r, admission.MaxAdminBody).Body("amount")
		if e != nil {
			return 0, e
		}
		n, err := strconv.ParseInt(text, 10, 64)
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

func (k *stockKind) adminDeleteProduct(w http.ResponseWriter, r *http.Request) {
	s := k.s
	id, ok := s.PathID(w, r)
	if !ok {
		return
	}
	// One slot, one command: the product, its stock, its buyers and its events go together. UNLINK:
	// a sold-out drop's buyers and streams can be large, and Redis frees them in the background. The
	// admin records stay until the retention, but leave the admin lists with the product.
	n, err := s.Client().Unlink(r.Context(), infoKey(s.Keys(), id), stockKey(s.Keys(), id), buyersKey(s.Keys(), id), eventsKey(s.Keys(), id),
		admitsKey(s.Keys(), id), claimsKey(s.Keys(), id)).Result()
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	if err := s.UnindexOwner(r.Context(), k, id); err != nil {
		// The product is gone; its index entry is dropped by the next spellings pass.
		s.Logger().Warn("removing a deleted product from the index failed", "product", id, "error", err.Error())
	}
	k.products.forget(id)
	if n == 0 {
		s.Responder().Error(w, r, errProductNotFound)
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// adminListProducts lists the products sorted by id (listOwners).
func (k *stockKind) adminListProducts(w http.ResponseWriter, r *http.Request) {
	admission.ListOwners(k.s, w, r, k, k.product)
}

// adminGetProduct is one product as the list shows it, read from the store (not the public read's
// cache).
func (k *stockKind) adminGetProduct(w http.ResponseWriter, r *http.Request) {
	s := k.s
	id, ok := s.PathID(w, r)
	if !ok {
		return
	}
	k.writeProductJSON(w, r, id)
}

// SoldOut reports whether every one of the products has no stock left in s's store: a queue's sold_out_with
// (docs/operations.md "Running a drop"), read by the waiting room's tick. A product that does not exist
// counts as not sold out, so a mistyped id never ends anyone's wait.
func SoldOut(ctx context.Context, s *admission.Service, products []string) (bool, error) {
	pipe := s.Client().Pipeline()
	stocks := make([]*redis.StringCmd, len(products))
	for i, id := range products {
		stocks[i] = pipe.Get(ctx, stockKey(s.Keys(), id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	for _, c := range stocks {
		n, err := c.Int64()
		if err != nil || n > 0 {
			return false, nil
		}
	}
	return len(products) > 0, nil
}
