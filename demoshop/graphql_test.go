package demoshop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// gqlAnswer is a GraphQL response as the tests read it.
type gqlAnswer struct {
	Data   map[string]json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Path       []any          `json:"path"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

// gqlClient talks to /api/graphql as a browser does: one cookie jar.
type gqlClient struct {
	t    *testing.T
	base string
	http *http.Client
}

func newGQLClient(t *testing.T, base string) *gqlClient {
	jar, _ := cookiejar.New(nil)
	return &gqlClient{t: t, base: base, http: &http.Client{Jar: jar}}
}

// send sends a request and returns its status, headers and body.
func (c *gqlClient) send(method, contentType, query, body string) (int, http.Header, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+"/api/graphql"+query, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(b))
}

// post sends one JSON request and decodes the answer.
func (c *gqlClient) post(query string, vars map[string]any) (int, gqlAnswer, string) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	status, _, body := c.send("POST", "application/json", "", string(b))
	var a gqlAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		c.t.Fatalf("%s: %d, not JSON: %s", query, status, body)
	}
	return status, a, body
}

// cartCookie is the cart id of c's jar, or "".
func (c *gqlClient) cartCookie() string {
	u, _ := url.Parse(c.base)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == CartCookie {
			return ck.Value
		}
	}
	return ""
}

// field decodes data[name] into v.
func (a gqlAnswer) field(t *testing.T, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(a.Data[name], v); err != nil {
		t.Fatalf("data.%s: %v (%s)", name, err, a.Data[name])
	}
}

type gqlCart struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
	Total string `json:"total"`
	Items []struct {
		ID       string `json:"id"`
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	} `json:"items"`
}

// gqlResult is an UpdateOrderItemsResult with every field the tests select.
type gqlResult struct {
	Typename          string   `json:"__typename"`
	ErrorCode         string   `json:"errorCode"`
	Message           string   `json:"message"`
	QuantityAvailable int      `json:"quantityAvailable"`
	MaxItems          int      `json:"maxItems"`
	Order             *gqlCart `json:"order"`
	gqlCart
}

const resultFields = `__typename
	... on Order { id count total items { id sku quantity } }
	... on ErrorResult { errorCode message }
	... on InsufficientStockError { quantityAvailable order { count } }
	... on OrderLimitError { maxItems }`

func TestGraphQL_Queries(t *testing.T) {
	_, srv := newTestShop(t)
	id := newCart(t, srv.URL, map[string]int{"jersey": 2})
	c := newGQLClient(t, srv.URL)
	cases := []struct {
		query string
		vars  map[string]any
		want  string
	}{
		{`{ products { sku stock } }`, nil,
			`{"data":{"products":[{"sku":"sneaker-a","stock":5},{"sku":"sneaker-b","stock":50},{"sku":"jersey","stock":1000}]}}`},
		{`query Q($sku: String!) { product(sku: $sku) { id sku slug name price stock } }`, map[string]any{"sku": "sneaker-a"},
			`{"data":{"product":{"id":"1","sku":"sneaker-a","slug":"limited-sneaker-a","name":"Limited sneaker A","price":"99.99","stock":5}}}`},
		// Aliases, a named fragment and an inline one.
		{`query { byId: product(id: "2") { ...Names } bySlug: product(slug: "team-jersey") { ... on Product { id } } none: product(sku: "nope") { id } }
		  fragment Names on Product { id name }`, nil,
			`{"data":{"byId":{"id":"2","name":"Limited sneaker B"},"bySlug":{"id":"3"},"none":null}}`},
		{"# the cart badge\nquery Badge($cart: ID!) { cart(id: $cart) { count total items { id sku quantity unitPrice lineTotal product { stock } } } }", map[string]any{"cart": id},
			`{"data":{"cart":{"count":2,"total":"99.98","items":[{"id":"jersey","sku":"jersey","quantity":2,"unitPrice":"49.99","lineTotal":"99.98","product":{"stock":1000}}]}}}`},
		{`{ cart(id: "nope") { count } noID: cart { count } product { id } }`, nil, `{"data":{"cart":null,"noID":null,"product":null}}`},
		{`{ activeOrder { id } }`, nil, `{"data":{"activeOrder":null}}`},
		// The page script's read.
		{`query Refresh($cart: ID!, $sku: String!) { cart(id: $cart) { count } product(sku: $sku) { stock } }`, map[string]any{"cart": "", "sku": ""},
			`{"data":{"cart":null,"product":null}}`},
	}
	for _, tc := range cases {
		status, _, body := c.post(tc.query, tc.vars)
		if status != 200 || body != tc.want {
			t.Errorf("%s:\n %d %s\nwant 200 %s", tc.query, status, body, tc.want)
		}
	}
}

// addItemToOrder adds to the cart of the cart cookie (making one, and the cookie, at first) and answers
// a refusal as a member of its result union in a 200.
func TestGraphQL_AddItemToOrder(t *testing.T) {
	_, srv := newTestShop(t)
	c := newGQLClient(t, srv.URL)
	add := func(doc string, vars map[string]any) gqlResult {
		t.Helper()
		status, a, body := c.post(doc, vars)
		var r gqlResult
		if status != 200 || len(a.Errors) > 0 {
			t.Fatalf("%s: %d %s", doc, status, body)
		}
		a.field(t, "addItemToOrder", &r)
		return r
	}
	r := add(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 2) { `+resultFields+` } }`, nil)
	cookie := c.cartCookie()
	if r.Typename != "Order" || r.Count != 2 || r.Total != "199.98" || len(r.Items) != 1 || r.Items[0].ID != "sneaker-a" || cookie == "" || r.ID != cookie {
		t.Fatalf("literals: %+v, cookie %q", r, cookie)
	}
	byVars := `mutation Add($productVariantId: ID!, $quantity: Int!) {
		addItemToOrder(productVariantId: $productVariantId, quantity: $quantity) { ` + resultFields + ` } }`
	r = add(byVars, map[string]any{"productVariantId": "sneaker-a", "quantity": 2})
	if r.Typename != "Order" || r.Count != 4 || r.ID != cookie || c.cartCookie() != cookie {
		t.Fatalf("variables: %+v", r)
	}
	// 4 of 5 in the cart: 2 more is more than the shop has.
	r = add(byVars, map[string]any{"productVariantId": "sneaker-a", "quantity": 2})
	if r.Typename != "InsufficientStockError" || r.ErrorCode != "INSUFFICIENT_STOCK_ERROR" || r.Message != "Only 5 of Limited sneaker A left." ||
		r.QuantityAvailable != 5 || r.Order == nil || r.Order.Count != 4 {
		t.Fatalf("short stock: %+v", r)
	}
	refusals := []struct {
		vars      map[string]any
		typename  string
		errorCode string
	}{
		{map[string]any{"productVariantId": "jersey", "quantity": 11}, "OrderLimitError", "ORDER_LIMIT_ERROR"},
		{map[string]any{"productVariantId": "jersey", "quantity": 0}, "OrderLimitError", "ORDER_LIMIT_ERROR"},
		{map[string]any{"productVariantId": "jersey", "quantity": -1}, "NegativeQuantityError", "NEGATIVE_QUANTITY_ERROR"},
	}
	for _, tc := range refusals {
		if r := add(byVars, tc.vars); r.Typename != tc.typename || r.ErrorCode != tc.errorCode || r.Message == "" {
			t.Errorf("%v: %+v", tc.vars, r)
		}
	}
	if r := add(`mutation { addItemToOrder(productVariantId: "jersey", quantity: 11) { ... on OrderLimitError { maxItems } } }`, nil); r.MaxItems != 10 {
		t.Errorf("maxItems: %+v", r)
	}
	// An unknown product is an error of the field; data is null, as the field is non-null.
	status, a, body := c.post(`mutation { addItemToOrder(productVariantId: "99", quantity: 1) { __typename } }`, nil)
	if status != 200 || len(a.Errors) != 1 || a.Errors[0].Extensions["code"] != "ENTITY_NOT_FOUND" || !strings.Contains(body, `"data":null`) {
		t.Fatalf("unknown product: %d %s", status, body)
	}

	// Stock is the shop's at checkout: the cart's 4 units leave 1.
	if status, a := call(t, "POST", srv.URL+"/api/carts/"+cookie+"/checkout", nil); status != 201 || a.Order.Total != "399.96" {
		t.Fatalf("checkout: %d %+v", status, a)
	}
	_, a, _ = c.post(`{ product(id: "1") { stock } }`, nil)
	var p struct{ Stock int }
	a.field(t, "product", &p)
	if p.Stock != 1 {
		t.Fatalf("stock after the checkout of 4 of 5: %d", p.Stock)
	}
	// The same visitor goes on with the now empty cart, which holds no more than is left.
	if r := add(byVars, map[string]any{"productVariantId": "sneaker-a", "quantity": 2}); r.ErrorCode != "INSUFFICIENT_STOCK_ERROR" || r.Message != "Only 1 of Limited sneaker A left." {
		t.Fatalf("after the checkout: %+v", r)
	}

	// A cart cookie the shop does not know is replaced by a new cart's.
	expired := newGQLClient(t, srv.URL)
	u, _ := url.Parse(srv.URL)
	expired.http.Jar.SetCookies(u, []*http.Cookie{{Name: CartCookie, Value: "gone", Path: "/"}})
	_, a, body = expired.post(`mutation { addItemToOrder(productVariantId: "jersey", quantity: 1) { ... on Order { id count } } }`, nil)
	var made gqlCart
	a.field(t, "addItemToOrder", &made)
	if made.Count != 1 || made.ID == "gone" || expired.cartCookie() != made.ID {
		t.Fatalf("with an unknown cart cookie: %s, cookie %q", body, expired.cartCookie())
	}

	// Mutations run in order: two adds in one document go to the one cart the first made.
	fresh := newGQLClient(t, srv.URL)
	_, a, body = fresh.post(`mutation { a: addItemToOrder(productVariantId: "jersey", quantity: 1) { ... on Order { id count } }
		b: addItemToOrder(productVariantId: "sneaker-b", quantity: 2) { ... on Order { id count } } }`, nil)
	var first, second gqlCart
	a.field(t, "a", &first)
	a.field(t, "b", &second)
	if first.ID == "" || first.ID != second.ID || first.Count != 1 || second.Count != 3 || fresh.cartCookie() != first.ID {
		t.Fatalf("two adds: %s", body)
	}
	_, a, _ = fresh.post(`{ activeOrder { id count } }`, nil)
	var active gqlCart
	a.field(t, "activeOrder", &active)
	if active.ID != first.ID || active.Count != 3 {
		t.Fatalf("activeOrder: %+v", active)
	}
}

