package graphql

import (
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
)

const benchDocument = `mutation AddItemToOrder($variantId: ID!, $quantity: Int!) {
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

// BenchmarkReadMatch is the work of a graphql: route per request: read the body, find the operation,
// read the two arguments.
func BenchmarkReadMatch(b *testing.B) {
	seen := NewSeen()
	rt, err := Compile(config.GraphQL{Operation: "mutation", Fields: []string{"addItemToOrder"}, RefuseFields: []string{"adjustOrderLine"}}, seen)
	if err != nil {
		b.Fatal(err)
	}
	body := `{"operationName":"AddItemToOrder","query":` + strconv.Quote(benchDocument) + `,"variables":{"variantId":"bench","quantity":1}}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/shop-api", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		req, e := Read(r, 1<<20, seen)
		if e != nil {
			b.Fatal(e)
		}
		m, e := rt.Match(req)
		if e != nil || m == nil {
			b.Fatal(e)
		}
		if v, _, _ := m.Argument([]string{"productVariantId"}); v != "bench" {
			b.Fatal(v)
		}
	}
}

// BenchmarkReadMatch_Worst is the work of a graphql: route on the worst shapes of request found
// (worstShapes), at about 32 KiB and at the default server.max_body_bytes (1 MiB): whatever the route
// answers (a match, a pass or a refusal), the CPU it takes per request.
func BenchmarkReadMatch_Worst(b *testing.B) {
	for _, size := range []int{32 << 10, 1 << 20} {
		for _, shape := range worstShapes(size) {
			b.Run(fmt.Sprintf("shape=%s/size=%dKiB", shape.name, size>>10), func(b *testing.B) {
				seen := NewSeen()
				rt, err := Compile(config.GraphQL{Operation: "mutation", Fields: []string{"addItemToOrder"}, RefuseFields: []string{"adjustOrderLine"}}, seen)
				if err != nil {
					b.Fatal(err)
				}
				if shape.learn != "" {
					teach := `{"query":` + strconv.Quote(shape.learn) + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + sha256Hex(shape.learn) + `"}}}`
					r := httptest.NewRequest("POST", "/shop-api", strings.NewReader(teach))
					r.Header.Set("Content-Type", "application/json")
					if req, e := Read(r, 1<<20, seen); e == nil {
						rt.Match(req)
					}
				}
				b.SetBytes(int64(len(shape.body)))
				for b.Loop() {
					r := httptest.NewRequest("POST", "/shop-api", strings.NewReader(shape.body))
					r.Header.Set("Content-Type", "application/json")
					if req, e := Read(r, 1<<20, seen); e == nil {
						rt.Match(req)
					}
				}
			})
		}
	}
}
