// Package demoshop is a small in-memory web shop: a product list, product pages with a checkout form,
// an auction with a bid form, and confirmation pages. It is the origin of edgeq's quick start and
// end-to-end tests, and it knows nothing about what runs in front of it.
package demoshop

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

type product struct {
	ID    string
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

type order struct {
	ID       int    `json:"order_id"`
	Product  string `json:"product"`
	Quantity int    `json:"quantity"`
}

// Shop is the whole demo shop: state behind one mutex, pages parsed at start.
type Shop struct {
	logger *slog.Logger
	pages  *pages
	mux    *http.ServeMux

	mu       sync.Mutex
	products []*product
	auctions []*auction
	orders   []order
	bids     int
}

// New builds a shop with its seed products and auctions.
func New(logger *slog.Logger) (*Shop, error) {
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Shop{
		logger: logger,
		pages:  p,
		products: []*product{
			{ID: "1", Name: "Limited sneaker A", Price: 9999, Stock: 5},
			{ID: "2", Name: "Limited sneaker B", Price: 12999, Stock: 50},
			{ID: "3", Name: "Team jersey", Price: 4999, Stock: 1000},
		},
		auctions: []*auction{
			{ID: "42", Title: "Signed match ball", StartingPrice: 10000},
			{ID: "7", Title: "Vintage racing poster", StartingPrice: 2000},
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.home)
	mux.HandleFunc("GET /products/{id}", s.productPage)
	mux.HandleFunc("POST /checkout/{product}", s.checkout)
	mux.HandleFunc("GET /auctions/{id}", s.auctionPage)
	mux.HandleFunc("POST /auctions/{id}/bid", s.placeBid)
	mux.HandleFunc("GET /orders", s.ordersPage)
	mux.HandleFunc("GET /orders.json", s.ordersJSON)
	mux.HandleFunc("GET /slow", s.slow)
	mux.HandleFunc("GET /stream", s.stream)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "Page not found", "There is nothing at "+r.URL.Path+".")
	})
	s.mux = mux
	return s, nil
}

// SessionCookie is the shop's own session, as any shop has one: a random id set on the first visit.
// edgeq's demo configuration identifies bidders by it.
const SessionCookie = "shop_session"

func (s *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(SessionCookie); err != nil {
		var b [16]byte
		rand.Read(b[:])
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: hex.EncodeToString(b[:]), Path: "/",
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

func (s *Shop) findProduct(id string) *product {
	for _, p := range s.products {
		if p.ID == id {
			return p
		}
	}
	return nil
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

func (s *Shop) productPage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p := s.findProduct(r.PathValue("id"))
	var view product
	if p != nil {
		view = *p
	}
	s.mu.Unlock()
	if p == nil {
		s.fail(w, r, http.StatusNotFound, "Product not found", "We do not sell that.")
		return
	}
	s.render(w, http.StatusOK, "product", view)
}

func (s *Shop) checkout(w http.ResponseWriter, r *http.Request) {
	quantity := 1
	if q := r.FormValue("quantity"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 10 {
			s.fail(w, r, http.StatusBadRequest, "Invalid quantity", "Choose between 1 and 10.")
			return
		}
		quantity = n
	}
	s.mu.Lock()
	p := s.findProduct(r.PathValue("product"))
	if p == nil {
		s.mu.Unlock()
		s.fail(w, r, http.StatusNotFound, "Product not found", "We do not sell that.")
		return
	}
	if p.Stock < quantity {
		s.mu.Unlock()
		s.fail(w, r, http.StatusConflict, "Sold out", p.Name+" is sold out.")
		return
	}
	p.Stock -= quantity
	o := order{ID: len(s.orders) + 1, Product: p.ID, Quantity: quantity}
	s.orders = append(s.orders, o)
	name := p.Name
	s.mu.Unlock()
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, o)
		return
	}
	s.render(w, http.StatusOK, "confirmed", confirmedData{
		Title:   fmt.Sprintf("Order #%d confirmed", o.ID),
		Message: fmt.Sprintf("%d × %s is yours.", quantity, name),
	})
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
		s.fail(w, r, http.StatusNotFound, "Auction not found", "There is no such auction.")
		return
	}
	s.render(w, http.StatusOK, "auction", view)
}

func (s *Shop) placeBid(w http.ResponseWriter, r *http.Request) {
	amount, err := parseMoney(r.FormValue("amount"))
	if err != nil || amount <= 0 {
		s.fail(w, r, http.StatusBadRequest, "Invalid amount", "Enter an amount such as 123.45.")
		return
	}
	s.mu.Lock()
	a := s.findAuction(r.PathValue("id"))
	if a == nil {
		s.mu.Unlock()
		s.fail(w, r, http.StatusNotFound, "Auction not found", "There is no such auction.")
		return
	}
	if amount < a.StartingPrice || amount <= a.highest() {
		floor := max(a.StartingPrice, a.highest())
		s.mu.Unlock()
		s.fail(w, r, http.StatusConflict, "Bid too low", "Bid more than "+formatMoney(floor)+".")
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
	})
}

func (s *Shop) ordersPage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	orders := slices.Clone(s.orders)
	s.mu.Unlock()
	s.render(w, http.StatusOK, "orders", orders)
}

func (s *Shop) ordersJSON(w http.ResponseWriter, r *http.Request) {
	type bidJSON struct {
		Auction string `json:"auction"`
		Amount  string `json:"amount"`
	}
	s.mu.Lock()
	out := struct {
		Orders []order        `json:"orders"`
		Bids   []bidJSON      `json:"bids"`
		Stock  map[string]int `json:"stock"`
	}{Orders: slices.Clone(s.orders), Bids: []bidJSON{}, Stock: map[string]int{}}
	for _, a := range s.auctions {
		for _, b := range a.Bids {
			out.Bids = append(out.Bids, bidJSON{Auction: a.ID, Amount: formatMoney(b.Amount)})
		}
	}
	for _, p := range s.products {
		out.Stock[p.ID] = p.Stock
	}
	s.mu.Unlock()
	if out.Orders == nil {
		out.Orders = []order{}
	}
	writeJSON(w, http.StatusOK, out)
}

// slow answers after ms milliseconds (at most a minute), or gives up when the client leaves.
func (s *Shop) slow(w http.ResponseWriter, r *http.Request) {
	ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
	wait := time.Duration(min(max(ms, 0), 60_000)) * time.Millisecond
	select {
	case <-time.After(wait):
		fmt.Fprintln(w, "done")
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
		fmt.Fprintf(w, "tick %d\n", i)
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func (s *Shop) fail(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	if wantsJSON(r) {
		writeJSON(w, status, map[string]string{"error": title, "message": message})
		return
	}
	s.render(w, status, "problem", confirmedData{Title: title, Message: message})
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
	w.Write(buf.Bytes())
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
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