func TestGraphQL_AdjustOrderLine(t *testing.T) {
	_, srv := newTestShop(t)
	c := newGQLClient(t, srv.URL)
	adjust := func(line string, quantity int) (gqlResult, gqlAnswer) {
		t.Helper()
		status, a, body := c.post(`mutation Adjust($line: ID!, $q: Int!) { adjustOrderLine(orderLineId: $line, quantity: $q) { `+resultFields+` } }`,
			map[string]any{"line": line, "q": quantity})
		var r gqlResult
		if status != 200 {
			t.Fatalf("adjust %s to %d: %d %s", line, quantity, status, body)
		}
		if len(a.Errors) == 0 {
			a.field(t, "adjustOrderLine", &r)
		}
		return r, a
	}
	if _, a := adjust("sneaker-a", 1); len(a.Errors) != 1 || a.Errors[0].Extensions["code"] != "ENTITY_NOT_FOUND" {
		t.Fatalf("without a cart: %+v", a)
	}
	c.post(`mutation { a: addItemToOrder(productVariantId: "sneaker-a", quantity: 1) { __typename } b: addItemToOrder(productVariantId: "jersey", quantity: 2) { __typename } }`, nil)

	r, _ := adjust("sneaker-a", 4)
	if r.Typename != "Order" || r.Count != 6 || len(r.Items) != 2 || r.Items[0].ID != "sneaker-a" || r.Items[0].Quantity != 4 || r.Items[1].Quantity != 2 {
		t.Fatalf("1 -> 4: %+v", r)
	}
	r, _ = adjust("sneaker-a", 6) // 5 in stock
	if r.Typename != "InsufficientStockError" || r.ErrorCode != "INSUFFICIENT_STOCK_ERROR" || r.QuantityAvailable != 5 || r.Order.Count != 6 {
		t.Fatalf("1 -> 6: %+v", r)
	}
	r, _ = adjust("sneaker-a", 5) // the line's own units count once
	if r.Typename != "Order" || r.Items[0].Quantity != 5 {
		t.Fatalf("1 -> 5: %+v", r)
	}
	if r, _ = adjust("jersey", 11); r.ErrorCode != "ORDER_LIMIT_ERROR" {
		t.Fatalf("3 -> 11: %+v", r)
	}
	if r, _ = adjust("jersey", -2); r.ErrorCode != "NEGATIVE_QUANTITY_ERROR" {
		t.Fatalf("3 -> -2: %+v", r)
	}
	if _, a := adjust("sneaker-b", 1); len(a.Errors) != 1 || a.Errors[0].Extensions["code"] != "ENTITY_NOT_FOUND" {
		t.Fatalf("a product not in the cart: %+v", a)
	}
	r, _ = adjust("sneaker-a", 0)
	if r.Typename != "Order" || r.Count != 2 || len(r.Items) != 1 || r.Items[0].ID != "jersey" {
		t.Fatalf("1 -> 0 removes the line: %+v", r)
	}
	if status, a := call(t, "GET", srv.URL+"/api/carts/"+c.cartCookie(), nil); status != 200 || a.Cart.Count != 2 {
		t.Fatalf("the REST API's view: %d %+v", status, a)
	}
}

