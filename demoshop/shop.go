// Package demoshop is a small in-memory web shop built the way real shops are, so that edgeq can be tried
// and tested in front of one. It knows nothing about what runs in front of it.
//
//   - Products have two URLs, /products/{id} and /p/{slug}, and a SKU.
//   - A cart: POST /api/carts creates one (and sets the cart cookie); ONE add-to-cart URL for every
//     product, POST /api/carts/{cart}/items with JSON {"sku": "...", "quantity": n}, used by the shop's
//     page script; without JavaScript the product form posts sku and quantity to POST /cart/items.
//   - A checkout that takes only the cart id, POST /api/carts/{cart}/checkout (JSON from the script, or
//     the cart page's form), numbering orders read-then-insert as many shops do: it reads the last order
//     number, spends a database round trip, and inserts the next one. Two checkouts that overlap take
//     the same number and the second fails with 500, as the unique index of a real database would make
//     it. CheckoutStats counts the overlaps.
//   - A GraphQL API, /api/graphql (graphql.go), modelled on Vendure's shop API and executed by a real
//     GraphQL library: reads (products, a product, a cart, the visitor's cart) for the page script's
//     cart badge and live stock, and the cart mutations addItemToOrder and adjustOrderLine, which
//     answer a refusal (insufficient stock, order limit) in a 200 as a member of their result union.
//   - API errors look like many shops' APIs: {"error": {"code": "...", "message": "..."}}; the shop's
//     page script (/static/shop.js) shows error.message, or its own fallback text.
//   - Auctions with a bid form, an order list, and /slow and /stream for proxy tests.
package demoshop

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

type product struct {
	ID    string
	SKU   string
	Slug  string
	Name  string
	Price int64 // cents
	Stock int
}

type auction struct {
	ID            string
	Title         string
	StartingPrice int64 // cents
	Bids          []bid // oldest first
}

type bid struct {
	Number int
	Amount int64
	At     time.Time
}

// Shop is the whole demo shop: state behind one mutex, pages parsed at start.
type Shop struct {
	logger    *slog.Logger
	pages     *pages
	mux       *http.ServeMux
	dbLatency time.Duration

	mu       sync.Mutex
	products []*product
	auctions []*auction
	carts    map[string]*cart
	orders   []order       // in number order
	numbers  map[int]bool  // the unique index on order numbers
	stats    CheckoutStats // checkouts in progress and their overlaps
	inFlight int           // checkouts in progress now
	bids     int           // bids received, for their numbers

	onAddItem func(productVariantID string, quantity int32) // see OnAddItem
}

// Option changes a shop built by New.
type Option func(*Shop)

// DBLatency sets the time between reading the last order number and inserting the next one (a
// database round trip; default 20ms). Checkouts that overlap within it collide.
func DBLatency(d time.Duration) Option { return func(s *Shop) { s.dbLatency = d } }

