package graphql

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/web"
)

func route(t *testing.T, g config.GraphQL, seen *Seen) *Route {
	t.Helper()
	if g.Operation == "" {
		g.Operation = config.GraphQLMutation
	}
	rt, err := Compile(g, seen)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

var addItem = config.GraphQL{Fields: []string{"addItemToOrder"}, RefuseFields: []string{"adjustOrderLine"}}

func jsonPost(body string) *http.Request {
	r := httptest.NewRequest("POST", "/shop-api", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// outcome is what a request comes to on a route: "pass" (the route does not apply), "refuse CODE",
// or "match" with the product and quantity the route reads.
type outcome struct {
	result   string
	product  string
	quantity string
}

func run(t *testing.T, rt *Route, r *http.Request, seen *Seen) outcome {
	t.Helper()
	req, e := Read(r, 1<<20, seen)
	if e != nil {
		return outcome{result: "refuse " + e.Code}
	}
	m, e := rt.Match(req)
	switch {
	case e != nil:
		return outcome{result: "refuse " + e.Code}
	case m == nil:
		return outcome{result: "pass"}
	}
	p, _, e := m.Argument([]string{"productVariantId"})
	if e != nil {
		return outcome{result: "refuse " + e.Code}
	}
	q, _, e := m.Argument([]string{"quantity"})
	if e != nil {
		return outcome{result: "refuse " + e.Code}
	}
	return outcome{result: "match", product: p, quantity: q}
}

// Every spelling of the guarded mutation that a Vendure-style shop executes is read as the shop
// reads it, or refused; other operations pass.
func TestMatch_ReadsTheOperationAsTheServerExecutesIt(t *testing.T) {
	const add = `mutation Add($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { __typename } }`
	cases := []struct {
		name, body string
		want       outcome
	}{
		{"variables", `{"query":` + q(add) + `,"variables":{"id":"42","q":2}}`, outcome{"match", "42", "2"}},
		{"renamed variable", `{"query":"mutation($v: ID!) { addItemToOrder(productVariantId: $v, quantity: 1) { id } }","variables":{"v":"42","productVariantId":"7"}}`, outcome{"match", "42", "1"}},
		{"inline literal with a decoy variable", `{"query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 5) { id } }","variables":{"productVariantId":"7","quantity":1}}`, outcome{"match", "42", "5"}},
		{"an Int literal id", `{"query":"mutation { addItemToOrder(productVariantId: 42, quantity: 1) { id } }"}`, outcome{"match", "42", "1"}},
		{"variable default", `{"query":"mutation($q: Int = 3) { addItemToOrder(productVariantId: \"42\", quantity: $q) { id } }"}`, outcome{"match", "42", "3"}},
		{"variable given over its default", `{"query":"mutation($q: Int = 3) { addItemToOrder(productVariantId: \"42\", quantity: $q) { id } }","variables":{"q":4}}`, outcome{"match", "42", "4"}},
		{"escaped string", `{"query":"mutation { addItemToOrder(productVariantId: \"\\u0034\\u0032\", quantity: 1) { id } }"}`, outcome{"match", "42", "1"}},
		{"block string", `{"query":"mutation { addItemToOrder(productVariantId: \"\"\"42\"\"\", quantity: 1) { id } }"}`, outcome{"match", "42", "1"}},
		{"named fragment", `{"query":"mutation { ...A } fragment A on Mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`, outcome{"match", "42", "1"}},
		{"inline fragment", `{"query":"mutation { ... on Mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } } }"}`, outcome{"match", "42", "1"}},
		{"fragment spread twice merges", `{"query":"mutation { ...A ...A } fragment A on Mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`, outcome{"match", "42", "1"}},
		{"operationName picks the guarded one", `{"query":"query P { products { id } } mutation M { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }","operationName":"M"}`, outcome{"match", "42", "1"}},
		{"operationName picks the other one, and the guarded field stands in the document", `{"query":"query P { products { id } } mutation M { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }","operationName":"P"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"operationName picks the other one of a document that does not name the field", `{"query":"query P { products { id } } mutation M { setCustomerForOrder(input: {}) { id } }","operationName":"P"}`, outcome{"pass", "", ""}},

		{"a query passes", `{"query":"{ products { id } }"}`, outcome{"pass", "", ""}},
		{"another mutation passes", `{"query":"mutation { setCustomerForOrder(input: {}) { id } }"}`, outcome{"pass", "", ""}},
		{"a query field of the same name", `{"query":"query { addItemToOrder }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"a nested field of the same name", `{"query":"mutation { other { addItemToOrder(productVariantId: 1) } }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"an operation named as the field", `{"query":"mutation addItemToOrder($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 1) { id } }","variables":{"id":"42"}}`, outcome{"match", "42", "1"}},
		{"a longer name holding the field's", `{"query":"mutation { addItemToOrderResult: addItemToOrder(productVariantId: \"42\", quantity: 1) { ...addItemToOrderFields } } fragment addItemToOrderFields on Order { id }"}`, outcome{"match", "42", "1"}},
		{"a batch of other operations passes", `[{"query":"{ products { id } }"},{"query":"{ activeOrder { id } }"}]`, outcome{"pass", "", ""}},
		{"a batch with the guarded one", `[{"query":"{ products { id } }"},{"query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}]`, outcome{"match", "42", "1"}},
		{"unparsable without the field", `{"query":"{ products { id "}`, outcome{"refuse INVALID_REQUEST", "", ""}},

		{"aliases", `{"query":"mutation { a: addItemToOrder(productVariantId: \"42\", quantity: 1) { id } b: addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"a batch of two", `[{"query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"},{"query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}]`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"@skip", `{"query":"mutation($s: Boolean!) { addItemToOrder(productVariantId: \"42\", quantity: 1) @skip(if: $s) { id } }","variables":{"s":false}}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"@include on a fragment", `{"query":"mutation { ...A @include(if: true) } fragment A on Mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"several operations, no operationName", `{"query":"query P { products { id } } mutation M { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"unparsable naming the field", `{"query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id "}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"malformed JSON naming the field", `{"query":"mutation { addItemToOrder }"`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"a parameter in another letter case", `{"Query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"a key given twice", `{"query":"{ products { id } }","query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"refused field", `{"query":"mutation { adjustOrderLine(orderLineId: \"1\", quantity: 4) { id } }"}`, outcome{"refuse OPERATION_REFUSED", "", ""}},
		{"refused field through a fragment", `{"query":"mutation { ...A } fragment A on Mutation { adjustOrderLine(orderLineId: \"1\", quantity: 4) { id } }"}`, outcome{"refuse OPERATION_REFUSED", "", ""}},
		{"undeclared variable", `{"query":"mutation { addItemToOrder(productVariantId: $id, quantity: 1) { id } }","variables":{"id":"42"}}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"a float quantity", `{"query":"mutation($q: Int!) { addItemToOrder(productVariantId: \"42\", quantity: $q) { id } }","variables":{"q":1.0}}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"an exponent id", `{"query":"mutation($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 1) { id } }","variables":{"id":42e0}}`, outcome{"refuse INVALID_REQUEST", "", ""}},
		{"an argument given twice", `{"query":"mutation { addItemToOrder(productVariantId: \"42\", productVariantId: \"7\", quantity: 1) { id } }"}`, outcome{"refuse INVALID_REQUEST", "", ""}},
	}
	rt := route(t, addItem, NewSeen())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := run(t, rt, jsonPost(c.body), nil); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The other shapes of a GraphQL request: GET, application/graphql, forms, multipart uploads, and the
// URL's parameters on a POST.
func TestRead_EveryShapeOfRequest(t *testing.T) {
	const add = `mutation { addItemToOrder(productVariantId: "42", quantity: 2) { id } }`
	rt := route(t, addItem, NewSeen())
	queryRoute := route(t, config.GraphQL{Operation: config.GraphQLQuery, Fields: []string{"product"}}, NewSeen())

	get := httptest.NewRequest("GET", "/shop-api?"+url.Values{"query": {add}}.Encode(), nil)
	if got := run(t, rt, get, nil); got.result != "refuse METHOD_NOT_ALLOWED" {
		t.Errorf("GET mutation: %+v", got)
	}
	getQuery := httptest.NewRequest("GET", "/shop-api?"+url.Values{"query": {`query($s: String) { product(sku: $s) { id } }`}, "variables": {`{"s":"x"}`}}.Encode(), nil)
	req, _ := Read(getQuery, 1<<20, nil)
	if m, e := queryRoute.Match(req); e != nil || m == nil {
		t.Errorf("GET query on a query route: %v %v", m, e)
	} else if v, _, _ := m.Argument([]string{"s"}); v != "" {
		t.Errorf("argument s: %q (the field's argument is sku)", v)
	} else if v, found, _ := m.Argument([]string{"sku"}); !found || v != "x" {
		t.Errorf("GET variables: sku %q %v", v, found)
	}

	gql := httptest.NewRequest("POST", "/shop-api", strings.NewReader(add))
	gql.Header.Set("Content-Type", "application/graphql")
	if got := run(t, rt, gql, nil); got != (outcome{"match", "42", "2"}) {
		t.Errorf("application/graphql: %+v", got)
	}

	form := httptest.NewRequest("POST", "/shop-api", strings.NewReader(url.Values{"query": {add}}.Encode()))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if got := run(t, rt, form, nil); got != (outcome{"match", "42", "2"}) {
		t.Errorf("form: %+v", got)
	}

	// A multipart upload: the operations are read, the file streams on untouched.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("operations", `{"query":"mutation($f: Upload) { addItemToOrder(productVariantId: \"42\", quantity: 3) { id } }","variables":{"f":null}}`)
	mw.WriteField("map", `{"0":["variables.f"]}`)
	fw, _ := mw.CreateFormFile("0", "a.bin")
	file := bytes.Repeat([]byte("x"), 3<<20) // larger than the body limit: never read by edgeq
	fw.Write(file)
	mw.Close()
	sent := body.Bytes()
	mp := httptest.NewRequest("POST", "/shop-api", bytes.NewReader(sent))
	mp.Header.Set("Content-Type", mw.FormDataContentType())
	if got := run(t, rt, mp, nil); got != (outcome{"match", "42", "3"}) {
		t.Errorf("multipart: %+v", got)
	}
	if rest, _ := io.ReadAll(mp.Body); !bytes.Equal(rest, sent) {
		t.Errorf("the multipart body reaches the origin changed: %d bytes, sent %d", len(rest), len(sent))
	}

	// The URL's query on a POST without a body: express-graphql reads it.
	urlPost := httptest.NewRequest("POST", "/shop-api?"+url.Values{"query": {add}}.Encode(), nil)
	if got := run(t, rt, urlPost, nil); got != (outcome{"match", "42", "2"}) {
		t.Errorf("query in the URL of a POST: %+v", got)
	}
	// Beside a body, any GraphQL parameter in the URL: express-graphql reads the URL's first, the
	// others the body's alone.
	urlAndBody := httptest.NewRequest("POST", "/shop-api?"+url.Values{"query": {add}}.Encode(), strings.NewReader(`{"variables":{}}`))
	urlAndBody.Header.Set("Content-Type", "application/json")
	if got := run(t, rt, urlAndBody, nil); got.result != "refuse INVALID_REQUEST" {
		t.Errorf("query in the URL of a POST with a body: %+v", got)
	}
	both := httptest.NewRequest("POST", "/shop-api?"+url.Values{"query": {add}}.Encode(), strings.NewReader(`{"query":"{ products { id } }"}`))
	both.Header.Set("Content-Type", "application/json")
	if got := run(t, rt, both, nil); got.result != "refuse INVALID_REQUEST" {
		t.Errorf("query in the URL and the body: %+v", got)
	}

	// A JSON body over the limit: edgeq cannot see what it asks for.
	big := jsonPost(`{"query":"{ products { id } }","pad":"` + strings.Repeat("x", 2<<20) + `"}`)
	if _, e := Read(big, 1<<20, nil); e == nil || e.Code != web.ErrPayloadTooLarge.Code {
		t.Errorf("a body over the limit: %v", e)
	}
	// A JSON body is put back byte for byte.
	sentJSON := `{"query":` + q(add) + `}`
	r := jsonPost(sentJSON)
	run(t, rt, r, nil)
	if rest, _ := io.ReadAll(r.Body); string(rest) != sentJSON {
		t.Errorf("the JSON body reaches the origin as %q", rest)
	}
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Automatic persisted queries: a hash edgeq has not seen answers PERSISTED_QUERY_NOT_FOUND (the client
// sends the document), a document is learnt only under its own hash, and a hash-only request is then
// read as the document it names.
func TestPersistedQueries(t *testing.T) {
	const add = `mutation { addItemToOrder(productVariantId: "42", quantity: 1) { id } }`
	const harmless = `{ products { id } }`
	seen := NewSeen()
	rt := route(t, addItem, seen)
	hashOnly := func(hash string) string {
		return `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + hash + `"}}}`
	}
	if got := run(t, rt, jsonPost(hashOnly(hashOf(add))), seen); got.result != "refuse PERSISTED_QUERY_NOT_FOUND" {
		t.Errorf("unknown hash: %+v", got)
	}
	// Poisoning: the harmless document sent under the guarded one's hash is not learnt (and refused
	// only if it concerned the route: it does not, the shop refuses it).
	poison := `{"query":` + q(harmless) + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + hashOf(add) + `"}}}`
	if got := run(t, rt, jsonPost(poison), seen); got.result != "pass" {
		t.Errorf("a harmless document under another hash: %+v", got)
	}
	if got := run(t, rt, jsonPost(hashOnly(hashOf(add))), seen); got.result != "refuse PERSISTED_QUERY_NOT_FOUND" {
		t.Errorf("after the poisoning attempt, the guarded hash: %+v", got)
	}
	mismatch := `{"query":` + q(add) + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + hashOf(harmless) + `"}}}`
	if got := run(t, rt, jsonPost(mismatch), seen); got.result != "refuse INVALID_REQUEST" {
		t.Errorf("the guarded document under another hash: %+v", got)
	}
	// The client's retry with the document teaches edgeq; the next hash-only request is read.
	full := `{"query":` + q(add) + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + strings.ToUpper(hashOf(add)) + `"}}}`
	if got := run(t, rt, jsonPost(full), seen); got != (outcome{"match", "42", "1"}) {
		t.Errorf("document with its hash: %+v", got)
	}
	if got := run(t, rt, jsonPost(hashOnly(hashOf(add))), seen); got != (outcome{"match", "42", "1"}) {
		t.Errorf("hash-only after learning: %+v", got)
	}
	get := httptest.NewRequest("GET", "/shop-api?"+url.Values{"extensions": {`{"persistedQuery":{"version":1,"sha256Hash":"` + hashOf(harmless) + `"}}`}}.Encode(), nil)
	if got := run(t, rt, get, seen); got.result != "refuse PERSISTED_QUERY_NOT_FOUND" {
		t.Errorf("unknown hash over GET: %+v", got)
	}
}

// Trusted documents: ids of the operator's file are read; an id it lacks is not a guarded operation.
func TestTrustedDocuments(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "docs.json")
	os.WriteFile(file, []byte(`{"add1": "mutation($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 1) { id } }"}`), 0o600)
	g := addItem
	g.Documents = file
	rt := route(t, g, NewSeen())
	if got := run(t, rt, jsonPost(`{"documentId":"add1","variables":{"id":"42"}}`), nil); got != (outcome{"match", "42", "1"}) {
		t.Errorf("trusted id: %+v", got)
	}
	if got := run(t, rt, jsonPost(`{"doc_id":"other","variables":{"id":"42"}}`), nil); got.result != "pass" {
		t.Errorf("an id the file lacks: %+v", got)
	}
	if got := run(t, rt, jsonPost(`{"documentId":"add1","query":"{ products { id } }"}`), nil); got.result != "refuse INVALID_REQUEST" {
		t.Errorf("a trusted id with another document: %+v", got)
	}
	manifest := filepath.Join(dir, "manifest.json")
	os.WriteFile(manifest, []byte(`{"format":"apollo-persisted-query-manifest","version":1,"operations":[{"id":"abc","name":"Add","type":"mutation","body":"mutation Add { addItemToOrder(productVariantId: \"7\", quantity: 2) { id } }"}]}`), 0o600)
	g.Documents = manifest
	rt = route(t, g, NewSeen())
	if got := run(t, rt, jsonPost(`{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"}}}`), nil); got != (outcome{"match", "7", "2"}) {
		t.Errorf("Apollo manifest: %+v", got)
	}
	os.WriteFile(manifest, []byte(`{"x": "mutation {"}`), 0o600)
	if _, err := Compile(g, nil); err == nil {
		t.Error("a documents file with a broken document compiled")
	}
}

// Input-object paths: graphql:input.sku.
func TestArgument_InputObjectPaths(t *testing.T) {
	rt := route(t, config.GraphQL{Fields: []string{"addToCart"}}, nil)
	for body, want := range map[string]string{
		`{"query":"mutation { addToCart(input: {sku: \"A-1\", quantity: 2}) { id } }"}`:                                  "A-1",
		`{"query":"mutation($i: CartInput!) { addToCart(input: $i) { id } }","variables":{"i":{"sku":"B-2"}}}`:           "B-2",
		`{"query":"mutation($s: String!) { addToCart(input: {sku: $s}) { id } }","variables":{"s":"C-3"}}`:               "C-3",
		`{"query":"mutation($i: CartInput = {sku: \"D-4\"}) { addToCart(input: $i) { id } }"}`:                           "D-4",
		`{"query":"mutation { addToCart(input: {items: [{sku: \"E-5\"}]}) { id } }"}`:                                    "",
		`{"query":"mutation($i: CartInput!) { addToCart(input: $i) { id } }","variables":{"i":{"Sku":"F-6","sku":"x"}}}`: "refused",
	} {
		req, e := Read(jsonPost(body), 1<<20, nil)
		if e != nil {
			if want != "refused" {
				t.Errorf("%s: %v", body, e)
			}
			continue
		}
		m, e := rt.Match(req)
		if e != nil {
			if want != "refused" {
				t.Errorf("%s: %v", body, e)
			}
			continue
		}
		got, _, e := m.Argument([]string{"input", "sku"})
		if e != nil {
			got = "refused"
		}
		if got != want {
			t.Errorf("%s: input.sku %q, want %q", body, got, want)
		}
	}
}

// The worst shapes of request found, at the default body limit (1 MiB): each is read or refused as
// it should be, within a generous bound of CPU (BenchmarkReadMatch_Worst holds the target).
func TestReadMatch_WorstShapesAtTheBodyLimit(t *testing.T) {
	const limit = 1 << 20
	want := map[string]string{
		"fragment-bomb":   "refuse INVALID_REQUEST", // more tokens than a request may have
		"apq-batch":       "pass",                   // anonymous operations and no operationName: the shop runs none
		"deep-nesting":    "refuse INVALID_REQUEST",
		"many-aliases":    "refuse INVALID_REQUEST",
		"large-documents": "refuse INVALID_REQUEST",
		"many-operations": "refuse INVALID_REQUEST",
		"variables-list":  "match",
		"variables-keys":  "match",
		"batch":           "match",
	}
	for _, shape := range worstShapes(limit) {
		t.Run(shape.name, func(t *testing.T) {
			if len(shape.body) > limit {
				t.Fatalf("the shape is %d bytes, over the limit", len(shape.body))
			}
			seen := NewSeen()
			rt := route(t, addItem, seen)
			if shape.learn != "" {
				teach := `{"query":` + q(shape.learn) + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + hashOf(shape.learn) + `"}}}`
				if got := run(t, rt, jsonPost(teach), seen); got.result != "pass" {
					t.Fatalf("teaching the document: %+v", got)
				}
			}
			start := cpuTime(t)
			got := run(t, rt, jsonPost(shape.body), seen)
			spent := cpuTime(t) - start
			if got.result != want[shape.name] {
				t.Errorf("got %+v, want %s", got, want[shape.name])
			}
			// The target is 20 ms (the benchmark); a test run under the race detector on a loaded
			// machine gets 50 times that.
			if spent > time.Second {
				t.Errorf("%v of CPU for a %d-byte request", spent, len(shape.body))
			}
			t.Logf("%s: %d bytes, %v of CPU: %s", shape.name, len(shape.body), spent, got.result)
		})
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// On a graphql: route's path, what edgeq cannot read exactly as servers read it is refused, whatever
// it names; what it reads and concerns no guarded field passes.
func TestRead_FailsClosed(t *testing.T) {
	const add = `{"query":"mutation { addItemToOrder(productVariantId: \"42\", quantity: 1) { id } }"}`
	multipartOf := func(fields ...[2]string) (string, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for _, f := range fields {
			mw.WriteField(f[0], f[1])
		}
		mw.Close()
		return mw.FormDataContentType(), b.String()
	}
	twoOps, twoOpsBody := multipartOf([2]string{"operations", `{"query":"{ products { id } }"}`}, [2]string{"operations", add}, [2]string{"map", "{}"})
	noMap, noMapBody := multipartOf([2]string{"operations", add})
	cases := []struct {
		name, method, target, contentType, encoding, body string
		want                                              string
	}{
		{"a query string that does not parse (;)", "POST", "/shop-api?;", "application/json", "", add, "refuse"},
		{"a query string that does not parse (%zz)", "POST", "/shop-api?x=%zz", "application/json", "", add, "refuse"},
		{"invalid UTF-8", "POST", "/shop-api", "application/json", "", "{\"query\":\"{ products { id } }\",\"x\":\"\xff\"}", "refuse"},
		{"a lone surrogate escape", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","x":"\ud800"}`, "refuse"},
		{"a low surrogate alone", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","x":"\udc00a"}`, "refuse"},
		{"a key twice", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","a":1,"a":2}`, "refuse"},
		{"a key twice in another case", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","variables":{"id":1,"ID":2}}`, "refuse"},
		{"a parameter in another case", "POST", "/shop-api", "application/json", "", `{"operationname":"x","query":"{ products { id } }"}`, "refuse"},
		{"persistedQuery in another case", "POST", "/shop-api", "application/json", "", `{"extensions":{"PersistedQuery":{"sha256Hash":"ab"}}}`, "refuse"},
		{"sha256Hash in another case", "POST", "/shop-api", "application/json", "", `{"extensions":{"persistedQuery":{"SHA256Hash":"ab"}}}`, "refuse"},
		{"extensions not an object", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","extensions":1}`, "refuse"},
		{"persistedQuery not an object", "POST", "/shop-api", "application/json", "", `{"extensions":{"persistedQuery":[]}}`, "refuse"},
		{"sha256Hash not a string", "POST", "/shop-api", "application/json", "", `{"extensions":{"persistedQuery":{"sha256Hash":5}}}`, "refuse"},
		{"documentId not a string", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","documentId":5}`, "refuse"},
		{"query not a string", "POST", "/shop-api", "application/json", "", `{"query":["{ products { id } }"]}`, "refuse"},
		{"variables a list", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","variables":[1]}`, "refuse"},
		{"variables a string of a list", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }","variables":"[1]"}`, "refuse"},
		{"a batch item not an object", "POST", "/shop-api", "application/json", "", `[{"query":"{ products { id } }"},1]`, "refuse"},
		{"a JSON string", "POST", "/shop-api", "application/json", "", `"{ products { id } }"`, "refuse"},
		{"JSON and more", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id } }"} {"query":"mutation { addItemToOrder }"}`, "refuse"},
		{"text that is not JSON", "POST", "/shop-api", "text/plain", "", `query=1`, "refuse"},
		{"gzip", "POST", "/shop-api", "application/json", "gzip", add, "refuse"},
		{"UTF-16", "POST", "/shop-api", "application/json; charset=utf-16", "", add, "refuse"},
		{"Latin-1", "POST", "/shop-api", "application/x-www-form-urlencoded; charset=iso-8859-1", "", "query=%7B+products+%7B+id+%7D+%7D", "refuse"},
		{"a Content-Type that does not parse", "POST", "/shop-api", "application/json; charset", "", add, "refuse"},
		{"a WebSocket upgrade (graphql-ws carries mutations inside)", "GET", "/shop-api", "", "websocket", "", "refuse"},
		{"Content-Type twice", "POST", "/shop-api", "application/json", "second content type", `{"query":"{ products { id } }"}`, "refuse"},
		{"a GET with a body", "GET", "/shop-api?query=%7B+products+%7B+id+%7D+%7D", "application/json", "", add, "refuse"},
		{"a form value that is not UTF-8", "POST", "/shop-api", "application/x-www-form-urlencoded", "", "query=%ff", "refuse"},
		{"URL variables that are not JSON", "GET", "/shop-api?query=%7B+products+%7B+id+%7D+%7D&variables=%7B", "", "", "", "refuse"},
		{"operations twice in a multipart body", "POST", "/shop-api", twoOps, "", twoOpsBody, "refuse"},
		{"a multipart body without map", "POST", "/shop-api", noMap, "", noMapBody, "refuse"},
		{"a document that does not parse", "POST", "/shop-api", "application/json", "", `{"query":"{ products { id "}`, "refuse"},
		{"two fragments of one name", "POST", "/shop-api", "application/json", "", `{"query":"{ ...F } fragment F on Query { a } fragment F on Query { b }"}`, "refuse"},

		{"an empty POST", "POST", "/shop-api", "application/json", "", "", "pass"},
		{"a GET with other parameters", "GET", "/shop-api?utm_source=mail", "", "", "", "pass"},
		{"UTF-8 named in capitals", "POST", "/shop-api", "application/json; charset=UTF-8", "", `{"query":"{ products { id } }"}`, "pass"},
		{"identity encoding", "POST", "/shop-api", "application/json", "identity", `{"query":"{ products { id } }"}`, "pass"},
		{"an escaped name, read", "POST", "/shop-api", "application/json", "", `{"query":"mutation { addItemTo\u004frder(productVariantId: \"42\", quantity: 1) { id } }"}`, "match"},
		{"a surrogate pair", "POST", "/shop-api", "application/json", "", `{"query":"mutation { addItemToOrder(productVariantId: \"\ud83d\ude00\", quantity: 1) { id } }"}`, "match"},
	}
	rt := route(t, addItem, NewSeen())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
			if c.body == "" {
				r.Body = http.NoBody
			}
			if c.contentType != "" {
				r.Header.Set("Content-Type", c.contentType)
			}
			switch c.encoding {
			case "":
			case "websocket":
				r.Header.Set("Connection", "Upgrade")
				r.Header.Set("Upgrade", "websocket")
			case "second content type":
				r.Header.Add("Content-Type", "application/graphql")
			default:
				r.Header.Set("Content-Encoding", c.encoding)
			}
			got := run(t, rt, r, nil)
			if want := map[string]string{"refuse": "refuse INVALID_REQUEST", "pass": "pass", "match": "match"}[c.want]; got.result != want {
				t.Errorf("got %+v, want %s", got, want)
			}
		})
	}
}

// Every place a document names a guarded or refused field must be the executed operation's name or
// a root field it selects; anywhere else is refused (docs/reference.md "GraphQL routes").
func TestMatch_NamesAccountedFor(t *testing.T) {
	const addF = `addItemToOrder(productVariantId: \"42\", quantity: 1) { id }`
	cases := []struct {
		name, body string
		want       string
	}{
		{"the root field", `{"query":"mutation { ` + addF + ` }"}`, "match"},
		{"an alias", `{"query":"mutation { mine: ` + addF + ` }"}`, "match"},
		{"the operation named as the field", `{"query":"mutation addItemToOrder { ` + addF + ` }"}`, "match"},
		{"longer names holding it", `{"query":"mutation addItemToOrderNow { addItemToOrder_: products { addItemToOrderX } ` + addF + ` }"}`, "match"},
		{"in a string", `{"query":"query { product(sku: \"addItemToOrder\") { id } }"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"in a block string", `{"query":"query { product(sku: \"\"\"x addItemToOrder\"\"\") { id } }"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"after digits, as some lexers split them", `{"query":"query { product(sku: \"9addItemToOrder\") { id } }"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"in a comment", `{"query":"mutation { ` + addF + ` } # addItemToOrder"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"in another operation", `{"query":"mutation A { ` + addF + ` } mutation B { ` + addF + ` }","operationName":"A"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"nested", `{"query":"mutation { products { addItemToOrder } }"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"in a fragment nothing spreads", `{"query":"mutation { products { id } } fragment F on Mutation { ` + addF + ` }"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"as a variable", `{"query":"mutation($addItemToOrder: ID) { products(id: $addItemToOrder) { id } }"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"as the alias of another field", `{"query":"mutation { addItemToOrder: products { id } }"}`, "refuse INVALID_REQUEST addItemToOrder"},
		{"a refused field's name in a string", `{"query":"{ product(sku: \"adjustOrderLine\") { id } }"}`, "refuse INVALID_REQUEST adjustOrderLine"},
		{"several operations, none named, naming it", `{"query":"query A { products { id } } mutation B { ` + addF + ` }"}`, "refuse INVALID_REQUEST operationName"},
		{"several operations, none named, not naming it", `{"query":"query A { products { id } } query B { cart { id } }"}`, "pass"},
		{"operationName naming nothing", `{"query":"mutation { ` + addF + ` }","operationName":"X"}`, "refuse INVALID_REQUEST operationName"},
		{"operationName naming nothing, in a document that names no guarded field", `{"query":"{ products { id } }","operationName":"X"}`, "refuse INVALID_REQUEST operationName"},
	}
	rt := route(t, addItem, NewSeen())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, e := Read(jsonPost(c.body), 1<<20, nil)
			if e != nil {
				t.Fatal(e)
			}
			got := "pass"
			m, e := rt.Match(req)
			switch {
			case e != nil:
				got = "refuse " + e.Code + " " + fmt.Sprint(e.Fields["field"])
			case m != nil:
				got = "match"
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// scan bounds nesting, finds \""" in block strings, and counts at least the parser's tokens.
func TestScan(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("{a", n) + strings.Repeat("}", n) }
	for _, c := range []struct {
		name, text string
		err        *web.Error
	}{
		{"64 deep", nested(64), nil},
		{"65 deep", nested(65), ErrTooDeep},
		{"65 deep in arguments and lists", "{a(x: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + ")}", ErrTooDeep},
		{"brackets in strings and comments do not count", "{a(x: \"" + strings.Repeat("{", 100) + "\") # " + strings.Repeat("[", 100) + "\n}", nil},
		{"an escaped triple quote in a block string", `{ a(x: """one \""" two""") }`, ErrEscapedBlockQuote},
		{"a block string without one", `{ a(x: """one "" two \ three""") }`, nil},
		{"triple quotes in a comment", "{ a } # \\\"\"\"", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := scan(c.text); err != c.err {
				t.Errorf("scan: %v, want %v", err, c.err)
			}
		})
	}
	// The count is never below the parser's: the parser stops at its own limit first otherwise.
	for _, text := range []string{benchDocument, `query($a: [Int!]! = [1, -2.5e3]) { f(s: "x", b: """y""") @d { ...F } } fragment F on Q { g }`} {
		tokens, _ := scan(text)
		if _, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: text}, tokens); err != nil {
			t.Errorf("the parser needs more than the %d tokens scan counted: %v", tokens, err)
		}
	}
}

// A client that leaves stops the reading.
func TestMatch_StopsWhenTheClientLeaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := jsonPost(`[{"query":"{ products { id } }"},{"query":"{ cart { id } }"}]`).WithContext(ctx)
	req, e := Read(r, 1<<20, nil)
	if e != nil {
		t.Fatal(e)
	}
	cancel()
	if _, e := route(t, addItem, nil).Match(req); e == nil || e.Cause == nil || !errors.Is(e.Cause, context.Canceled) {
		t.Errorf("Match after the client left: %v", e)
	}
}