// A batch runs in order for one visitor and is answered with an array.
func TestGraphQL_Batch(t *testing.T) {
	_, srv := newTestShop(t)
	c := newGQLClient(t, srv.URL)
	status, _, body := c.send("POST", "application/json", "", `[
		{"query": "{ activeOrder { count } }"},
		{"query": "mutation M($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 3) { ... on Order { count } } }", "variables": {"id": "jersey"}, "operationName": "M"},
		{"query": "query A { activeOrder { count } } query B { products { id } }", "operationName": "A"},
		{"query": "{ nope }"},
		"not an object"
	]`)
	var answers []gqlAnswer
	if err := json.Unmarshal([]byte(body), &answers); err != nil || status != 200 || len(answers) != 5 {
		t.Fatalf("%d %s", status, body)
	}
	want := []string{`null`, `{"count":3}`, `{"count":3}`}
	for i, w := range want {
		key := map[int]string{0: "activeOrder", 1: "addItemToOrder", 2: "activeOrder"}[i]
		if got := string(answers[i].Data[key]); got != w || len(answers[i].Errors) > 0 {
			t.Errorf("answer %d: %s, want %s", i, got, w)
		}
	}
	if answers[3].Data != nil || len(answers[3].Errors) != 1 || answers[3].Errors[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
		t.Errorf("invalid member: %+v", answers[3])
	}
	if answers[4].Data != nil || len(answers[4].Errors) != 1 || answers[4].Errors[0].Extensions["code"] != "BAD_REQUEST" {
		t.Errorf("not an object: %+v", answers[4])
	}
	if c.cartCookie() == "" {
		t.Error("the batch's mutation set no cart cookie")
	}
	// None executed: 400.
	if status, _, body := c.send("POST", "application/json", "", `[{"query": "{ nope }"}, {"query": "{"}]`); status != 400 || !strings.HasPrefix(body, "[") {
		t.Errorf("a batch of invalid requests: %d %s", status, body)
	}
	for _, b := range []string{`[]`, `[` + strings.Repeat(`{"query": "{ products { id } }"},`, maxBatch) + `{"query": "{ products { id } }"}]`} {
		if status, _, _ := c.send("POST", "application/json", "", b); status != 400 {
			t.Errorf("%.40s: %d", b, status)
		}
	}
}

