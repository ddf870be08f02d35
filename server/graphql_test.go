package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/demoshop"
	"github.com/edgeq/edgeq/internal/testutil/graphqljs"
)

// gqlShop is the demo shop (its GraphQL endpoint executed by graph-gophers/graphql-go, not by edgeq's
// parser) recording every addItemToOrder its executor runs.
type gqlShop struct {
	*httptest.Server
	mu    sync.Mutex
	calls []demoshop.AddItemCall
}

func newGQLShop(t *testing.T) *gqlShop {
	t.Helper()
	s := &gqlShop{}
	shop, err := demoshop.New(slog.New(slog.DiscardHandler), demoshop.OnAddItem(func(id string, q int32) {
		s.mu.Lock()
		s.calls = append(s.calls, demoshop.AddItemCall{ProductVariantID: id, Quantity: q})
		s.mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	s.Server = httptest.NewServer(shop)
	t.Cleanup(s.Close)
	return s
}

func (s *gqlShop) take() []demoshop.AddItemCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	return calls
}

func graphqlConfig(originURL, redisAddr, extraRoutes string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
products:
  - {id: sneaker-a, stock: 1000, per_user_limit: 1000, name: "Sneaker A"}
routes:
  - name: add_gql
    match: "/api/graphql"
    graphql: {fields: [addItemToOrder], refuse_fields: [adjustOrderLine]}
    admission:
      type: stock
      product: "graphql:productVariantId"
      quantity: "graphql:quantity"
      unknown_product: pass
      user: "header:X-User"
      release_on: ["4xx", "5xx", "error", "answer:data.$field.errorCode", "answer:!data.$field"]
%s`, originURL, redisAddr, extraRoutes)
}

func remainingStock(t *testing.T, in *instance, product string) int64 {
	t.Helper()
	req, _ := http.NewRequest("GET", in.admin+"/api/products/"+product, nil)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct {
		RemainingStock int64 `json:"remaining_stock"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 200 {
		t.Fatalf("product %s: %d %v", product, resp.StatusCode, err)
	}
	return p.RemainingStock
}

type gqlReply struct {
	status int
	body   string
	header http.Header
}

func sendGQL(t *testing.T, method, target, contentType, user string, body []byte) gqlReply {
	t.Helper()
	return sendGQLWith(t, method, target, contentType, user, body, nil)
}

// gqlClient bounds a request of the GraphQL tests: a reading that costs more than this is a failure.
var gqlClient = &http.Client{Timeout: 10 * time.Second}

func sendGQLWith(t *testing.T, method, target, contentType, user string, body []byte, header http.Header) gqlReply {
	t.Helper()
	req, _ := http.NewRequest(method, target, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-User", user)
	resp, err := gqlClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return gqlReply{resp.StatusCode, string(raw), resp.Header}
}

func gqlJSON(query string, variables any, extra map[string]any) []byte {
	obj := map[string]any{"query": query}
	if variables != nil {
		obj["variables"] = variables
	}
	for k, v := range extra {
		obj[k] = v
	}
	b, _ := json.Marshal(obj)
	return b
}

const addSel = `{ __typename ... on Order { count } ... on ErrorResult { errorCode message } }`

// gqlExecutor is a GraphQL shop the walk-past table runs against: the demo shop (graph-gophers/graphql-go)
// or the graphql-js referee in one of its readings. calls says which addItemToOrder the shop executed for
// the request just answered.
type gqlExecutor struct {
	name   string
	origin string
	header http.Header
	calls  func(t *testing.T, r gqlReply) []demoshop.AddItemCall
}

func gqlExecutors(t *testing.T) []gqlExecutor {
	shop := newGQLShop(t)
	executors := []gqlExecutor{{name: "graph-gophers", origin: shop.URL,
		calls: func(*testing.T, gqlReply) []demoshop.AddItemCall { return shop.take() }}}
	referee := graphqljs.Start(t, demoshop.GraphQLSchema)
	for _, reading := range graphqljs.Readings {
		executors = append(executors, gqlExecutor{name: "graphql-js/" + reading, origin: referee.URL,
			header: http.Header{graphqljs.ReadingHeader: {reading}},
			calls: func(t *testing.T, r gqlReply) []demoshop.AddItemCall {
				calls, err := graphqljs.Calls(&http.Response{Header: r.header})
				if err != nil {
					t.Fatal(err)
				}
				var out []demoshop.AddItemCall
				for _, c := range calls {
					out = append(out, demoshop.AddItemCall{ProductVariantID: c.ProductVariantID, Quantity: int32(c.Quantity)})
				}
				return out
			}})
	}
	return executors
}

// refusalCodes are the codes of edgeq's refusals on a graphql: route, by status.
var refusalCodes = map[int]string{400: "INVALID_REQUEST", 403: "OPERATION_REFUSED", 405: "METHOD_NOT_ALLOWED", 200: "PERSISTED_QUERY_NOT_FOUND"}

// One graphql: admission route on the shop's GraphQL endpoint for addItemToOrder, in front of two
// executors (graph-gophers/graphql-go, graphql-js in three servers' readings). Other operations pass
// with no admission; every way a shop's reading walked past edgeq's is admitted with the units the shop
// adds, or refused before the shop sees it (docs/reference.md "GraphQL routes").
func TestGraphQL_EveryWalkPastIsAdmittedAsTheShopAddsOrRefused(t *testing.T) {
	for _, ex := range gqlExecutors(t) {
		t.Run(ex.name, func(t *testing.T) { walkPast(t, ex) })
	}
}

func walkPast(t *testing.T, ex gqlExecutor) {
	redisSrv := privateRedis(t)
	in := start(t, graphqlConfig(ex.origin, redisSrv.Addr(), ""))
	endpoint := in.public + "/api/graphql"
	admitted := func() float64 { return in.metric(t, `edgeq_admissions_total{result="admitted",type="stock"}`) }

	// Other operations pass untouched, with no admission.
	before := admitted()
	for _, body := range [][]byte{
		gqlJSON(`{ products { id sku stock } }`, nil, nil),
		gqlJSON(`query { activeOrder { id } }`, nil, nil),
		gqlJSON(`mutation { addItemToOrder(productVariantId: "jersey", quantity: 1) `+addSel+` }`, nil, nil), // unknown to edgeq: passes
	} {
		r := sendGQLWith(t, "POST", endpoint, "application/json", "browser", body, ex.header)
		if r.status != 200 || strings.Contains(r.body, `"errors"`) {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
		ex.calls(t, r)
	}
	if r := sendGQLWith(t, "GET", endpoint+"?"+url.Values{"query": {`{ products { id } }`}}.Encode(), "", "browser", nil, ex.header); r.status != 200 {
		t.Errorf("GET query: %d %s", r.status, r.body)
	}
	if got := admitted(); got != before {
		t.Errorf("operations other than addItemToOrder were admitted: %v -> %v", before, got)
	}

	add := `mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) ` + addSel + ` }`
	plain := gqlJSON(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) `+addSel+` }`, nil, nil)
	escaped := `"mutation { addItemTo\u004frder(productVariantId: \"sneaker-a\", quantity: 1) ` + strings.ReplaceAll(addSel, `"`, `\"`) + ` }"`
	addHash := sha256Hex(add)
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("operations", string(gqlJSON(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 2) `+addSel+` }`, nil, nil)))
	mw.WriteField("map", `{}`)
	mw.Close()
	// A document graph-gophers/graphql-go reads as two operations (its block string ends at \"""), the
	// others as one query whose block string holds the mutation.
	blockString := "query Q { product(sku: \"\"\"a \\\"\"\") { id } }\nmutation M { addItemToOrder(productVariantId: \"sneaker-a\", quantity: 1) " + addSel + " }\n# \"\"\") { id } }"
	// A CPU bomb: anonymous operations spreading a long chain of fragments, taught under its hash, then
	// named by every item of a batch.
	bomb := fragmentBomb(600, 600)
	bombHash := sha256Hex(bomb)
	bombItem := `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + bombHash + `"}}}`
	bombBatch := []byte("[" + strings.TrimSuffix(strings.Repeat(bombItem+",", 100), ",") + "]")

	cases := []struct {
		name, method, contentType string
		target                    string
		body                      []byte
		refused                   int // the status edgeq refuses with; 0: admitted (or passed)
	}{
		{"inline literal with a decoy variable", "POST", "application/json", "",
			gqlJSON(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) `+addSel+` }`, map[string]any{"productVariantId": "jersey", "quantity": 1}, nil), 0},
		{"renamed variable", "POST", "application/json", "",
			gqlJSON(`mutation($v: ID!) { addItemToOrder(productVariantId: $v, quantity: 1) `+addSel+` }`, map[string]any{"v": "sneaker-a", "productVariantId": "jersey"}, nil), 0},
		{"inline quantity", "POST", "application/json", "",
			gqlJSON(`mutation($productVariantId: ID!) { addItemToOrder(productVariantId: $productVariantId, quantity: 5) `+addSel+` }`, map[string]any{"productVariantId": "sneaker-a", "quantity": 1}, nil), 0},
		{"fragments", "POST", "application/json", "",
			gqlJSON(`mutation { ...A } fragment A on Mutation { ... on Mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 2) `+addSel+` } }`, nil, nil), 0},
		{"variable default (Int! with a default: graph-gophers refuses it, the unit goes back)", "POST", "application/json", "",
			gqlJSON(`mutation($q: Int! = 3) { addItemToOrder(productVariantId: "sneaker-a", quantity: $q) `+addSel+` }`, nil, nil), 0},
		{"application/graphql", "POST", "application/graphql", "",
			[]byte(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) ` + addSel + ` }`), 0},
		{"form body (shops that refuse it: the unit goes back)", "POST", "application/x-www-form-urlencoded", "",
			[]byte(url.Values{"query": {`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) ` + addSel + ` }`}}.Encode()), 0},
		{"multipart operations (shops that refuse it: the unit goes back)", "POST", mw.FormDataContentType(), "", mp.Bytes(), 0},
		{"aliases", "POST", "application/json", "",
			gqlJSON(`mutation { a: addItemToOrder(productVariantId: "sneaker-a", quantity: 1) `+addSel+` b: addItemToOrder(productVariantId: "sneaker-a", quantity: 1) `+addSel+` }`, nil, nil), 400},
		{"batched twice", "POST", "application/json", "",
			[]byte(`[` + string(gqlJSON(add, map[string]any{"id": "sneaker-a", "q": 1}, nil)) + `,` + string(gqlJSON(add, map[string]any{"id": "sneaker-a", "q": 1}, nil)) + `]`), 400},
		{"@skip", "POST", "application/json", "",
			gqlJSON(`mutation($s: Boolean!) { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) @skip(if: $s) `+addSel+` }`, map[string]any{"s": false}, nil), 400},
		{"@include", "POST", "application/json", "",
			gqlJSON(`mutation($i: Boolean!) { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) @include(if: $i) `+addSel+` }`, map[string]any{"i": true}, nil), 400},
		{"several operations without operationName", "POST", "application/json", "",
			gqlJSON(`query P { products { id } } mutation M { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) `+addSel+` }`, nil, nil), 400},
		{"hash-only persisted query, unknown hash", "POST", "application/json", "",
			[]byte(`{"variables":{"id":"sneaker-a","q":1},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + addHash + `"}}}`), 200},
		{"document under a mismatching hash", "POST", "application/json", "",
			gqlJSON(add, map[string]any{"id": "sneaker-a", "q": 1}, map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("0", 64)}}}), 400},
		{"unparsable document naming the field", "POST", "application/json", "",
			gqlJSON(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) { __typename `, nil, nil), 400},
		{"GET", "GET", "", "?" + url.Values{"query": {`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) ` + addSel + ` }`}}.Encode(), nil, 405},
		{"adjustOrderLine", "POST", "application/json", "",
			gqlJSON(`mutation { adjustOrderLine(orderLineId: "sneaker-a", quantity: 4) `+addSel+` }`, nil, nil), 403},
		{"the document with its hash (learnt)", "POST", "application/json", "",
			gqlJSON(add, map[string]any{"id": "sneaker-a", "q": 2}, map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": addHash}}}), 0},
		{"hash-only, after the document was sent with its hash (shops without persisted queries refuse it: the unit goes back)", "POST", "application/json", "",
			[]byte(`{"variables":{"id":"sneaker-a","q":1},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + addHash + `"}}}`), 0},

		// 1. A query string edgeq cannot parse, beside a body the shop executes.
		{"a query string that does not parse (;)", "POST", "application/json", "?;", plain, 400},
		{"a query string that does not parse (%zz)", "POST", "application/json", "?x=%zz", plain, 400},
		// 2. operationName in the URL naming no operation, a body with one unnamed operation.
		{"operationName in the URL naming no operation", "POST", "application/json", "?operationName=x", plain, 400},
		// 3. Bodies edgeq cannot decode that a server's JSON parser reads, the field's name escaped.
		{"a key given twice, the name escaped", "POST", "application/json", "", []byte(`{"query":` + escaped + `,"a":1,"a":2}`), 400},
		{"Query beside query", "POST", "application/json", "",
			[]byte(`{"query":"{ products { id } }","Query":` + escaped + `}`), 400},
		{"extensions not an object, the name escaped", "POST", "application/json", "", []byte(`{"query":` + escaped + `,"extensions":1}`), 400},
		{"documentId not a string, the name escaped", "POST", "application/json", "", []byte(`{"query":` + escaped + `,"documentId":5}`), 400},
		{"a batch with a non-object item, the name escaped", "POST", "application/json", "", []byte(`[{"query":` + escaped + `},1]`), 400},
		// 4. A block string holding \""": one query to edgeq and graphql-js, two operations to graph-gophers.
		{"a block string holding an escaped triple quote", "POST", "application/json", "",
			gqlJSON(blockString, nil, map[string]any{"operationName": "M"}), 400},
		// 5. A CPU bomb: edgeq answers within the client's bound (the shop executes none of it).
		{"teaching a fragment bomb", "POST", "application/json", "",
			[]byte(`{"query":` + strconvQuote(bomb) + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + bombHash + `"}}}`), 0},
		{"a batch of persisted queries naming the bomb", "POST", "application/json", "", bombBatch, 0},
		// 6. An error inside a 200 without the field's data gives the units back.
		{"a quantity the shop does not coerce (a string)", "POST", "application/json", "",
			gqlJSON(add, map[string]any{"id": "sneaker-a", "q": "2"}, nil), 0},
		{"a null quantity", "POST", "application/json", "",
			gqlJSON(add, map[string]any{"id": "sneaker-a", "q": nil}, nil), 0},
	}
	stock := remainingStock(t, in, "sneaker-a")
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sendGQLWith(t, c.method, endpoint+c.target, c.contentType, fmt.Sprintf("buyer-%d", i), c.body, ex.header)
			calls := ex.calls(t, r)
			added := int64(0)
			for _, call := range calls {
				if call.ProductVariantID == "sneaker-a" && r.status == 200 && strings.Contains(r.body, `"__typename":"Order"`) {
					added += int64(call.Quantity)
				}
			}
			if c.refused != 0 {
				var body struct {
					Errors []struct {
						Message    string         `json:"message"`
						Extensions map[string]any `json:"extensions"`
					} `json:"errors"`
				}
				json.Unmarshal([]byte(r.body), &body)
				if r.status != c.refused || len(body.Errors) != 1 || body.Errors[0].Extensions["code"] != refusalCodes[c.refused] || len(calls) != 0 {
					t.Errorf("want edgeq's GraphQL-shaped %d refusal before the shop: %d %s, shop executed %v", c.refused, r.status, clip(r.body), calls)
				}
			}
			if c.refused == 0 && len(calls) > 0 && added == 0 && !strings.Contains(r.body, "errorCode") && r.status == 200 && !strings.Contains(r.body, `"errors"`) {
				t.Errorf("the shop executed %v but added nothing: %s", calls, r.body)
			}
			want := stock - added
			eventually(t, fmt.Sprintf("%s: stock %d (the shop added %d)", c.name, want, added), func() bool {
				return remainingStock(t, in, "sneaker-a") == want
			})
			stock = want
			t.Logf("%d %s; shop added %d", r.status, clip(r.body), added)
		})
	}
}

