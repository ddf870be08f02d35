package demoshop

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestShop(t *testing.T, options ...Option) (*Shop, *httptest.Server) {
	t.Helper()
	s, err := New(slog.New(slog.DiscardHandler), options...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, url string, form url.Values, accept string) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, url, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// answer is any JSON answer of the shop's API.
type answer struct {
	Cart  cartJSON  `json:"cart"`
	Order orderJSON `json:"order"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends body (if not nil) as JSON, as the page script does.
func call(t *testing.T, method, url string, body any) (int, answer) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %v", method, url, resp.StatusCode, err)
	}
	return resp.StatusCode, a
}

// newCart makes a cart holding items (sku -> quantity) and returns its id.
func newCart(t *testing.T, base string, items map[string]int) string {
	t.Helper()
	status, a := call(t, "POST", base+"/api/carts", nil)
	if status != 201 || len(a.Cart.ID) != 32 {
		t.Fatalf("create cart: %d %+v", status, a)
	}
	for sku, n := range items {
		if status, a := call(t, "POST", base+"/api/carts/"+a.Cart.ID+"/items", map[string]any{"sku": sku, "quantity": n}); status != 200 {
			t.Fatalf("add %s: %d %+v", sku, status, a)
		}
	}
	return a.Cart.ID
}

// cookieNamed is the cookie a response sets under name, or nil.
func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func backOffice(t *testing.T, base string) (out struct {
	Orders    []orderJSON    `json:"orders"`
	Stock     map[string]int `json:"stock"`
	Checkouts CheckoutStats  `json:"checkouts"`
}) {
	t.Helper()
	resp, err := http.Get(base + "/orders.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&out)
	return out
}

func TestPages(t *testing.T) {
	_, srv := newTestShop(t)
	cases := []struct {
		path   string
		status int
		want   []string
	}{
		{"/", 200, []string{"Limited sneaker A", "99.99", "5 left", `href="/p/team-jersey"`, "/auctions/42", "no bids yet", `src="/static/shop.js"`}},
		{"/products/1", 200, []string{"<h1>Limited sneaker A</h1>", `action="/cart/items"`, `name="sku" value="sneaker-a"`, `name="quantity"`, "Add to cart", `id="notice"`, `id="gql-add" data-product-id="sneaker-a"`, "Add to cart (GraphQL)"}},
		{"/products/nope", 404, []string{"Product not found"}},
		{"/p/no-such-thing", 404, []string{"Product not found"}},
		{"/cart", 200, []string{"Your cart is empty"}},
		{"/auctions/42", 200, []string{`action="/auctions/42/bid"`, `name="amount"`, "Place bid", "100.00"}},
		{"/auctions/99", 404, []string{"Auction not found"}},
		{"/nowhere", 404, []string{"Page not found"}},
		{"/orders", 200, []string{"No orders yet"}},
		{"/orders/1001", 404, []string{"Order not found"}},
		{"/static/shop.js", 200, []string{"error.message", "/api/graphql", "Failed to add item.", "addItemToOrder", "gql-add", "errors[0]"}},
	}
	for _, c := range cases {
		status, body := do(t, "GET", srv.URL+c.path, nil, "")
		if status != c.status {
			t.Errorf("%s: status %d, want %d", c.path, status, c.status)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: page lacks %q", c.path, w)
			}
		}
	}
}

// A product has two URLs with the same page.
func TestProductAliases(t *testing.T) {
	_, srv := newTestShop(t)
	for id, slug := range map[string]string{"1": "limited-sneaker-a", "2": "limited-sneaker-b", "3": "team-jersey"} {
		s1, byID := do(t, "GET", srv.URL+"/products/"+id, nil, "")
		s2, bySlug := do(t, "GET", srv.URL+"/p/"+slug, nil, "")
		if s1 != 200 || s2 != 200 || byID != bySlug {
			t.Errorf("/products/%s (%d) and /p/%s (%d) differ", id, s1, slug, s2)
		}
	}
}

// One add-to-cart URL for every product, the SKU in a JSON body; failures in the API's error shape.
func TestCart_OneAddToCartURLForEveryProduct(t *testing.T) {
	_, srv := newTestShop(t)
	resp, err := http.Post(srv.URL+"/api/carts", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookie := cookieNamed(resp, CartCookie)
	if resp.StatusCode != 201 || cookie == nil || cookie.HttpOnly || cookie.Path != "/" {
		t.Fatalf("create: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	items := srv.URL + "/api/carts/" + cookie.Value + "/items"
	for _, sku := range []string{"sneaker-a", "sneaker-b", "jersey"} {
		if status, a := call(t, "POST", items, map[string]any{"sku": sku, "quantity": 1}); status != 200 {
			t.Fatalf("add %s: %d %+v", sku, status, a)
		}
	}
	status, a := call(t, "POST", items, map[string]any{"sku": "jersey"}) // quantity defaults to 1
	if status != 200 || a.Cart.Count != 4 || len(a.Cart.Items) != 3 || a.Cart.Items[2].Quantity != 2 || a.Cart.Total != "329.96" {
		t.Fatalf("cart: %d %+v", status, a.Cart)
	}
	refusals := []struct {
		url    string
		body   any
		status int
		code   string
	}{
		{items, map[string]any{"sku": "nope", "quantity": 1}, 404, "PRODUCT_NOT_FOUND"},
		{items, map[string]any{"sku": "jersey", "quantity": 0}, 400, "INVALID_QUANTITY"},
		{items, map[string]any{"sku": "jersey", "quantity": 11}, 400, "INVALID_QUANTITY"},
		{items, map[string]any{"sku": "jersey", "quantity": 9}, 400, "INVALID_QUANTITY"}, // 2 + 9 > 10 per order
		{items, map[string]any{"sku": "sneaker-a", "quantity": 5}, 409, "OUT_OF_STOCK"},  // 1 + 5 > 5 left
		{items, map[string]any{"quantity": 1}, 400, "INVALID_REQUEST"},
		{items, "not an object", 400, "INVALID_REQUEST"},
		{srv.URL + "/api/carts/nope/items", map[string]any{"sku": "jersey"}, 404, "CART_NOT_FOUND"},
		{srv.URL + "/api/nothing", nil, 404, "NOT_FOUND"},
	}
	for _, c := range refusals {
		status, a := call(t, "POST", c.url, c.body)
		if status != c.status || a.Error.Code != c.code || a.Error.Message == "" {
			t.Errorf("%v: %d %+v, want %d %s with a message", c.body, status, a.Error, c.status, c.code)
		}
	}
	if status, a := call(t, "GET", srv.URL+"/api/carts/"+cookie.Value, nil); status != 200 || a.Cart.Count != 4 {
		t.Fatalf("get: %d %+v", status, a)
	}
}

// Without JavaScript the product form posts to /cart/items: into the cookie's cart (a new one at
// first), then on to the cart page, whose checkout form posts to the same checkout URL as the script.
func TestCart_WithoutJavaScript(t *testing.T) {
	_, srv := newTestShop(t)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: noRedirect.CheckRedirect}
	post := func(path string, form url.Values) (int, string, string) {
		resp, err := browser.PostForm(srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	get := func(path string) string {
		resp, err := browser.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if status, loc, _ := post("/cart/items", url.Values{"sku": {"jersey"}, "quantity": {"2"}}); status != 303 || loc != "/cart" {
		t.Fatalf("add: %d %s", status, loc)
	}
	post("/cart/items", url.Values{"sku": {"sneaker-b"}})
	page := get("/cart")
	for _, want := range []string{"Team jersey", "Limited sneaker B", "229.97", `class="checkout" method="post" action="/api/carts/`} {
		if !strings.Contains(page, want) {
			t.Fatalf("cart page lacks %q:\n%s", want, page)
		}
	}
	if status, _, body := post("/cart/items", url.Values{"sku": {"sneaker-a"}, "quantity": {"6"}}); status != 409 || !strings.Contains(body, "Only 5 of Limited sneaker A left") {
		t.Fatalf("too many: %d %s", status, body)
	}
	if status, _, body := post("/cart/items", url.Values{"sku": {"jersey"}, "quantity": {"x"}}); status != 400 || !strings.Contains(body, "Invalid quantity") {
		t.Fatalf("bad quantity: %d %s", status, body)
	}
	action := page[strings.Index(page, `action="/api/carts/`)+len(`action="`):]
	action = action[:strings.IndexByte(action, '"')]
	status, loc, _ := post(action, url.Values{"email": {"guest@example.com"}})
	if status != 303 || loc != "/orders/1001" {
		t.Fatalf("checkout form: %d %s", status, loc)
	}
	if page := get(loc); !strings.Contains(page, "Order #1001 confirmed") || !strings.Contains(page, "guest@example.com") || !strings.Contains(page, "<td>Team jersey</td><td>2</td>") {
		t.Fatalf("order page:\n%s", page)
	}
	if page := get("/cart"); !strings.Contains(page, "Your cart is empty") {
		t.Fatalf("the cart is not empty after the order:\n%s", page)
	}
	if status, _, body := post(action, nil); status != 400 || !strings.Contains(body, "Your cart is empty") {
		t.Fatalf("empty checkout form: %d %s", status, body)
	}
}