// GET serves queries; a mutation over GET is refused with 405 and does nothing.
func TestGraphQL_GET(t *testing.T) {
	shop, srv := newTestShop(t)
	c := newGQLClient(t, srv.URL)
	get := func(query, vars, operationName string) (int, http.Header, string) {
		v := url.Values{"query": {query}}
		if vars != "" {
			v.Set("variables", vars)
		}
		if operationName != "" {
			v.Set("operationName", operationName)
		}
		return c.send("GET", "", "?"+v.Encode(), "")
	}
	if status, _, body := get(`query P($sku: String) { product(sku: $sku) { stock } }`, `{"sku": "jersey"}`, ""); status != 200 || body != `{"data":{"product":{"stock":1000}}}` {
		t.Fatalf("GET query: %d %s", status, body)
	}
	mixed := `query Q { products { id } } mutation M { addItemToOrder(productVariantId: "jersey", quantity: 1) { __typename } }`
	if status, _, body := get(mixed, "", "Q"); status != 200 || !strings.Contains(body, `"products"`) {
		t.Fatalf("GET of a document's query: %d %s", status, body)
	}
	mutations := []struct{ query, vars, operationName string }{
		{`mutation { addItemToOrder(productVariantId: "jersey", quantity: 1) { __typename } }`, "", ""},
		{"# a comment {\nmutation Add($q: Int!) { addItemToOrder(productVariantId: \"jersey\", quantity: $q) { __typename } }", `{"q": 1}`, ""},
		{mixed, "", "M"},
		{`mutation { __typename }`, "", ""},
	}
	for _, m := range mutations {
		status, h, body := get(m.query, m.vars, m.operationName)
		if status != 405 || h.Get("Allow") != "POST" || !strings.Contains(body, `"errors"`) {
			t.Errorf("GET %s: %d %v %s", m.query, status, h.Get("Allow"), body)
		}
	}
	shop.mu.Lock()
	carts := len(shop.carts)
	shop.mu.Unlock()
	if carts != 0 || c.cartCookie() != "" {
		t.Fatalf("a refused GET made %d carts", carts)
	}
	// An invalid document is answered as such, whatever it holds.
	if status, _, body := get(`mutation { nope }`, "", ""); status != 400 || !strings.Contains(body, "GRAPHQL_VALIDATION_FAILED") {
		t.Errorf("GET of an invalid mutation: %d %s", status, body)
	}
	if status, _, _ := get(`{ products { id } }`, `not json`, ""); status != 400 {
		t.Errorf("GET with bad variables: %d", status)
	}
}

