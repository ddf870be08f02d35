package graphql

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The worst shapes of request found for a graphql: route's reading (docs/benchmarks.md "GraphQL
// reading"), each built to about size bytes: what BenchmarkReadMatch measures and what
// TestReadMatch_WorstShapesAtTheBodyLimit holds to a bound.

// worstShape is one request: its body, and the document a client taught edgeq first (with its
// hash) for the hash-only shapes ("" for the others).
type worstShape struct {
	name, body, learn string
}

// fragmentBomb is a document of ops anonymous mutations, each spreading the head of one chain of
// chain fragments (each spreading the next, the last selecting an unguarded field): every operation
// walks the whole chain.
func fragmentBomb(ops, chain int) string {
	var b strings.Builder
	for range ops {
		b.WriteString("mutation{...F0}")
	}
	for i := range chain {
		if i == chain-1 {
			fmt.Fprintf(&b, "fragment F%d on Mutation{products{id}}", i)
			continue
		}
		fmt.Fprintf(&b, "fragment F%d on Mutation{...F%d}", i, i+1)
	}
	return b.String()
}

// fragmentBombOf builds the largest fragmentBomb of about size bytes with as many operations as
// fragments (the square is what costs).
func fragmentBombOf(size int) string {
	n := 1
	for len(fragmentBomb(n*2, n*2)) <= size {
		n *= 2
	}
	for len(fragmentBomb(n+n/8, n+n/8)) <= size {
		n += n / 8
	}
	return fragmentBomb(n, n)
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jsonBody(query string) string {
	b, _ := json.Marshal(map[string]string{"query": query})
	return string(b)
}

// worstShapes are the shapes at about size bytes of body.
func worstShapes(size int) []worstShape {
	var shapes []worstShape

	// A fragment bomb sent whole.
	shapes = append(shapes, worstShape{name: "fragment-bomb", body: jsonBody(fragmentBombOf(size - 16))})

	// The same bomb taught to edgeq under its hash (at most SeenMaxBytes are remembered), then
	// named by every item of a batch of hash-only requests filling the body.
	learned := fragmentBombOf(SeenMaxBytes - 16)
	item := `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + sha256Hex(learned) + `"}}}`
	shapes = append(shapes, worstShape{name: "apq-batch", body: batchOf(item, size), learn: learned})

	// Selections nested as deep as the body allows.
	depth := (size - 64) / 4
	shapes = append(shapes, worstShape{name: "deep-nesting",
		body: jsonBody("mutation{" + strings.Repeat("a{", depth) + "b" + strings.Repeat("}", depth) + "}")})

	// Root fields under many aliases, and inline fragments nested in inline fragments.
	var aliases strings.Builder
	aliases.WriteString("mutation{")
	for i := 0; aliases.Len() < size-128; i++ {
		fmt.Fprintf(&aliases, "a%d:products{id}", i)
	}
	aliases.WriteString("addItemToOrder(productVariantId:\"a\",quantity:1){id}}")
	shapes = append(shapes, worstShape{name: "many-aliases", body: jsonBody(aliases.String())})

	// A batch of documents each as large as the token limit lets a document be.
	// A batch of distinct documents, each as many tokens as a request may have in all.
	var large []string
	for i := 0; ; i++ {
		doc := fmt.Sprintf("{a%d", i) + strings.Repeat(" a", MaxTokens-3) + "}"
		if len(large) > 0 && (len(large)+1)*(len(doc)+len(`{"query":""},`)) > size {
			break
		}
		large = append(large, jsonBody(doc))
		if len(doc) > size {
			large[0] = jsonBody(doc[:size/2] + "}")
			break
		}
	}
	shapes = append(shapes, worstShape{name: "large-documents", body: "[" + strings.Join(large, ",") + "]"})

	// Many small anonymous operations (no operationName: the server runs none of them).
	ops := (size - 64) / len("mutation{products{id}}")
	shapes = append(shapes, worstShape{name: "many-operations",
		body: jsonBody(strings.Repeat("mutation{products{id}}", ops) + "mutation{addItemToOrder(productVariantId:\"a\",quantity:1){id}}")})

	// Variables: a long list of numbers, and an object of many keys (the JSON decoded into maps and
	// slices costs tens of milliseconds a megabyte).
	add := "mutation($id: ID!, $q: Int!) { addItemToOrder(productVariantId: $id, quantity: $q) { id } }"
	prefix := `{"query":` + strconvQuote(add) + `,"variables":{"id":"a","q":1,"pad":[`
	shapes = append(shapes, worstShape{name: "variables-list",
		body: prefix + strings.TrimSuffix(strings.Repeat("1,", (size-len(prefix)-4)/2), ",") + "]}}"})
	var keys strings.Builder
	keys.WriteString(`{"query":` + strconvQuote(add) + `,"variables":{"id":"a","q":1`)
	for i := 0; keys.Len() < size-24; i++ {
		fmt.Fprintf(&keys, `,"k%d":1`, i)
	}
	keys.WriteString("}}")
	shapes = append(shapes, worstShape{name: "variables-keys", body: keys.String()})

	// A batch of many small operations, the last the guarded mutation.
	guarded := `{"query":"mutation{addItemToOrder(productVariantId:\"a\",quantity:1){id}}"}`
	batch := batchOf(`{"query":"{products{id}}"}`, size-len(guarded)-1)
	shapes = append(shapes, worstShape{name: "batch", body: batch[:len(batch)-1] + "," + guarded + "]"})
	return shapes
}

// batchOf is a JSON array of as many copies of item as fit in size bytes.
func batchOf(item string, size int) string {
	n := (size - 2) / (len(item) + 1)
	return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
}