// New builds a shop with its seed products and auctions.
func New(logger *slog.Logger, options ...Option) (*Shop, error) {
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Shop{
		logger:    logger,
		pages:     p,
		dbLatency: 20 * time.Millisecond,
		products: []*product{
			{ID: "1", SKU: "sneaker-a", Slug: "limited-sneaker-a", Name: "Limited sneaker A", Price: 9999, Stock: 5},
			{ID: "2", SKU: "sneaker-b", Slug: "limited-sneaker-b", Name: "Limited sneaker B", Price: 12999, Stock: 50},
			{ID: "3", SKU: "jersey", Slug: "team-jersey", Name: "Team jersey", Price: 4999, Stock: 1000},
		},
		auctions: []*auction{
			{ID: "42", Title: "Signed match ball", StartingPrice: 10000},
			{ID: "7", Title: "Vintage racing poster", StartingPrice: 2000},
		},
		carts:   map[string]*cart{},
		numbers: map[int]bool{},
	}
	for _, o := range options {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.home)
	mux.HandleFunc("GET /products/{id}", s.productPage)
	mux.HandleFunc("GET /p/{slug}", s.productPage)
	mux.HandleFunc("GET /cart", s.cartPage)
	mux.HandleFunc("POST /cart/items", s.addItemForm)
	mux.HandleFunc("POST /api/carts", s.createCart)
	mux.HandleFunc("GET /api/carts/{cart}", s.getCart)
	mux.HandleFunc("POST /api/carts/{cart}/items", s.addItem)
	mux.HandleFunc("POST /api/carts/{cart}/checkout", s.checkout)
	mux.HandleFunc("GET /api/graphql", s.graphql)
	mux.HandleFunc("POST /api/graphql", s.graphql)
	mux.HandleFunc("/api/graphql", s.graphql) // other methods: 405
	mux.HandleFunc("GET /orders", s.ordersPage)
	mux.HandleFunc("GET /orders/{number}", s.orderPage)
	mux.HandleFunc("GET /orders.json", s.ordersJSON)
	mux.HandleFunc("GET /auctions/{id}", s.auctionPage)
	mux.HandleFunc("POST /auctions/{id}/bid", s.placeBid)
	mux.HandleFunc("GET /static/shop.js", serveScript)
	mux.HandleFunc("GET /slow", s.slow)
	mux.HandleFunc("GET /stream", s.stream)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "There is no such API endpoint.")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.problem(w, http.StatusNotFound, "Page not found", "There is nothing at "+r.URL.Path+".")
	})
	s.mux = mux
	return s, nil
}

// SessionCookie is the shop's own session, as any shop has one: a random id set on the first visit.
// edgeq's demo configuration identifies bidders by it.
const SessionCookie = "shop_session"

// CartCookie holds the visitor's cart id. The page script reads it (it is not HttpOnly), as shop
// front-ends that keep the cart id in a cookie do.
const CartCookie = "cart"

func (s *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(SessionCookie); err != nil {
		//nolint:gosec // the demo shop serves plain HTTP: a Secure cookie would never come back
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: randomID(), Path: "/",
			HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	s.mux.ServeHTTP(rec, r)
	s.logger.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int)        { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// findProduct finds a product by one of its keys (id, sku or slug). Callers hold s.mu.
func (s *Shop) findProduct(match func(*product) bool) *product {
	for _, p := range s.products {
		if match(p) {
			return p
		}
	}
	return nil
}

func (s *Shop) bySKU(sku string) *product {
	return s.findProduct(func(p *product) bool { return p.SKU == sku })
}

func (s *Shop) findAuction(id string) *auction {
	for _, a := range s.auctions {
		if a.ID == id {
			return a
		}
	}
	return nil
}

func (a *auction) highest() int64 {
	if len(a.Bids) == 0 {
		return 0
	}
	return a.Bids[len(a.Bids)-1].Amount
}

func (s *Shop) home(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data := homeData{}
	for _, p := range s.products {
		data.Products = append(data.Products, *p)
	}
	for _, a := range s.auctions {
		data.Auctions = append(data.Auctions, auctionView(a))
	}
	s.mu.Unlock()
	s.render(w, http.StatusOK, "home", data)
}

// productPage serves a product under both of its URLs, /products/{id} and /p/{slug}.
func (s *Shop) productPage(w http.ResponseWriter, r *http.Request) {
	id, slug := r.PathValue("id"), r.PathValue("slug")
	s.mu.Lock()
	p := s.findProduct(func(p *product) bool { return (id != "" && p.ID == id) || (slug != "" && p.Slug == slug) })
	var view product
	if p != nil {
		view = *p
	}
	s.mu.Unlock()
	if p == nil {
		s.problem(w, http.StatusNotFound, "Product not found", "We do not sell that.")
		return
	}
	s.render(w, http.StatusOK, "product", view)
}

func (s *Shop) auctionPage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	a := s.findAuction(r.PathValue("id"))
	var view auctionData
	if a != nil {
		view = auctionView(a)
	}
	s.mu.Unlock()
	if a == nil {
		s.problem(w, http.StatusNotFound, "Auction not found", "There is no such auction.")
		return
	}
	s.render(w, http.StatusOK, "auction", view)
}

func (s *Shop) placeBid(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, title, message string) {
		if wantsJSON(r) {
			apiError(w, status, code, message)
			return
		}
		s.problem(w, status, title, message)
	}
	amount, err := parseMoney(r.FormValue("amount"))
	if err != nil || amount <= 0 {
		fail(http.StatusBadRequest, "INVALID_AMOUNT", "Invalid amount", "Enter an amount such as 123.45.")
		return
	}
	s.mu.Lock()
	a := s.findAuction(r.PathValue("id"))
	if a == nil {
		s.mu.Unlock()
		fail(http.StatusNotFound, "NOT_FOUND", "Auction not found", "There is no such auction.")
		return
	}
	if amount < a.StartingPrice || amount <= a.highest() {
		floor := max(a.StartingPrice, a.highest())
		s.mu.Unlock()
		fail(http.StatusConflict, "BID_TOO_LOW", "Bid too low", "Bid more than "+formatMoney(floor)+".")
		return
	}
	s.bids++
	b := bid{Number: s.bids, Amount: amount, At: time.Now()}
	a.Bids = append(a.Bids, b)
	s.mu.Unlock()
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"bid_number": b.Number, "auction": a.ID, "amount": formatMoney(amount)})
		return
	}
	s.render(w, http.StatusOK, "confirmed", confirmedData{
		Title:   "Bid of " + formatMoney(amount) + " received",
		Message: "You are the highest bidder on " + a.Title + " for now.",
		Back:    "/auctions/" + a.ID,
	})
}