// Requests that do not parse or validate are answered 400 with the library's errors; other bodies and
// methods as HTTP says.
func TestGraphQL_RequestErrors(t *testing.T) {
	_, srv := newTestShop(t)
	c := newGQLClient(t, srv.URL)
	cases := []struct {
		query string
		vars  map[string]any
		code  string
		want  string
	}{
		{`{ orders { number } }`, nil, "GRAPHQL_VALIDATION_FAILED", `Cannot query field \"orders\" on type \"Query\".`},
		{`{ products }`, nil, "GRAPHQL_VALIDATION_FAILED", `must have a selection of subfields`},
		{`{ product(sku: 5) { id } }`, nil, "GRAPHQL_VALIDATION_FAILED", `String cannot represent a non string value: 5`},
		{`mutation { addItemToOrder(productVariantId: "sneaker-a") { __typename } }`, nil, "GRAPHQL_VALIDATION_FAILED", `argument \"quantity\" of type \"Int!\" is required`},
		{`query Q($q: Int!) { products { id } }`, nil, "GRAPHQL_VALIDATION_FAILED", `Variable \"q\" has invalid value null.`},
		{`{ product(sku: $missing) { id } }`, nil, "GRAPHQL_VALIDATION_FAILED", `Variable \"$missing\" is not defined.`},
		{`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) { count } }`, nil, "GRAPHQL_VALIDATION_FAILED", `Cannot query field \"count\" on type \"UpdateOrderItemsResult\"`},
		{`{ product(sku: "x) { id } }`, nil, "GRAPHQL_PARSE_FAILED", `syntax error`},
		{`{ products `, nil, "GRAPHQL_PARSE_FAILED", `syntax error`},
		{``, nil, "GRAPHQL_VALIDATION_FAILED", `no operations in query document`},
		{`query A { products { id } } query B { products { id } }`, nil, "GRAPHQL_VALIDATION_FAILED", `more than one operation`},
	}
	for _, tc := range cases {
		status, a, body := c.post(tc.query, tc.vars)
		if status != 400 || a.Data != nil || len(a.Errors) == 0 || a.Errors[0].Extensions["code"] != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%q: %d %s; want 400, %s, %s", tc.query, status, body, tc.code, tc.want)
		}
	}
	sends := []struct {
		method, contentType, body string
		status                    int
	}{
		{"POST", "application/json", "not json", 400},
		{"POST", "application/json", `{"query": 5}`, 400},
		{"POST", "", `{"query": "{ products { id } }"}`, 200},
		{"POST", "application/json; charset=utf-8", `{"query": "{ products { id } }"}`, 200},
		{"POST", "application/graphql", `{ product(id: "3") { name } }`, 200},
		{"POST", "application/graphql", `{ product(id: "3") }`, 400},
		{"POST", "text/plain", `{"query": "{ products { id } }"}`, 415},
		{"POST", "application/json", `{"query": "` + strings.Repeat(" ", maxGraphQLBody) + `"}`, 413},
		{"PUT", "application/json", `{"query": "{ products { id } }"}`, 405},
	}
	for _, s := range sends {
		status, _, body := c.send(s.method, s.contentType, "", s.body)
		if status != s.status || !strings.HasPrefix(body, "{") {
			t.Errorf("%s %s %.40s: %d %.200s, want %d", s.method, s.contentType, s.body, status, body, s.status)
		}
	}
	if _, _, body := c.send("POST", "application/graphql", "", `{ product(id: "3") { name } }`); body != `{"data":{"product":{"name":"Team jersey"}}}` {
		t.Errorf("application/graphql: %s", body)
	}
}

