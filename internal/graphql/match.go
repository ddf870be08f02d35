package graphql

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

// Route is a compiled graphql: block of a route.
type Route struct {
	operation ast.Operation
	fields    []string
	refuse    []string
	// names are fields and refuse: every place a document names one must be accounted for.
	names []string
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
	rt := &Route{operation: ast.Mutation, fields: g.Fields, refuse: g.RefuseFields,
		names: slices.Concat(g.Fields, g.RefuseFields), seen: seen}
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
	// ErrUnknownOperation: operationName names no operation of the document (servers refuse it, or,
	// reading it from elsewhere, run another).
	ErrUnknownOperation = web.ErrInvalidRequest.With("field", "operationName").
				With("problems", "operationName names no operation of the document")
	// ErrConditional: a guarded field under @skip or @include runs or not by a variable's value.
	ErrConditional = web.ErrInvalidRequest.
			With("problems", "a guarded field cannot be conditional (@skip, @include)")
	// ErrUnaccounted: the document names a guarded or refused field outside the operation edgeq reads
	// as executed (a string, a comment, another operation, a nested field): a parser that reads the
	// document otherwise could execute it.
	ErrUnaccounted = web.ErrInvalidRequest.
			With("problems", "the document names this field outside the root fields of the operation it executes")
	// ErrHashMismatch: a document came with a persisted query hash that is not its SHA-256.
	ErrHashMismatch = web.ErrInvalidRequest.With("field", "extensions.persistedQuery.sha256Hash").
			With("problems", "the hash is not the SHA-256 of the query")
	// ErrDocumentMismatch: a document came with the id of another trusted document.
	ErrDocumentMismatch = web.ErrInvalidRequest.With("field", "documentId").
				With("problems", "the query is not the document of this id")
	// ErrMutationOverGET: servers execute no mutation sent with GET.
	ErrMutationOverGET = web.ErrMethodNotAllowed.With("problems", "a mutation is sent with POST")
)

// Match decides whether the route applies to req: a match (the route applies), nil and nil (it does
// not: the request goes on down the route table), or a refusal when edgeq cannot be sure what the
// server will execute, or when the operation selects one of refuse_fields.
func (rt *Route) Match(req *Request) (*Match, *web.Error) {
	var match *Match
	count := 0
	for i := range req.items {
		if e := canceled(req.ctx); e != nil {
			return nil, e
		}
		it := &req.items[i]
		text, ref, e := rt.text(it)
		if e != nil {
			return nil, e
		}
		if text == "" {
			continue
		}
		a, e := req.analyze(rt, text, ref, it.operationName)
		if e != nil {
			return nil, e
		}
		if len(a.found) == 0 {
			continue
		}
		if it.mismatch {
			return nil, ErrHashMismatch
		}
		if a.op.Operation == ast.Mutation && (req.method == http.MethodGet || req.method == http.MethodHead) {
			return nil, ErrMutationOverGET
		}
		count += len(a.found)
		batch := -1
		if req.batched {
			batch = i
		}
		match = &Match{field: a.found[0], op: a.op, vars: it.variables, batch: batch}
	}
	if count > 1 {
		return nil, web.ErrAmbiguousField.With("field", match.field.Name).
			Because(fmt.Errorf("%s selected %d times (aliases or a batch): the shop would run each", match.field.Name, count))
	}
	return match, nil
}

// docRef names the document an operation request executes within one request: its text when the
// request sends it, the hash or id that named it otherwise (so that a batch naming one persisted
// document a thousand times looks it up by its name, not by hashing its text a thousand times).
type docRef struct {
	from byte // 'q' sent as the query, 's' a document seen with its hash, 'd' a trusted document
	key  string
}

