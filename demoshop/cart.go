package demoshop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

type cart struct {
	ID    string
	Items []cartItem // in the order they were first added
}

type cartItem struct {
	SKU      string
	Quantity int
}

type order struct {
	Number int
	Cart   string
	Email  string
	Items  []cartItem
	Total  int64
	At     time.Time
}

// maxQuantity is the most units of one product a cart may hold.
const maxQuantity = 10

// Cart and order answers of the API (money as decimal strings).
type cartJSON struct {
	ID    string     `json:"id"`
	Items []lineJSON `json:"items"`
	Count int        `json:"count"`
	Total string     `json:"total"`
}

type lineJSON struct {
	SKU       string `json:"sku"`
	Name      string `json:"name"`
	Quantity  int    `json:"quantity"`
	UnitPrice string `json:"unit_price"`
	LineTotal string `json:"line_total"`
}

type orderJSON struct {
	Number int        `json:"number"`
	Cart   string     `json:"cart"`
	Email  string     `json:"email,omitempty"`
	Items  []lineJSON `json:"items"`
	Total  string     `json:"total"`
}

// lines prices items at today's prices. Callers hold s.mu.
func (s *Shop) lines(items []cartItem) (lines []lineJSON, count int, total int64) {
	lines = []lineJSON{}
	for _, it := range items {
		p := s.bySKU(it.SKU)
		line := p.Price * int64(it.Quantity)
		lines = append(lines, lineJSON{SKU: p.SKU, Name: p.Name, Quantity: it.Quantity,
			UnitPrice: formatMoney(p.Price), LineTotal: formatMoney(line)})
		count += it.Quantity
		total += line
	}
	return lines, count, total
}

// cartView is the API's picture of c. Callers hold s.mu.
func (s *Shop) cartView(c *cart) cartJSON {
	lines, count, total := s.lines(c.Items)
	return cartJSON{ID: c.ID, Items: lines, Count: count, Total: formatMoney(total)}
}

func (s *Shop) orderView(o order) orderJSON {
	lines, _, _ := s.lines(o.Items)
	return orderJSON{Number: o.Number, Cart: o.Cart, Email: o.Email, Items: lines, Total: formatMoney(o.Total)}
}

// newCart makes an empty cart and sets the cart cookie on w (none when w is nil: no HTTP). Callers
// hold s.mu.
func (s *Shop) newCart(w http.ResponseWriter) *cart {
	c := &cart{ID: randomID()}
	s.carts[c.ID] = c
	if w != nil {
		//nolint:gosec // the demo shop serves plain HTTP: a Secure cookie would never come back
		http.SetCookie(w, &http.Cookie{Name: CartCookie, Value: c.ID, Path: "/", SameSite: http.SameSiteLaxMode,
			MaxAge: 7 * 24 * 3600})
	}
	return c
}

// cookieCart is the cart named by the visitor's cart cookie, or nil. Callers hold s.mu.
func (s *Shop) cookieCart(r *http.Request) *cart {
	if ck, err := r.Cookie(CartCookie); err == nil {
		return s.carts[ck.Value]
	}
	return nil
}

// shopError is a refusal of the cart API: its status, code and the message shown to the shopper.
type shopError struct {
	status  int
	code    string
	message string
}

func (e *shopError) Error() string { return e.message }

func errorf(status int, code, format string, args ...any) *shopError {
	return &shopError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

var errCartNotFound = errorf(http.StatusNotFound, "CART_NOT_FOUND", "Your cart has expired. Please try again.")

// add puts quantity units of sku in c, checking the stock the shop has. Callers hold s.mu.
func (s *Shop) add(c *cart, sku string, quantity int) *shopError {
	if quantity < 1 || quantity > maxQuantity {
		return errorf(http.StatusBadRequest, "INVALID_QUANTITY", "Choose a quantity between 1 and %d.", maxQuantity)
	}
	p := s.bySKU(sku)
	if p == nil {
		return errorf(http.StatusNotFound, "PRODUCT_NOT_FOUND", "We do not sell that product.")
	}
	i := slices.IndexFunc(c.Items, func(it cartItem) bool { return it.SKU == sku })
	already := 0
	if i >= 0 {
		already = c.Items[i].Quantity
	}
	switch {
	case p.Stock == 0:
		return errorf(http.StatusConflict, "OUT_OF_STOCK", "%s is sold out.", p.Name)
	case already+quantity > p.Stock:
		return errorf(http.StatusConflict, "OUT_OF_STOCK", "Only %d of %s left.", p.Stock, p.Name)
	case already+quantity > maxQuantity:
		return errorf(http.StatusBadRequest, "INVALID_QUANTITY", "At most %d of one product per order.", maxQuantity)
	}
	if i >= 0 {
		c.Items[i].Quantity += quantity
	} else {
		c.Items = append(c.Items, cartItem{SKU: sku, Quantity: quantity})
	}
	return nil
}

// createCart: POST /api/carts.
func (s *Shop) createCart(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	view := s.cartView(s.newCart(w))
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"cart": view})
}