// The hook and ExecGraphQL report every addItemToOrder the executor ran, with its arguments as it
// resolved them: after variable coercion, in document order, whether the cart took the items or not.
func TestGraphQL_AddItemCalls(t *testing.T) {
	var mu sync.Mutex
	var hooked []AddItemCall
	shop, srv := newTestShop(t, OnAddItem(func(id string, quantity int32) {
		mu.Lock()
		hooked = append(hooked, AddItemCall{id, quantity})
		mu.Unlock()
	}))
	doc := `mutation Add($id: ID!, $q: Int!, $skip: Boolean = false) {
		a: addItemToOrder(productVariantId: $id, quantity: $q) { __typename }
		b: addItemToOrder(productVariantId: "sneaker-b", quantity: 40) { __typename }
		c: addItemToOrder(productVariantId: "99", quantity: -3) { __typename }
		d: addItemToOrder(productVariantId: "sneaker-a", quantity: 1) @skip(if: $skip) { __typename }
	}`
	vars := map[string]any{"id": "jersey", "q": 2, "skip": true}
	result, calls := shop.ExecGraphQL(context.Background(), doc, vars, "")
	want := []AddItemCall{{"jersey", 2}, {"sneaker-b", 40}, {"99", -3}}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %+v, want %+v; %s", calls, want, result)
	}
	if string(result) != `{"data":{"a":{"__typename":"Order"},"b":{"__typename":"OrderLimitError"},"c":{"__typename":"NegativeQuantityError"}}}` {
		t.Fatalf("result %s", result)
	}
	if len(vars) != 3 {
		t.Fatalf("ExecGraphQL changed the variables: %v", vars)
	}
	// The library coerces variable values as it executes (graphql-go's way, not the spec's): a value it
	// cannot coerce drops the field that uses it and the fields after it in its selection set, with
	// an error without a path; the fields before run.
	result, calls = shop.ExecGraphQL(context.Background(), `mutation($q: Int!) {
		a: addItemToOrder(productVariantId: "jersey", quantity: 1) { __typename }
		b: addItemToOrder(productVariantId: "jersey", quantity: $q) { __typename }
		c: addItemToOrder(productVariantId: "jersey", quantity: 1) { __typename } }`, map[string]any{"q": "x"}, "")
	if !slices.Equal(calls, []AddItemCall{{"jersey", 1}}) || string(result) !=
		`{"errors":[{"message":"could not unmarshal \"x\" (string) into int32: incompatible type: string"}],"data":{"a":{"__typename":"Order"}}}` {
		t.Fatalf("a variable of the wrong type: %s %+v", result, calls)
	}
	want = append(want, AddItemCall{"jersey", 1})
	// Over HTTP, with the variables' JSON numbers coerced to Int.
	c := newGQLClient(t, srv.URL)
	c.post(`mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { __typename } }`, map[string]any{"id": "sneaker-a", "q": 4.0})
	if r, calls := shop.ExecGraphQL(context.Background(), `{ products { id } }`, nil, ""); len(calls) != 0 || !strings.HasPrefix(string(r), `{"data":{"products":`) {
		t.Fatalf("a query: %s %v", r, calls)
	}
	if r, calls := shop.ExecGraphQL(context.Background(), `{ nope }`, nil, ""); len(calls) != 0 || strings.Contains(string(r), `"data"`) {
		t.Fatalf("an invalid request: %s %v", r, calls)
	}
	mu.Lock()
	got := slices.Clone(hooked)
	mu.Unlock()
	if want := append(want, AddItemCall{"sneaker-a", 4}); !slices.Equal(got, want) {
		t.Fatalf("hook %+v, want %+v", got, want)
	}
}