// slow answers after ms milliseconds (at most a minute), or gives up when the client leaves.
func (s *Shop) slow(w http.ResponseWriter, r *http.Request) {
	ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
	wait := time.Duration(min(max(ms, 0), 60_000)) * time.Millisecond
	select {
	case <-time.After(wait):
		_, _ = fmt.Fprintln(w, "done")
	case <-r.Context().Done():
	}
}

// stream sends n lines, interval_ms apart, flushing each: a long-running response to test proxies.
func (s *Shop) stream(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n < 1 {
		n = 5
	}
	interval, err := strconv.Atoi(r.URL.Query().Get("interval_ms"))
	if err != nil || interval < 0 {
		interval = 200
	}
	n, interval = min(n, 1000), min(interval, 5000)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	rc := http.NewResponseController(w)
	for i := 1; i <= n; i++ {
		if i > 1 {
			select {
			case <-time.After(time.Duration(interval) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = fmt.Fprintf(w, "tick %d\n", i)
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// problem renders the shop's error page.
func (s *Shop) problem(w http.ResponseWriter, status int, title, message string) {
	s.render(w, status, "problem", confirmedData{Title: title, Message: message, Back: "/"})
}

func (s *Shop) render(w http.ResponseWriter, status int, page string, data any) {
	var buf bytes.Buffer
	if err := s.pages.render(&buf, page, data); err != nil {
		s.logger.Error("render", "page", page, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// wantsJSON: the client asked for JSON (the page script and API clients do; a form does not).
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json") ||
		strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// apiError is the shop API's error shape, {"error": {"code": ..., "message": ...}}, which the page
// script reads as error.message.
func apiError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// parseMoney reads a decimal with at most two places as cents; no floats touch money.
func parseMoney(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 12 || (hasDot && (frac == "" || len(frac) > 2)) || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not an amount", s)
	}
	units, _ := strconv.ParseInt(whole, 10, 64)
	for len(frac) < 2 {
		frac += "0"
	}
	cents, _ := strconv.ParseInt(frac, 10, 64)
	return units*100 + cents, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func formatMoney(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }
