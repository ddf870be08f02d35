package graphql

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/edgeq/edgeq/demoshop"
	"github.com/edgeq/edgeq/internal/config"
)

// FuzzGraphQLArguments holds edgeq's reading of a request against an independent executor: the demo
// shop's schema run by graph-gophers/graphql-go. For the same request bytes, whenever the shop executes
// addItemToOrder, edgeq has matched the route and read the product and quantity the executor received
// (after variable coercion), or refused the request. A request edgeq passes untouched never adds
// anything; a request the shop executes addItemToOrder twice for is never admitted once.
func FuzzGraphQLArguments(f *testing.F) {
	seeds := []struct{ query, variables, operationName string }{
		{`mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { __typename } }`, `{"id":"sneaker-a","q":2}`, ""},
		{`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 5) { __typename } }`, `{"productVariantId":"jersey","quantity":1}`, ""},
		{`mutation($v: ID!) { addItemToOrder(productVariantId: $v, quantity: 1) { __typename } }`, `{"v":"sneaker-b"}`, ""},
		{`mutation($q: Int = 3) { addItemToOrder(productVariantId: "jersey", quantity: $q) { __typename } }`, `{}`, ""},
		{`mutation { a: addItemToOrder(productVariantId: "sneaker-a", quantity: 1) { __typename } b: addItemToOrder(productVariantId: "sneaker-a", quantity: 1) { __typename } }`, ``, ""},
		{`mutation { ...F } fragment F on Mutation { addItemToOrder(productVariantId: 7, quantity: 1) { __typename } }`, ``, ""},
		{`mutation($s: Boolean!) { addItemToOrder(productVariantId: "jersey", quantity: 1) @skip(if: $s) { __typename } }`, `{"s":false}`, ""},
		{`query Q { products { id } } mutation M { addItemToOrder(productVariantId: "jersey", quantity: 1) { __typename } }`, ``, "M"},
		{`query Q { products { id } } mutation M { addItemToOrder(productVariantId: "jersey", quantity: 1) { __typename } }`, ``, ""},
		{`mutation { ... on Mutation { addItemToOrder(productVariantId: "\u0073neaker-a", quantity: 1) { __typename } } }`, ``, ""},
		{`mutation($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 1) { __typename } }`, `{"id":42}`, ""},
		{`mutation($q: Int!) { addItemToOrder(productVariantId: "jersey", quantity: $q) { __typename } }`, `{"q":2.0}`, ""},
		{`mutation { adjustOrderLine(orderLineId: "jersey", quantity: 4) { __typename } }`, ``, ""},
		{`{ products { id } }`, ``, ""},
	}
	for _, s := range seeds {
		f.Add(s.query, s.variables, s.operationName, false)
	}
	f.Add(seeds[0].query, seeds[0].variables, "", true)

	var mu sync.Mutex
	var calls []demoshop.AddItemCall
	shop, err := demoshop.New(slog.New(slog.DiscardHandler), demoshop.OnAddItem(func(id string, q int32) {
		mu.Lock()
		calls = append(calls, demoshop.AddItemCall{ProductVariantID: id, Quantity: q})
		mu.Unlock()
	}))
	if err != nil {
		f.Fatal(err)
	}
	rt, err := Compile(config.GraphQL{Operation: config.GraphQLMutation, Fields: []string{"addItemToOrder"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query, variables, operationName string, batch bool) {
		obj := map[string]any{"query": query}
		if operationName != "" {
			obj["operationName"] = operationName
		}
		if json.Valid([]byte(variables)) && bytes.HasPrefix(bytes.TrimSpace([]byte(variables)), []byte("{")) {
			obj["variables"] = json.RawMessage(variables)
		}
		var body []byte
		if batch {
			body, err = json.Marshal([]any{obj})
		} else {
			body, err = json.Marshal(obj)
		}
		if err != nil {
			return
		}
		post := func() *http.Request {
			r := httptest.NewRequest("POST", "/api/graphql", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return r
		}
		// edgeq's reading.
		read, e := Read(post(), 1<<20, nil)
		result, product, quantity := "refused", "", ""
		if e == nil {
			m, e := rt.Match(read)
			switch {
			case e != nil:
			case m == nil:
				result = "passed"
			default:
				p, pFound, pe := m.Argument([]string{"productVariantId"})
				q, qFound, qe := m.Argument([]string{"quantity"})
				if pe == nil && qe == nil && pFound && qFound {
					result, product, quantity = "admitted", p, q
				}
			}
		}
		// The shop's execution.
		mu.Lock()
		calls = calls[:0]
		mu.Unlock()
		shop.ServeHTTP(httptest.NewRecorder(), post())
		mu.Lock()
		executed := append([]demoshop.AddItemCall(nil), calls...)
		mu.Unlock()

		switch {
		case len(executed) == 0:
			return // nothing added: whatever edgeq did, nothing was sold unguarded
		case result == "refused":
			return
		case result == "passed":
			t.Fatalf("edgeq passed a request the shop added %v for:\n%s", executed, body)
		case len(executed) > 1:
			t.Fatalf("edgeq admitted once a request the shop added %v for:\n%s", executed, body)
		case executed[0].ProductVariantID != product || strconv.Itoa(int(executed[0].Quantity)) != quantity:
			t.Fatalf("edgeq read product %q quantity %q, the shop added %+v:\n%s", product, quantity, executed[0], body)
		}
	})
}