// fragmentBomb is a document of ops anonymous mutations each spreading the head of one chain of chain
// fragments, each spreading the next.
func fragmentBomb(ops, chain int) string {
	var b strings.Builder
	for range ops {
		b.WriteString("mutation{...F0}")
	}
	for i := range chain - 1 {
		fmt.Fprintf(&b, "fragment F%d on Mutation{...F%d}", i, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Mutation{products{id}}", chain-1)
	return b.String()
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

// release_on answer:data.$field.errorCode gives back a unit the shop refused
// inside a 200 (the demo shop's ORDER_LIMIT_ERROR and INSUFFICIENT_STOCK_ERROR results), also under an
// alias; complete_on: answer:data.$field.code on the order-placing mutation frees the visitor's place.
func TestGraphQL_AnswersReadAsTheShopMeansThem(t *testing.T) {
	shop := newGQLShop(t)
	redisSrv := privateRedis(t)
	in := start(t, graphqlConfig(shop.URL, redisSrv.Addr(), ""))
	endpoint := in.public + "/api/graphql"
	stock := remainingStock(t, in, "sneaker-a")
	// 11 of one product: the shop refuses with ORDER_LIMIT_ERROR inside a 200.
	r := sendGQL(t, "POST", endpoint, "application/json", "limit",
		gqlJSON(`mutation { mine: addItemToOrder(productVariantId: "sneaker-a", quantity: 11) `+addSel+` }`, nil, nil))
	if r.status != 200 || !strings.Contains(r.body, "ORDER_LIMIT_ERROR") {
		t.Fatalf("the shop's refusal: %d %s", r.status, r.body)
	}
	eventually(t, "the refused units back", func() bool { return remainingStock(t, in, "sneaker-a") == stock })
	// 6 when the shop has 5: INSUFFICIENT_STOCK_ERROR, gzip-compressed (the client accepts it).
	req, _ := http.NewRequest("POST", endpoint, bytes.NewReader(gqlJSON(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 6) `+addSel+` }`, nil, nil)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "short")
	req.Header.Set("Accept-Encoding", "br, gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("insufficient stock: %d", resp.StatusCode)
	}
	eventually(t, "the units the shop did not have back", func() bool { return remainingStock(t, in, "sneaker-a") == stock })
	// A success keeps its units.
	if r := sendGQL(t, "POST", endpoint, "application/json", "ok", gqlJSON(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 2) `+addSel+` }`, nil, nil)); !strings.Contains(r.body, `"Order"`) {
		t.Fatalf("add: %s", r.body)
	}
	eventually(t, "two units taken", func() bool { return remainingStock(t, in, "sneaker-a") == stock-2 })
}

// complete_on on a graphql: route: the shop's order-placing mutation answers its order, the visitor's
// session ends and the next one in line is served.
func TestGraphQL_CompleteOnTheOrderPlacingMutation(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(string(body), "declined"):
			io.WriteString(w, `{"data":{"pay":{"__typename":"PaymentDeclinedError","errorCode":"PAYMENT_DECLINED_ERROR"}}}`)
		case strings.Contains(string(body), "addPaymentToOrder"):
			io.WriteString(w, `{"data":{"pay":{"__typename":"Order","code":"A1B2"}}}`)
		default:
			io.WriteString(w, `{"data":{"products":[]}}`)
		}
	}))
	t.Cleanup(origin.Close)
	redisSrv := privateRedis(t)
	in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: drop, capacity: 1, token_ttl: 10m}
