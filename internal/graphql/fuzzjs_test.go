package graphql

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/demoshop"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/testutil/graphqljs"
)

// The shapes of request FuzzGraphQLJS sends: methods and Content-Types by index.
var (
	fuzzMethods      = []string{http.MethodPost, http.MethodGet}
	fuzzContentTypes = []string{"application/json", "application/graphql", "application/x-www-form-urlencoded", "",
		"application/json; charset=utf-16le", "application/json; charset=UTF-8", "text/plain"}
)

// jsSeed is a request FuzzGraphQLJS starts from.
type jsSeed struct {
	reading, method, contentType uint8
	query                        string
	body                         string
}

// jsSeeds are the shapes that walked past edgeq's reading to a graphql-js shop, and their neighbours.
func jsSeeds() []jsSeed {
	const add = `mutation { addItemToOrder(productVariantId: \"sneaker-a\", quantity: 2) { __typename } }`
	bomb := fragmentBomb(40, 40)
	return []jsSeed{
		{0, 0, 0, "", `{"query":"` + add + `"}`},
		{0, 0, 0, "", `{"query":"mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { __typename } }","variables":{"id":"sneaker-a","q":3}}`},
		// A query string that does not parse, beside a body the shop executes.
		{0, 0, 0, ";", `{"query":"` + add + `"}`},
		{1, 0, 0, "x=%zz", `{"query":"` + add + `"}`},
		// operationName in the URL naming nothing, a body with one operation; and the URL's query.
		{0, 0, 0, "operationName=x", `{"query":"` + add + `"}`},
		{1, 0, 0, "query=" + url.QueryEscape(strings.ReplaceAll(add, `\"`, `"`)), `{"query":"{ products { id } }"}`},
		{1, 0, 3, "query=" + url.QueryEscape(strings.ReplaceAll(add, `\"`, `"`)), ``},
		// Keys edgeq refuses that a JavaScript server reads: twice, escaped, another case, types.
		{2, 0, 0, "", `{"query":"mutation{addItemTo\u004frder(productVariantId:\"sneaker-a\",quantity:1){__typename}}","a":1,"a":2}`},
		{2, 0, 0, "", `{"Query":"{ products { id } }","query":"` + add + `"}`},
		{2, 0, 0, "", `{"query":"` + add + `","extensions":1}`},
		{2, 0, 0, "", `{"query":"` + add + `","documentId":5}`},
		{2, 0, 0, "", `[{"query":"` + add + `"},1]`},
		{2, 0, 0, "", `[{"query":"{ products { id } }"},{"query":"` + add + `"}]`},
		// A block string holding \""", a comment, a string naming the field.
		{0, 0, 0, "", `{"query":"query { product(sku: \"\"\"a \\\"\"\" b\"\"\") { id } } # addItemToOrder"}`},
		{0, 0, 0, "", `{"query":"query Q { product(sku: \"addItemToOrder\") { id } } mutation M { addItemToOrder(productVariantId: \"sneaker-a\", quantity: 1) { __typename } }","operationName":"Q"}`},
		// Fragments, a persisted query.
		{2, 0, 0, "", `{"query":` + strconvQuote(bomb) + `}`},
		{2, 0, 0, "", `{"query":"mutation { ...F } fragment F on Mutation { addItemToOrder(productVariantId: \"sneaker-a\", quantity: 1) { __typename } }","extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + sha256Hex(`mutation { ...F } fragment F on Mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 1) { __typename } }`) + `"}}}`},
		// Variables the shop coerces otherwise: a string quantity, null, a large id, a lone surrogate.
		{0, 0, 0, "", `{"query":"mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { __typename } }","variables":{"id":"sneaker-a","q":"2"}}`},
		{0, 0, 0, "", `{"query":"mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { __typename } }","variables":{"id":9007199254740993,"q":1}}`},
		{0, 0, 0, "", `{"query":"mutation($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 1) { __typename } }","variables":{"id":"sneaker-a\ud800"}}`},
		// Forms, GET, charsets.
		{1, 0, 2, "", "query=" + url.QueryEscape(strings.ReplaceAll(add, `\"`, `"`))},
		{1, 1, 3, "query=" + url.QueryEscape("{ products { id } }"), `{"query":"` + add + `"}`},
		{1, 0, 4, "", "{\x00\"\x00q\x00u\x00e\x00r\x00y\x00\"\x00:\x00\"\x00{\x00}\x00\"\x00}\x00"},
		{0, 0, 1, "", strings.ReplaceAll(add, `\"`, `"`)},
	}
}

