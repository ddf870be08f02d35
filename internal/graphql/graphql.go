// Package graphql reads requests to a shop's GraphQL endpoint the way the shop's server executes them,
// for routes that guard one operation of a shared endpoint (routes[].graphql; docs/reference.md
// "GraphQL routes").
//
// A request is read once (read.go) in every shape GraphQL servers take: a JSON body (one operation or a
// batched array), an application/graphql body, a form, a multipart upload's "operations" field, GET
// ?query=, and persisted queries named by hash or id (documents.go). It is read exactly or refused:
// whatever edgeq cannot read as every server reads it (a URL or body that does not parse, a key given
// twice or in another letter case, a compressed or non-UTF-8 body, parameters in both the URL and the
// body) is a 400, never a pass. Its documents are scanned and parsed with a real GraphQL parser
// (vektah/gqlparser; no schema is needed) within a budget linear in the request (document.go). A
// compiled Route (match.go) then decides whether the executed operation selects one of its root
// fields, directly or through fragments: the route applies, it does not (the request goes on down the
// route table untouched), or the request is refused because edgeq cannot be sure what the server will
// execute (several operations without an operationName, an operationName naming none, a guarded field
// under @skip/@include or selected twice, a guarded name anywhere the executed operation does not
// account for). A Match (args.go) reads the matched field's arguments as the server will coerce them:
// inline literal, variable of any name, variable default, input-object path.
package graphql

import (
	"context"
	"net/http"

	"github.com/vektah/gqlparser/v2/ast"
)

// Match is the guarded field a route matched in a request: what admission reads its arguments from
// (Argument) and what an answer: outcome's $field stands for (ResponseKey).
type Match struct {
	field *ast.Field
	op    *ast.OperationDefinition
	vars  []byte // the variables object as JSON, nil when none
	// batch is the index of the operation in a batched array, -1 when the body was one operation.
	batch int
}

// ResponseKey is the key of the matched field in the shop's answer: its alias, or its name.
func (m *Match) ResponseKey() string { return m.field.Alias } // the parser sets Alias to Name when none is written

// Batch is the index of the matched operation in a batched request, -1 when the request was not a
// batch (its answer is then one object, not an array).
func (m *Match) Batch() int { return m.batch }

// Field is the name of the matched root field.
func (m *Match) Field() string { return m.field.Name }

type matchKey struct{}

// WithMatch returns r carrying m, for the steps of the matched route.
func WithMatch(r *http.Request, m *Match) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), matchKey{}, m))
}

// MatchFrom returns the match a graphql: route left on the request, nil for other routes.
func MatchFrom(ctx context.Context) *Match {
	m, _ := ctx.Value(matchKey{}).(*Match)
	return m
}