func TestCheckout(t *testing.T) {
	_, srv := newTestShop(t)
	id := newCart(t, srv.URL, map[string]int{"sneaker-a": 2, "jersey": 1})
	checkout := srv.URL + "/api/carts/" + id + "/checkout"
	status, a := call(t, "POST", checkout, map[string]string{"email": "guest@example.com"})
	if status != 201 || a.Order.Number != 1001 || a.Order.Total != "249.97" || a.Order.Email != "guest@example.com" || len(a.Order.Items) != 2 {
		t.Fatalf("checkout: %d %+v", status, a)
	}
	if status, a := call(t, "POST", checkout, nil); status != 400 || a.Error.Code != "EMPTY_CART" {
		t.Fatalf("empty cart: %d %+v", status, a)
	}
	if status, a := call(t, "POST", srv.URL+"/api/carts/nope/checkout", nil); status != 404 || a.Error.Code != "CART_NOT_FOUND" {
		t.Fatalf("unknown cart: %d %+v", status, a)
	}
	// Stock is taken at checkout; a cart holding more than is left by then is refused.
	first := newCart(t, srv.URL, map[string]int{"sneaker-a": 3})
	second := newCart(t, srv.URL, map[string]int{"sneaker-a": 1})
	if status, _ := call(t, "POST", srv.URL+"/api/carts/"+first+"/checkout", nil); status != 201 {
		t.Fatalf("first: %d", status)
	}
	if status, a := call(t, "POST", srv.URL+"/api/carts/"+second+"/checkout", nil); status != 409 || a.Error.Code != "OUT_OF_STOCK" {
		t.Fatalf("second: %d %+v", status, a)
	}
	if status, a := call(t, "POST", checkout, "not an object"); status != 400 || a.Error.Code != "INVALID_REQUEST" {
		t.Fatalf("bad body: %d %+v", status, a)
	}
	bo := backOffice(t, srv.URL)
	if len(bo.Orders) != 2 || bo.Stock["sneaker-a"] != 0 || bo.Stock["jersey"] != 999 || bo.Checkouts.Overlapping != 0 || bo.Checkouts.Failed != 0 {
		t.Fatalf("back office: %+v", bo)
	}
	if status, body := do(t, "GET", srv.URL+"/orders/1002", nil, ""); status != 200 || !strings.Contains(body, "Order #1002 confirmed") {
		t.Fatalf("order page: %d %s", status, body)
	}
}