// FuzzGraphQLJS holds edgeq's reading of a request against graphql-js, the executor under Apollo
// Server, GraphQL Yoga, Vendure and express-graphql, behind each family's way of reading HTTP (the
// referee, e2e/referee/graphqljs.mjs). For the same request bytes, whenever graphql-js executes
// addItemToOrder, edgeq admitted exactly that product and quantity, or refused the request.
func FuzzGraphQLJS(f *testing.F) {
	for _, s := range jsSeeds() {
		f.Add(s.reading, s.method, s.contentType, s.query, []byte(s.body))
	}
	referee := graphqljs.Start(f, demoshop.GraphQLSchema)
	client := &http.Client{Timeout: 10 * time.Second}
	rt, err := Compile(config.GraphQL{Operation: config.GraphQLMutation, Fields: []string{"addItemToOrder"}, RefuseFields: []string{"adjustOrderLine"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, reading, method, contentType uint8, query string, body []byte) {
		target := "/graphql"
		if query != "" {
			target += "?" + query
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || u.RawQuery != query || strings.Contains(query, "#") {
			return // not a request line a client can send
		}
		request := func(base string) *http.Request {
			var r io.Reader = http.NoBody
			if len(body) > 0 {
				r = bytes.NewReader(body)
			}
			req, err := http.NewRequest(fuzzMethods[int(method)%len(fuzzMethods)], base+target, r)
			if err != nil {
				t.Fatal(err)
			}
			if ct := fuzzContentTypes[int(contentType)%len(fuzzContentTypes)]; ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			req.Header.Set(graphqljs.ReadingHeader, graphqljs.Readings[int(reading)%len(graphqljs.Readings)])
			return req
		}
		result, product, quantity := edgeqReads(rt, request("http://edgeq.test"))

		resp, err := client.Do(request(referee.URL))
		if err != nil {
			t.Fatalf("the referee: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		calls, err := graphqljs.Calls(resp)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(calls) == 0, result == "refused":
			return // nothing added, or nothing reached the shop
		case result == "passed":
			t.Fatalf("edgeq passed a request graphql-js added %+v for: %s %q %q", calls, target, request("").Header, body)
		case len(calls) > 1:
			t.Fatalf("edgeq admitted once a request graphql-js added %+v for: %s %q", calls, target, body)
		case calls[0].ProductVariantID != product || strconv.FormatInt(calls[0].Quantity, 10) != quantity:
			t.Fatalf("edgeq read product %q quantity %q, graphql-js added %+v: %s %q", product, quantity, calls[0], target, body)
		}
	})
}

// edgeqReads is what a graphql: stock route does with r: "refused", "passed", or "admitted" with the
// product and the quantity (1 when the request gives none) it admits.
func edgeqReads(rt *Route, r *http.Request) (result, product, quantity string) {
	read, e := Read(r, 1<<20, nil)
	if e != nil {
		return "refused", "", ""
	}
	m, e := rt.Match(read)
	switch {
	case e != nil:
		return "refused", "", ""
	case m == nil:
		return "passed", "", ""
	}
	p, pFound, pe := m.Argument([]string{"productVariantId"})
	q, qFound, qe := m.Argument([]string{"quantity"})
	if pe != nil || qe != nil || !pFound {
		return "refused", "", ""
	}
	if !qFound {
		q = "1"
	}
	if n, err := strconv.ParseInt(q, 10, 64); err != nil || n < 1 || n > 1_000_000 {
		return "refused", "", ""
	}
	return "admitted", p, q
}

// The referee executes what a shop would, so the fuzz target can fail: the plain mutation and one of
// the shapes that walked past edgeq reach graphql-js's addItemToOrder, and edgeq admits the first as
// graphql-js executes it and refuses the second.
func TestGraphQLJS_TheRefereeExecutesTheGuardedMutation(t *testing.T) {
	referee := graphqljs.Start(t, demoshop.GraphQLSchema)
	rt := route(t, addItem, nil)
	for _, c := range []struct {
		name, reading, target, body string
		want                        string // what edgeq does
	}{
		{"the plain mutation", "graphql-http", "/graphql", `{"query":"mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { __typename } }","variables":{"id":"sneaker-a","q":3}}`, "admitted sneaker-a 3"},
		{"a query string that does not parse", "apollo", "/graphql?;", `{"query":"mutation { addItemToOrder(productVariantId: \"sneaker-a\", quantity: 2) { __typename } }"}`, "refused"},
		{"the URL's query first", "express-graphql", "/graphql?query=" + url.QueryEscape(`mutation { addItemToOrder(productVariantId: "sneaker-a", quantity: 2) { __typename } }`), `{"query":"{ products { id } }"}`, "refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", referee.URL+c.target, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(graphqljs.ReadingHeader, c.reading)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			calls, err := graphqljs.Calls(resp)
			if err != nil || len(calls) != 1 || calls[0].ProductVariantID != "sneaker-a" {
				t.Fatalf("graphql-js executed %+v (%v), want one addItemToOrder of sneaker-a", calls, err)
			}
			edgeq, _ := http.NewRequest("POST", "http://edgeq.test"+c.target, strings.NewReader(c.body))
			edgeq.Header.Set("Content-Type", "application/json")
			result, product, quantity := edgeqReads(rt, edgeq)
			if got := strings.TrimSpace(result + " " + product + " " + quantity); got != c.want {
				t.Errorf("edgeq: %s, want %s (graphql-js added %+v)", got, c.want, calls[0])
			}
		})
	}
}