// getCart: GET /api/carts/{cart}.
func (s *Shop) getCart(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	c := s.carts[r.PathValue("cart")]
	var view cartJSON
	if c != nil {
		view = s.cartView(c)
	}
	s.mu.Unlock()
	if c == nil {
		apiError(w, errCartNotFound.status, errCartNotFound.code, errCartNotFound.message)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"cart": view})
}

// addItem: POST /api/carts/{cart}/items with JSON {"sku": "...", "quantity": n}: one URL for every
// product, as the page script calls it.
func (s *Shop) addItem(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SKU      string `json:"sku"`
		Quantity *int   `json:"quantity"`
	}
	if err := readJSON(r, &body); err != nil || body.SKU == "" {
		apiError(w, http.StatusBadRequest, "INVALID_REQUEST", `Send JSON such as {"sku": "jersey", "quantity": 1}.`)
		return
	}
	quantity := 1
	if body.Quantity != nil {
		quantity = *body.Quantity
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.carts[r.PathValue("cart")]
	if c == nil {
		apiError(w, errCartNotFound.status, errCartNotFound.code, errCartNotFound.message)
		return
	}
	if e := s.add(c, body.SKU, quantity); e != nil {
		apiError(w, e.status, e.code, e.message)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"cart": s.cartView(c)})
}

// addItemForm: POST /cart/items, the product page's form without JavaScript (sku, quantity), into the
// cart of the cart cookie (a new one when there is none); then on to the cart page.
func (s *Shop) addItemForm(w http.ResponseWriter, r *http.Request) {
	quantity := 1
	if q := r.PostFormValue("quantity"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil {
			s.problem(w, http.StatusBadRequest, "Invalid quantity", fmt.Sprintf("Choose between 1 and %d.", maxQuantity))
			return
		}
		quantity = n
	}
	s.mu.Lock()
	c := s.cookieCart(r)
	if c == nil {
		c = s.newCart(w)
	}
	e := s.add(c, r.PostFormValue("sku"), quantity)
	s.mu.Unlock()
	if e != nil {
		s.problem(w, e.status, "Not added to your cart", e.message)
		return
	}
	http.Redirect(w, r, "/cart", http.StatusSeeOther)
}

func (s *Shop) cartPage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var view cartJSON
	if c := s.cookieCart(r); c != nil {
		view = s.cartView(c)
	}
	s.mu.Unlock()
	s.render(w, http.StatusOK, "cart", view)
}

// checkout: POST /api/carts/{cart}/checkout, taking nothing but the cart id (and, optionally, a guest's
// e-mail for the receipt: JSON {"email": "..."}, or the form field email of the cart page's form).
// API clients and the page script get 201 with the order as JSON; the form is sent on to the order page.
//
// Orders are numbered read-then-insert, as many shops number them: read the last number, a database
// round trip later insert the next one under a unique index. Two checkouts overlapping in between
// read the same number, and the later insert fails: HTTP 500. The cart keeps its items, so the
// shopper can try again.
func (s *Shop) checkout(w http.ResponseWriter, r *http.Request) {
	asJSON := !isForm(r)
	s.enterCheckout()
	view, e := s.placeOrder(r, asJSON)
	// Done before answering: a proxy that lets one checkout through at a time sends the next one as
	// soon as it has this answer, and that one must not count as an overlap.
	s.leaveCheckout()
	switch {
	case e != nil && asJSON:
		apiError(w, e.status, e.code, e.message)
	case e != nil:
		s.problem(w, e.status, "Your order was not placed", e.message)
	case asJSON:
		writeJSON(w, http.StatusCreated, map[string]any{"order": view})
	default:
		http.Redirect(w, r, "/orders/"+strconv.Itoa(view.Number), http.StatusSeeOther)
	}
}