// text is the document an operation request executes: its query, or the document its hash or id
// names, and its docRef. "" when it has none (the server will refuse it: nothing to guard).
func (rt *Route) text(it *item) (string, docRef, *web.Error) {
	if it.hasQuery {
		if it.id != "" {
			if doc, ok := rt.docs[it.id]; ok && doc != it.query {
				return "", docRef{}, ErrDocumentMismatch
			}
		}
		return it.query, docRef{'q', it.query}, nil
	}
	for _, key := range []string{it.hash, it.id} {
		if key == "" {
			continue
		}
		if doc, ok := rt.seen.lookup(key); ok {
			return doc, docRef{'s', key}, nil
		}
		if doc, ok := rt.docs[key]; ok {
			return doc, docRef{'d', key}, nil
		}
	}
	if it.hash == "" && it.id == "" {
		return "", docRef{}, nil
	}
	if rt.docs != nil {
		return "", docRef{}, nil // the file lists every guarded document: this one is not
	}
	return "", docRef{}, web.ErrPersistedQueryNotFound
}

// analyze reads a parsed document for operationName: the operation the server executes, the guarded
// fields it selects (following at most spreadsLeft fragment spreads), and whether every place the
// text names a guarded or refused field is accounted for by the executed operation: its name, or a
// root field it selects.
func (rt *Route) analyze(p *parsed, text, operationName string, spreadsLeft int) *analysis {
	a := &analysis{}
	switch ops := p.operations[operationName]; {
	case operationName == "" && len(p.doc.Operations) == 1:
		a.op = p.doc.Operations[0]
	case operationName == "":
		// No operation, or several and none named: the server executes none.
	case len(ops) == 0:
		a.err = ErrUnknownOperation.Because(fmt.Errorf("operationName %q", fields.Clip(operationName)))
		return a
	case len(ops) > 1:
		// An invalid document: servers refuse it, but which one would a lenient one run?
		a.err = ErrSeveralOperations.Because(fmt.Errorf("%d operations named %q", len(ops), fields.Clip(operationName)))
		return a
	default:
		a.op = ops[0]
	}
	if a.op != nil {
		if a.found, a.spreads, a.err = rt.selected(p, a.op, spreadsLeft); a.err != nil {
			return a
		}
	}
	for _, name := range rt.names {
		accounted := 0
		if a.op != nil && a.op.Name == name {
			accounted++
		}
		for _, f := range a.found {
			if f.Name == name {
				accounted++
			}
		}
		if occurrences(text, name) > accounted {
			if a.op == nil && len(p.doc.Operations) > 1 {
				a.err = ErrSeveralOperations.Because(fmt.Errorf("%d operations and no operationName", len(p.doc.Operations)))
			} else {
				a.err = ErrUnaccounted.With("field", name)
			}
			return a
		}
	}
	return a
}

// selected returns the guarded root fields op selects, directly or through fragment spreads and
// inline fragments, and the spreads it followed; a refused field is 403 OPERATION_REFUSED, a
// conditional guarded field 400, more than spreadsLeft spreads ErrTooManySpreads. A fragment is
// followed once: spreading it again merges the same fields, as the server does. Only root selections
// are walked (a field's own selections are not), so the walk is linear in the document's size.
func (rt *Route) selected(p *parsed, op *ast.OperationDefinition, spreadsLeft int) ([]*ast.Field, int, *web.Error) {
	if op.Operation != rt.operation {
		return nil, 0, nil
	}
	var found []*ast.Field
	spreads := 0
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
				if spreads++; spreads > spreadsLeft {
					return ErrTooManySpreads
				}
				if def := p.fragments[s.Name]; def != nil {
					if e := walk(def.SelectionSet, conditional || isConditional(s.Directives) || isConditional(def.Directives)); e != nil {
						return e
					}
				}
			}
		}
		return nil
	}
	if e := walk(op.SelectionSet, false); e != nil {
		return nil, spreads, e
	}
	return found, spreads, nil
}

func isConditional(directives ast.DirectiveList) bool {
	for _, d := range directives {
		if d.Name == "skip" || d.Name == "include" {
			return true
		}
	}
	return false
}