routes:
  - name: place_order
    match: "/shop-api"
    queue: drop
    graphql: {fields: [addPaymentToOrder]}
    complete_on: ["answer:data.$field.code"]
`, origin.URL, redisSrv.Addr()))
	_, first := joinQueue(t, in, "drop")
	_, second := joinQueue(t, in, "drop")
	tokenOf := func(id string) (int, string) {
		resp, err := http.PostForm(in.public+"/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {id}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			AccessToken string `json:"access_token"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.AccessToken
	}
	status, token := tokenOf(first)
	if status != 200 {
		t.Fatalf("first visitor: %d", status)
	}
	if status, _ := tokenOf(second); status != http.StatusAccepted {
		t.Fatalf("capacity 1, second visitor: %d", status)
	}
	pay := func(doc string) int {
		req, _ := http.NewRequest("POST", in.public+"/shop-api", strings.NewReader(string(gqlJSON(doc, nil, nil))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// A read on the same path is not the route's; a declined payment completes nothing.
	if got := pay(`{ products { id } }`); got != 200 {
		t.Fatalf("a query on the path: %d", got)
	}
	if got := pay(`mutation { pay: addPaymentToOrder(input: {method: "declined"}) { __typename } }`); got != 200 {
		t.Fatalf("declined: %d", got)
	}
	if status, _ := tokenOf(second); status != http.StatusAccepted {
		t.Fatalf("a declined payment freed the place: %d", status)
	}
	if got := pay(`mutation { pay: addPaymentToOrder(input: {method: "card"}) { __typename ... on Order { code } } }`); got != 200 {
		t.Fatalf("payment: %d", got)
	}
	eventually(t, "the second visitor served", func() bool { status, _ := tokenOf(second); return status == 200 })
	if got := pay(`mutation { pay: addPaymentToOrder(input: {method: "card"}) { __typename } }`); got != http.StatusForbidden {
		t.Fatalf("the completed token still opens the route: %d", got)
	}
}

// edgeq check warns when a graphql: admission route keeps the units of an answer without the guarded
// field's data (an error inside a 200), and only then.
func TestCheck_WarnsWhenAGraphQLRouteKeepsUnitsOfAMissingAnswer(t *testing.T) {
	const warning = `add "answer:!data.$field"`
	for _, c := range []struct {
		name, releaseOn string
		warns           bool
	}{
		{"the default", ``, true},
		{"error results only", `release_on: ["5xx", "error", "answer:data.$field.errorCode"]`, true},
		{"errors", `release_on: ["5xx", "error", "answer:errors"]`, true},
		{"the field's absence", `release_on: ["5xx", "error", "answer:data.$field.errorCode", "answer:!data.$field"]`, false},
		{"no data at all", `release_on: ["answer:!data"]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edgeq.yaml")
			os.WriteFile(path, []byte(fmt.Sprintf(`
origin: {url: "http://127.0.0.1:1"}
products: [{id: sneaker-a, stock: 10}]
routes:
  - name: add_gql
    match: "/api/graphql"
    graphql: {fields: [addItemToOrder]}
    admission: {type: stock, product: "graphql:productVariantId", user: "header:X-User", %s}
`, c.releaseOn)), 0o600)
			problems, warnings, err := Check(path)
			if err != nil || len(problems) > 0 {
				t.Fatalf("Check: %v %v", err, problems)
			}
			if got := strings.Contains(strings.Join(warnings, "\n"), warning); got != c.warns {
				t.Fatalf("warned %v, want %v: %q", got, c.warns, warnings)
			}
		})
	}
}