// placeOrder reads the checkout request and places the order of its cart.
func (s *Shop) placeOrder(r *http.Request, asJSON bool) (orderJSON, *shopError) {
	var email string
	if asJSON {
		var body struct {
			Email string `json:"email"`
		}
		if err := readJSON(r, &body); err != nil && !errors.Is(err, io.EOF) {
			return orderJSON{}, errorf(http.StatusBadRequest, "INVALID_REQUEST", "The request body is not valid JSON.")
		}
		email = body.Email
	} else {
		email = r.PostFormValue("email")
	}

	id := r.PathValue("cart")
	s.mu.Lock()
	c := s.carts[id]
	if c == nil {
		s.mu.Unlock()
		return orderJSON{}, errCartNotFound
	}
	if len(c.Items) == 0 {
		s.mu.Unlock()
		return orderJSON{}, errorf(http.StatusBadRequest, "EMPTY_CART", "Your cart is empty.")
	}
	last := 1000 // SELECT max(number) FROM orders
	if n := len(s.orders); n > 0 {
		last = s.orders[n-1].Number
	}
	s.mu.Unlock()

	time.Sleep(s.dbLatency) // the database round trip between the read and the insert

	s.mu.Lock()
	defer s.mu.Unlock()
	number := last + 1
	if s.numbers[number] { // INSERT INTO orders ... -> unique violation
		s.stats.Failed++
		s.logger.Error("checkout failed", "cart", id, "error",
			fmt.Sprintf("duplicate key value violates unique constraint \"orders_number_key\" (number)=(%d)", number))
		return orderJSON{}, errorf(http.StatusInternalServerError, "INTERNAL", "Something went wrong while placing your order. Please try again.")
	}
	for _, it := range c.Items {
		if p := s.bySKU(it.SKU); p.Stock < it.Quantity {
			return orderJSON{}, errorf(http.StatusConflict, "OUT_OF_STOCK", "Only %d of %s left: change your cart.", p.Stock, p.Name)
		}
	}
	_, _, total := s.lines(c.Items)
	o := order{Number: number, Cart: c.ID, Email: email, Items: c.Items, Total: total, At: time.Now()}
	for _, it := range c.Items {
		s.bySKU(it.SKU).Stock -= it.Quantity
	}
	s.numbers[number] = true
	s.orders = append(s.orders, o)
	c.Items = nil
	return s.orderView(o), nil
}

// CheckoutStats counts checkouts running at the same time: what an operator's max_in_flight must
// prevent in front of this shop.
type CheckoutStats struct {
	Started     int `json:"started"`      // checkouts begun
	MaxParallel int `json:"max_parallel"` // the most that ran at once
	Overlapping int `json:"overlapping"`  // checkouts that began while another was running
	Failed      int `json:"failed"`       // 500s from order numbers taken by an overlapping checkout
}

// CheckoutStats returns the counts so far.
func (s *Shop) CheckoutStats() CheckoutStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Shop) enterCheckout() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Started++
	if s.inFlight > 0 {
		s.stats.Overlapping++
	}
	s.inFlight++
	s.stats.MaxParallel = max(s.stats.MaxParallel, s.inFlight)
}

func (s *Shop) leaveCheckout() {
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
}

func (s *Shop) orderPage(w http.ResponseWriter, r *http.Request) {
	number, _ := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	i := slices.IndexFunc(s.orders, func(o order) bool { return o.Number == number })
	var view orderJSON
	if i >= 0 {
		view = s.orderView(s.orders[i])
	}
	s.mu.Unlock()
	if i < 0 {
		s.problem(w, http.StatusNotFound, "Order not found", "There is no such order.")
		return
	}
	s.render(w, http.StatusOK, "order", view)
}

func (s *Shop) ordersPage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	views := make([]orderJSON, 0, len(s.orders))
	for _, o := range s.orders {
		views = append(views, s.orderView(o))
	}
	s.mu.Unlock()
	s.render(w, http.StatusOK, "orders", views)
}

// ordersJSON is the back office's view: orders, bids, stock by SKU and the checkout counts.
func (s *Shop) ordersJSON(w http.ResponseWriter, r *http.Request) {
	type bidJSON struct {
		Auction string `json:"auction"`
		Amount  string `json:"amount"`
	}
	stats := s.CheckoutStats()
	s.mu.Lock()
	out := struct {
		Orders    []orderJSON    `json:"orders"`
		Bids      []bidJSON      `json:"bids"`
		Stock     map[string]int `json:"stock"`
		Checkouts CheckoutStats  `json:"checkouts"`
	}{Orders: []orderJSON{}, Bids: []bidJSON{}, Stock: map[string]int{}, Checkouts: stats}
	for _, o := range s.orders {
		out.Orders = append(out.Orders, s.orderView(o))
	}
	for _, a := range s.auctions {
		for _, b := range a.Bids {
			out.Bids = append(out.Bids, bidJSON{Auction: a.ID, Amount: formatMoney(b.Amount)})
		}
	}
	for _, p := range s.products {
		out.Stock[p.SKU] = p.Stock
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// isForm: the body is an HTML form's.
func isForm(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/x-www-form-urlencoded") || strings.HasPrefix(ct, "multipart/form-data")
}

// readJSON decodes a JSON request body of at most 64 KiB into v.
func readJSON(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(v)
}
