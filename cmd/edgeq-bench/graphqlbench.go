package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

// addItemDocument is a storefront's add-to-cart mutation as Vendure's starter sends it: variables, a
// fragment for the updated order and the error results of the union.
const addItemDocument = `mutation AddItemToOrder($variantId: ID!, $quantity: Int!) {
  addItemToOrder(productVariantId: $variantId, quantity: $quantity) {
    ...UpdatedOrder
    ... on ErrorResult { errorCode message }
    ... on InsufficientStockError { quantityAvailable order { ...UpdatedOrder } }
  }
}
fragment UpdatedOrder on Order {
  id code state totalQuantity totalWithTax currencyCode
  lines { id unitPriceWithTax quantity linePriceWithTax featuredAsset { id preview } productVariant { id name sku } }
}`

// graphqlAdmissionBench measures stock admission on a graphql: route (the document parsed, the
// operation found, the arguments read from variables) beside the same admission on a route reading a
// plain JSON body, in alternating rounds on one redis-server: edgeq admission -graphql.
func graphqlAdmissionBench(duration time.Duration, concurrency, rounds int, w io.Writer) error {
	redisSrv, err := redisserver.Start()
	if err != nil {
		return fmt.Errorf("the admission benchmark needs redis-server: %w", err)
	}
	defer redisSrv.Stop()
	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":{"addItemToOrder":{"__typename":"Order","id":"1"}}}`))
	}))
	if err != nil {
		return err
	}
	edge, _, stop, err := startEdgeqAdmin(origin, redisSrv.Addr(), `
products:
  - {id: bench, stock: 1000000000, per_user_limit: 1, name: "Bench item"}
routes:
  - name: add_json
    match: "POST /api/cart"
    admission: {type: stock, product: "json:sku", quantity: "json:quantity", user: "header:X-User"}
  - name: add_graphql
    match: "/shop-api"
    graphql: {fields: [addItemToOrder], refuse_fields: [adjustOrderLine]}
    admission:
      type: stock
      product: "graphql:productVariantId"
      quantity: "graphql:quantity"
      user: "header:X-User"
      release_on: ["5xx", "error", "answer:data.$field.errorCode", "answer:!data.$field"]
`)
	if err != nil {
		return err
	}
	defer stop()
	gqlBody := []byte(fmt.Sprintf(`{"operationName":"AddItemToOrder","query":%s,"variables":{"variantId":"bench","quantity":1}}`,
		strconv.Quote(addItemDocument)))
	var users atomic.Int64
	post := func(path string, body []byte) func() (load.Request, bool) {
		return func() (load.Request, bool) {
			u := strconv.FormatInt(users.Add(1), 10)
			return load.Request{Method: "POST", URL: edge + path,
				Header: http.Header{"X-User": {"buyer-" + u}, "Content-Type": {"application/json"}}, Body: body}, true
		}
	}
	jsonReq := post("/api/cart", []byte(`{"sku":"bench","quantity":1}`))
	gqlReq := post("/shop-api", gqlBody)
	rc := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer func() { _ = rc.Close() }()
	client := load.NewClient(concurrency)
	load.Run(client, "warm-up", gqlReq, 200, concurrency, time.Second)
	streams := productStreams("edgeq", "bench")
	var plain, gql load.Sample
	for round := 0; round < rounds; round++ {
		for _, m := range []struct {
			s    *load.Sample
			name string
			req  func() (load.Request, bool)
		}{{&plain, "stock admission, JSON body", jsonReq}, {&gql, "stock admission, GraphQL body", gqlReq}} {
			if _, err := drained(rc, 5*time.Minute, streams...); err != nil {
				return err
			}
			m.s.Add(load.Run(client, m.name, m.req, 200, concurrency, duration))
			m.s.Name = m.name
		}
	}
	_, _ = fmt.Fprintf(w, "machine: %s\n", machine())
	_, _ = fmt.Fprintf(w, "load: %d concurrent clients, %d alternating rounds of %s, redis-server on loopback, one product, a new buyer per request; GraphQL body: %d bytes (a Vendure-style addItemToOrder with fragments)\n\n",
		concurrency, rounds, duration, len(gqlBody))
	_, _ = fmt.Fprintln(w, "| measurement | admissions/s | vs JSON body | p50 | p99 |")
	_, _ = fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, s := range []load.Sample{plain, gql} {
		_, _ = fmt.Fprintf(w, "| %s | %.0f | %.2fx | %s | %s |\n", s.Name, s.RPS(), s.RPS()/plain.RPS(),
			s.Percentile(0.5).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond))
	}
	return nil
}