// The shop's flaw, as real shops have it: checkouts that overlap take the same order number and all
// but one fail with 500. Checkouts one at a time never do.
func TestCheckout_OverlappingCheckoutsFailWith500(t *testing.T) {
	shop, srv := newTestShop(t)
	const buyers = 12
	carts := make([]string, buyers)
	for i := range carts {
		carts[i] = newCart(t, srv.URL, map[string]int{"jersey": 1})
	}
	statuses := make([]int, buyers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range carts {
		wg.Go(func() {
			<-start
			statuses[i], _ = call(t, "POST", srv.URL+"/api/carts/"+id+"/checkout", nil)
		})
	}
	close(start)
	wg.Wait()
	failed := 0
	for i, s := range statuses {
		switch s {
		case 201:
		case 500:
			failed++
			// The failed shopper's cart keeps its items: trying again, alone, works.
			if status, a := call(t, "POST", srv.URL+"/api/carts/"+carts[i]+"/checkout", nil); status != 201 {
				t.Errorf("retry of cart %d alone: %d %+v", i, status, a)
			}
		default:
			t.Errorf("checkout %d: %d", i, s)
		}
	}
	if failed == 0 {
		t.Fatalf("%d simultaneous checkouts, none failed: %v", buyers, statuses)
	}
	st := shop.CheckoutStats()
	if st.Failed != failed || st.Overlapping < failed || st.MaxParallel < 2 || st.Started != buyers+failed {
		t.Fatalf("stats %+v with %d failures", st, failed)
	}
	bo := backOffice(t, srv.URL)
	numbers := map[int]bool{}
	for _, o := range bo.Orders {
		numbers[o.Number] = true
	}
	if len(bo.Orders) != buyers || len(numbers) != buyers || bo.Stock["jersey"] != 1000-buyers || bo.Checkouts != st {
		t.Fatalf("orders %d (%d numbers), jersey stock %d, stats %+v", len(bo.Orders), len(numbers), bo.Stock["jersey"], bo.Checkouts)
	}
	t.Logf("%d of %d simultaneous checkouts failed with 500; %+v", failed, buyers, st)

	// The same buyers let through one at a time, each as soon as the previous one's answer arrives (a
	// proxy's max_in_flight: 1): no overlap, no failure.
	_, serial := newTestShop(t)
	lease := make(chan struct{}, 1)
	for range buyers {
		id := newCart(t, serial.URL, map[string]int{"jersey": 1})
		wg.Go(func() {
			lease <- struct{}{}
			resp, err := http.Post(serial.URL+"/api/carts/"+id+"/checkout", "application/json", nil)
			<-lease // released at the answer's headers, before its body is read
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 201 {
				t.Errorf("one at a time: %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if st := backOffice(t, serial.URL).Checkouts; st.Overlapping != 0 || st.Failed != 0 || st.MaxParallel != 1 || st.Started != buyers {
		t.Fatalf("one at a time: stats %+v", st)
	}
}

// However checkouts race, the shop never sells more than it has.
func TestCheckout_ConcurrentBuyersNeverOversell(t *testing.T) {
	_, srv := newTestShop(t, DBLatency(time.Millisecond))
	carts := make([]string, 30)
	for i := range carts {
		carts[i] = newCart(t, srv.URL, map[string]int{"sneaker-a": 1})
	}
	var mu sync.Mutex
	byStatus := map[int]int{}
	var wg sync.WaitGroup
	for _, id := range carts {
		wg.Go(func() {
			for range 5 { // retry a collision, as a shopper would
				status, _ := call(t, "POST", srv.URL+"/api/carts/"+id+"/checkout", nil)
				if status != 500 {
					mu.Lock()
					byStatus[status]++
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	bo := backOffice(t, srv.URL)
	if byStatus[201] > 5 || byStatus[201] != len(bo.Orders) || bo.Stock["sneaker-a"] != 5-byStatus[201] || byStatus[201]+byStatus[409] > 30 {
		t.Fatalf("statuses %v, %d orders, stock %d", byStatus, len(bo.Orders), bo.Stock["sneaker-a"])
	}
}

func TestBids(t *testing.T) {
	_, srv := newTestShop(t)
	bidURL := srv.URL + "/auctions/42/bid"
	if status, body := do(t, "POST", bidURL, url.Values{"amount": {"100.50"}}, ""); status != 200 || !strings.Contains(body, "Bid of 100.50 received") || !strings.Contains(body, `href="/auctions/42"`) {
		t.Fatalf("%d %s", status, body)
	}
	if status, _ := do(t, "POST", bidURL, url.Values{"amount": {"100.50"}}, ""); status != 409 {
		t.Fatalf("equal bid: %d", status)
	}
	if status, body := do(t, "POST", bidURL, url.Values{"amount": {"101"}}, "application/json"); status != 200 || !strings.Contains(body, `"amount":"101.00"`) {
		t.Fatalf("%d %s", status, body)
	}
	if status, body := do(t, "POST", bidURL, url.Values{"amount": {"50"}}, "application/json"); status != 409 || !strings.Contains(body, `{"error":{"code":"BID_TOO_LOW","message":"Bid more than 101.00."}}`) {
		t.Fatalf("low bid as JSON: %d %s", status, body)
	}
	for _, amount := range []string{"abc", "1.234", "-5", "", "1e3", "0"} {
		if status, _ := do(t, "POST", bidURL, url.Values{"amount": {amount}}, ""); status != 400 {
			t.Errorf("amount %q: %d", amount, status)
		}
	}
	if status, _ := do(t, "POST", bidURL, url.Values{"amount": {"99.99"}}, ""); status != 409 {
		t.Errorf("below the highest: %d", status)
	}
	if status, _ := do(t, "POST", srv.URL+"/auctions/99/bid", url.Values{"amount": {"1"}}, ""); status != 404 {
		t.Errorf("unknown auction: %d", status)
	}
	if _, body := do(t, "GET", srv.URL+"/auctions/42", nil, ""); !strings.Contains(body, "Highest bid: 101.00") {
		t.Errorf("auction page: %s", body)
	}
}

func TestStreamIsIncremental(t *testing.T) {
	_, srv := newTestShop(t)
	resp, err := http.Get(srv.URL + "/stream?n=2&interval_ms=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The second line comes 5 s later; the first must arrive before it.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "tick 1\n" {
		t.Fatalf("%q %v", line, err)
	}
}

func TestSlow(t *testing.T) {
	_, srv := newTestShop(t)
	for _, ms := range []string{"10", "-5", "junk"} {
		if status, body := do(t, "GET", srv.URL+"/slow?ms="+ms, nil, ""); status != 200 || body != "done\n" {
			t.Fatalf("ms=%s: %d %q", ms, status, body)
		}
	}
}

func TestParseMoney(t *testing.T) {
	good := map[string]int64{"1": 100, "1.5": 150, "123.45": 12345}
	for in, want := range good {
		if got, err := parseMoney(in); err != nil || got != want {
			t.Errorf("%q: %d %v", in, got, err)
		}
	}
	for _, in := range []string{"", "abc", "1.234", "-5", "1.", ".5", "1e3"} {
		if _, err := parseMoney(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestSessionCookie(t *testing.T) {
	_, srv := newTestShop(t)
	resp, err := http.Get(srv.URL + "/auctions/42")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	session := cookieNamed(resp, SessionCookie)
	if session == nil || len(session.Value) != 32 || !session.HttpOnly {
		t.Fatalf("first visit: cookies %v", resp.Cookies())
	}
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.AddCookie(session)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) != 0 {
		t.Fatalf("a visitor with a session got another: %v", resp.Cookies())
	}
}
