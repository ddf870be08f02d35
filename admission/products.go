package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/web"
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

// groupName is the consumer group of the admission worker on every product stream.
const groupName = "edgeq-workers"

// Apply seeds the configuration file's products: a product absent from the store is created with its
// stock; one present gets its metadata (name, price, image, per-user limit) updated and keeps its live
// stock. On a reload only products whose entry changed are written.
func (s *Service) Apply(ctx context.Context, products, previous []config.Product) error {
	var errs []error
	for _, p := range products {
		if slices.Contains(previous, p) {
			continue
		}
		if _, err := s.writeProduct(ctx, "seed", p); err != nil {
			errs = append(errs, fmt.Errorf("product %s: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

var errProductExists = errors.New("admission: product exists")

// writeProduct creates (mode "create") or seeds (mode "seed") a product, registers it in the product
// index and gives its event stream the worker's consumer group.
func (s *Service) writeProduct(ctx context.Context, mode string, p config.Product) (created bool, err error) {
	res, err := productScript.Run(ctx, s.client, []string{infoKey(s.keys, p.ID), stockKey(s.keys, p.ID)},
		mode, p.Name, p.Price, p.ImageURL, p.PerUserLimit, p.Stock).Int64Slice()
	if err != nil {
		return false, err
	}
	if len(res) != 2 {
		return false, fmt.Errorf("product.lua answered %v", res)
	}
	if res[0] == 1 {
		return false, errProductExists
	}
	// Outside the product's hash tag, so not in the script: the index only serves listings and the
	// worker's discovery, and both check each product still exists.
	if err := s.client.SAdd(ctx, productIndexKey(s.keys), p.ID).Err(); err != nil {
		return res[1] == 1, err
	}
	s.products.forget(p.ID)
	return res[1] == 1, s.ensureStreamGroup(ctx, eventsKey(s.keys, p.ID))
}

// ensureStreamGroup creates the worker's consumer group on an event stream, from its first event.
func (s *Service) ensureStreamGroup(ctx context.Context, stream string) error {
	err := s.client.XGroupCreateMkStream(ctx, stream, groupName, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

// product reads a product from the store; ok is false if there is none.
func (s *Service) product(ctx context.Context, id string) (Product, bool, error) {
	pipe := s.client.Pipeline()
	info := pipe.HGetAll(ctx, infoKey(s.keys, id))
	stock := pipe.Get(ctx, stockKey(s.keys, id))
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

// Register adds the public reads: GET {prefix}/products/{id} and the auction reads.
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+s.o.Prefix+"/products/{id}", s.handleProduct)
	s.registerAuctionReads(mux)
}

func (s *Service) handleProduct(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !config.ID.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	e, ok := s.products.get(id)
	if !ok {
		p, found, err := s.product(r.Context(), id)
		if err != nil {
			s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		e = cachedProduct{product: p, found: found, at: time.Now()}
		s.products.put(id, e)
	}
	if !e.found {
		s.responder.Error(w, r, web.ErrProductNotFound)
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{
		"id": e.product.ID, "name": e.product.Name, "image_url": e.product.ImageURL, "price": e.product.Price,
		"total_stock": e.product.TotalStock, "remaining_stock": e.product.RemainingStock,
	})
}