// ExecGraphQL and the endpoint are safe for concurrent use, and never sell more than the shop has.
func TestGraphQL_Concurrent(t *testing.T) {
	shop, srv := newTestShop(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			doc := fmt.Sprintf(`mutation { addItemToOrder(productVariantId: "%s", quantity: 1) { ... on Order { id count } ... on ErrorResult { message } } }`, []string{"sneaker-a", "sneaker-b", "jersey"}[i%3])
			if i%2 == 0 {
				if r, calls := shop.ExecGraphQL(context.Background(), doc+` `, nil, ""); len(calls) != 1 || !strings.Contains(string(r), `"count":1`) {
					t.Errorf("exec %d: %s %v", i, r, calls)
				}
				return
			}
			c := newGQLClient(t, srv.URL)
			if status, _, body := c.post(doc, nil); status != 200 || !strings.Contains(body, `"count":1`) {
				t.Errorf("post %d: %d %s", i, status, body)
			}
			c.post(`{ products { stock } activeOrder { count items { product { stock } } } }`, nil)
		})
	}
	wg.Wait()
}

func TestOperationType(t *testing.T) {
	cases := []struct {
		doc, operationName, want string
	}{
		{`{ products { id } }`, "", "query"},
		{`query { a }`, "", "query"},
		{`mutation{a}`, "", "mutation"},
		{`subscription S { a }`, "S", "subscription"},
		{`mutation M($x: In = {a: "}"}) @d(s: "{") { a }`, "", "mutation"},
		{"# mutation\nquery Q { a(s: \"\"\"\nmutation \\\"\"\" {\n\"\"\") }", "", "query"},
		{`fragment F on Mutation { a } mutation M { ...F }`, "", "mutation"},
		{`query Q { a } mutation M { b }`, "M", "mutation"},
		{`query Q { a } mutation M { b }`, "Q", "query"},
		{`query Q { a } mutation M { b }`, "", ""},
		{`query Q { a } mutation M { b }`, "X", ""},
		{`mutation M { b }`, "X", ""},
		{`{ a } { b }`, "", ""},
		{``, "", ""},
	}
	for _, c := range cases {
		if got := operationType(c.doc, c.operationName); got != c.want {
			t.Errorf("%q (%q): %q, want %q", c.doc, c.operationName, got, c.want)
		}
	}
}

// Should a GET's mutation get past the method check, its resolvers refuse it, and the GET is answered 405.
func TestGraphQL_ReadOnlyVisitRefusesMutations(t *testing.T) {
	shop, _ := newTestShop(t)
	v := &visit{s: shop, readOnly: true}
	resp := v.exec(context.Background(), gqlRequest{Query: `mutation { a: adjustOrderLine(orderLineId: "sneaker-a", quantity: 1) { __typename }
		b: addItemToOrder(productVariantId: "sneaker-a", quantity: 1) { __typename } }`})
	if !v.refusedMutation || len(resp.Errors) != 2 || resp.Errors[1].Extensions["code"] != "METHOD_NOT_ALLOWED" || len(shop.carts) != 0 {
		t.Fatalf("%+v %s", resp.Errors, resp.Data)
	}
}
