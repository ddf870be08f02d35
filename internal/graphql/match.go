package graphql

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

// Route is a compiled graphql: block of a route.
type Route struct {
	operation ast.Operation
	fields    []string
	refuse    []string
	// docs are the trusted documents (graphql.documents), nil without a file: then a hash-only request
	// edgeq has not seen answers PERSISTED_QUERY_NOT_FOUND; with one, the file lists every guarded
	// document, so an id it lacks is not a guarded operation.
	docs map[string]string
	seen *Seen
}

// Compile compiles a route's graphql: block; nil when the route is not a graphql: route. seen is the
// replica's memory of documents sent with their hash.
func Compile(g config.GraphQL, seen *Seen) (*Route, error) {
	if !g.On() {
		return nil, nil
	}
	rt := &Route{operation: ast.Mutation, fields: g.Fields, refuse: g.RefuseFields, seen: seen}
	if g.Operation == config.GraphQLQuery {
		rt.operation = ast.Query
	}
	if g.Documents != "" {
		docs, err := LoadDocuments(g.Documents)
		if err != nil {
			return nil, fmt.Errorf("graphql.documents: %w", err)
		}
		rt.docs = docs
	}
	return rt, nil
}

// Errors of graphql: routes (docs/reference.md "GraphQL routes").
var (
	// ErrSeveralOperations: the server executes the one operationName names, and none is named.
	ErrSeveralOperations = web.ErrInvalidRequest.With("field", "operationName").
				With("problems", "the document has several operations: name the one to execute in operationName")
	// ErrConditional: a guarded field under @skip or @include runs or not by a variable's value.
	ErrConditional = web.ErrInvalidRequest.
			With("problems", "a guarded field cannot be conditional (@skip, @include)")
	// ErrUnparsable: the document does not parse (or the request cannot be read) and names a guarded field.
	ErrUnparsable = web.ErrInvalidRequest.With("field", "query")
	// ErrHashMismatch: a document came with a persisted query hash that is not its SHA-256.
	ErrHashMismatch = web.ErrInvalidRequest.With("field", "extensions.persistedQuery.sha256Hash").
			With("problems", "the hash is not the SHA-256 of the query")
	// ErrDocumentMismatch: a document came with the id of another trusted document.
	ErrDocumentMismatch = web.ErrInvalidRequest.With("field", "documentId").
				With("problems", "the query is not the document of this id")
	// ErrMutationOverGET: servers execute no mutation sent with GET.
	ErrMutationOverGET = web.ErrMethodNotAllowed.With("problems", "a mutation is sent with POST")
)

// tokenLimit bounds the work of parsing one document (a storefront's largest is a few thousand tokens).
const tokenLimit = 50_000

type parsed struct {
	doc *ast.QueryDocument
	err error
}

func parse(text string) (*ast.QueryDocument, error) {
	return parser.ParseQueryWithTokenLimit(&ast.Source{Input: text}, tokenLimit)
}

// document parses text once per request, and once per replica while it is among the recent ones
// (Seen): the tree is never changed after parsing.
func (req *Request) document(text string) (*ast.QueryDocument, error) {
	if p, ok := req.parsed[text]; ok {
		return p.doc, p.err
	}
	var p *parsed
	if req.seen != nil {
		p, _ = req.seen.parsed.Get(text)
	}
	if p == nil {
		doc, err := parse(text)
		if err != nil {
			doc = nil
		}
		p = &parsed{doc: doc, err: err}
		if req.seen != nil && len(text) <= SeenMaxBytes {
			req.seen.parsed.Add(text, p)
		}
	}
	req.parsed[text] = p
	return p.doc, p.err
}

// Match decides whether the route applies to req: a match (the route applies), nil and nil (it does
// not: the request goes on down the route table), or a refusal when edgeq cannot be sure what the
// server will execute, or when the operation selects one of refuse_fields.
func (rt *Route) Match(req *Request) (*Match, *web.Error) {
	if req.bad != nil {
		if rt.named(req.raw) {
			return nil, req.bad
		}
		return nil, nil
	}
	var match *Match
	count := 0
	for i := range req.items {
		it := &req.items[i]
		text, e := rt.text(it)
		if e != nil {
			return nil, e
		}
		if text == "" {
			continue
		}
		doc, err := req.document(text)
		if err != nil {
			if rt.named([]byte(text)) {
				return nil, ErrUnparsable.Because(fmt.Errorf("the document does not parse: %v", err))
			}
			continue
		}
		ops, e := rt.executed(doc, it.operationName)
		if e != nil {
			return nil, e
		}
		for _, op := range ops {
			found, e := rt.selected(doc, op)
			if e != nil {
				return nil, e
			}
			if len(found) == 0 {
				continue
			}
			if it.mismatch {
				return nil, ErrHashMismatch
			}
			if op.Operation == ast.Mutation && (req.method == http.MethodGet || req.method == http.MethodHead) {
				return nil, ErrMutationOverGET
			}
			count += len(found)
			batch := -1
			if req.batched {
				batch = i
			}
			match = &Match{field: found[0], op: op, vars: it.variables, batch: batch}
		}
	}
	if count > 1 {
		return nil, web.ErrAmbiguousField.With("field", match.field.Name).
			Because(fmt.Errorf("%s selected %d times (aliases or a batch): the shop would run each", match.field.Name, count))
	}
	return match, nil
}

// text is the document an operation request executes: its query, or the document its hash or id
// names. "" when it has none (the server will refuse it: nothing to guard).
func (rt *Route) text(it *item) (string, *web.Error) {
	if it.hasQuery {
		if it.id != "" {
			if doc, ok := rt.docs[it.id]; ok && doc != it.query {
				return "", ErrDocumentMismatch
			}
		}
		return it.query, nil
	}
	for _, key := range []string{it.hash, it.id} {
		if key == "" {
			continue
		}
		if doc, ok := rt.seen.lookup(key); ok {
			return doc, nil
		}
		if doc, ok := rt.docs[key]; ok {
			return doc, nil
		}
	}
	if it.hash == "" && it.id == "" {
		return "", nil
	}
	if rt.docs != nil {
		return "", nil // the file lists every guarded document: this one is not
	}
	return "", web.ErrPersistedQueryNotFound
}

// named reports whether raw text names a guarded or refused field.
func (rt *Route) named(raw []byte) bool {
	for _, name := range slices.Concat(rt.fields, rt.refuse) {
		if bytes.Contains(raw, []byte(name)) {
			return true
		}
	}
	return false
}

// executed returns the operations of doc the server may execute for operationName: the named one, the
// only one, or, without a name, none and a refusal when several concern the route.
func (rt *Route) executed(doc *ast.QueryDocument, operationName string) ([]*ast.OperationDefinition, *web.Error) {
	if operationName != "" {
		var named []*ast.OperationDefinition
		for _, op := range doc.Operations {
			if op.Name == operationName {
				named = append(named, op)
			}
		}
		if len(named) > 1 {
			// An invalid document: servers refuse it, but which one would a lenient one run?
			return nil, ErrSeveralOperations.Because(fmt.Errorf("%d operations named %q", len(named), fields.Clip(operationName)))
		}
		return named, nil
	}
	if len(doc.Operations) <= 1 {
		return doc.Operations, nil
	}
	for _, op := range doc.Operations {
		if found, e := rt.selected(doc, op); e != nil || len(found) > 0 {
			return nil, ErrSeveralOperations.Because(fmt.Errorf("%d operations and no operationName", len(doc.Operations)))
		}
	}
	return nil, nil
}

// selected returns the guarded root fields op selects, directly or through fragment spreads and
// inline fragments; a refused field is 403 OPERATION_REFUSED and a conditional guarded field 400.
// A fragment is followed once: spreading it again merges the same fields, as the server does.
func (rt *Route) selected(doc *ast.QueryDocument, op *ast.OperationDefinition) ([]*ast.Field, *web.Error) {
	if op.Operation != rt.operation {
		return nil, nil
	}
	var found []*ast.Field
	visited := map[string]bool{}
	var walk func(set ast.SelectionSet, conditional bool) *web.Error
	walk = func(set ast.SelectionSet, conditional bool) *web.Error {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				switch {
				case slices.Contains(rt.refuse, s.Name):
					return web.ErrOperationRefused.With("field", s.Name)
				case slices.Contains(rt.fields, s.Name):
					if conditional || isConditional(s.Directives) {
						return ErrConditional.With("field", s.Name)
					}
					found = append(found, s)
				}
			case *ast.InlineFragment:
				if e := walk(s.SelectionSet, conditional || isConditional(s.Directives)); e != nil {
					return e
				}
			case *ast.FragmentSpread:
				if visited[s.Name] {
					continue
				}
				visited[s.Name] = true
				if def := doc.Fragments.ForName(s.Name); def != nil {
					if e := walk(def.SelectionSet, conditional || isConditional(s.Directives) || isConditional(def.Directives)); e != nil {
						return e
					}
				}
			}
		}
		return nil
	}
	if e := walk(op.SelectionSet, false); e != nil {
		return nil, e
	}
	return found, nil
}

func isConditional(directives ast.DirectiveList) bool {
	for _, d := range directives {
		if d.Name == "skip" || d.Name == "include" {
			return true
		}
	}
	return false
}
