package demoshop

// The shop's GraphQL API, /api/graphql: a real executor (github.com/graph-gophers/graphql-go) on the
// schema GraphQLSchema, served over HTTP as GraphQL servers serve it:
//
//   - POST application/json {"query", "variables", "operationName"}, or an array of such objects (a
//     batch, run in order, answered with an array);
//   - POST application/graphql, the body being the document;
//   - GET ?query=&variables=&operationName=, for queries only: a mutation over GET is refused with 405,
//     as the GraphQL-over-HTTP spec says.
//
// A request that does not parse or validate is answered 400 {"errors": [...]}, each error with
// extensions.code GRAPHQL_PARSE_FAILED or GRAPHQL_VALIDATION_FAILED (as Apollo and Vendure answer
// it); an executed one 200, with whatever errors its fields had. The cart mutations answer a refusal
// inside the 200 as a member of their result union, as Vendure does.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"

	graphql "github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
)

// AddItemCall is one addItemToOrder the executor ran, with its arguments as the executor resolved
// them (after variable coercion).
type AddItemCall struct {
	ProductVariantID string
	Quantity         int32
}

// OnAddItem makes the shop call f after each addItemToOrder its executor runs, whatever the cart
// made of it, with the arguments as resolved after variable coercion. f runs outside the shop's lock,
// concurrently for concurrent requests.
func OnAddItem(f func(productVariantID string, quantity int32)) Option {
	return func(s *Shop) { s.onAddItem = f }
}

// ExecGraphQL executes one GraphQL request (a document, its variables, and the name of the operation
// to run, "" for the document's only one) without HTTP, as POST /api/graphql executes it for a
// visitor without a cart cookie: a cart that addItemToOrder makes stays in the shop, and the
// request's later mutations use it. It returns the response as the endpoint writes it ({"data": ...,
// "errors": [...]}; without "data" when the request did not parse or validate, which the endpoint
// answers with 400) and the addItemToOrder calls executed, in order. variables is not modified. It
// is safe for concurrent use.
func (s *Shop) ExecGraphQL(ctx context.Context, query string, variables map[string]any, operationName string) (result []byte, calls []AddItemCall) {
	v := &visit{s: s}
	resp := v.exec(ctx, gqlRequest{Query: query, Variables: maps.Clone(variables), OperationName: operationName})
	result, _ = json.Marshal(resp)
	s.mu.Lock()
	defer s.mu.Unlock()
	return result, slices.Clone(v.calls)
}

// maxGraphQLBody and maxBatch bound a POST.
const (
	maxGraphQLBody = 1 << 20
	maxBatch       = 20
)

// gqlRequest is one request of GraphQL over HTTP.
type gqlRequest struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables"`
	OperationName string         `json:"operationName"`
}

// graphql: GET and POST /api/graphql, and any other method refused.
func (s *Shop) graphql(w http.ResponseWriter, r *http.Request) {
	v := &visit{s: s, w: w, r: r}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		q := r.URL.Query()
		req := gqlRequest{Query: q.Get("query"), OperationName: q.Get("operationName")}
		if vars := q.Get("variables"); vars != "" {
			if err := json.Unmarshal([]byte(vars), &req.Variables); err != nil {
				badGraphQLRequest(w, http.StatusBadRequest, "variables must be a JSON object.")
				return
			}
		}
		if operationType(req.Query, req.OperationName) == "mutation" && len(graphqlSchema.ValidateWithVariables(req.Query, req.Variables)) == 0 {
			mutationOverGET(w)
			return
		}
		v.readOnly = true
		resp := v.exec(r.Context(), req)
		if v.refusedMutation {
			mutationOverGET(w)
			return
		}
		writeJSON(w, answerStatus(resp), resp)
	case http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, maxGraphQLBody+1))
		if err != nil {
			badGraphQLRequest(w, http.StatusBadRequest, "The request body could not be read.")
			return
		}
		if len(body) > maxGraphQLBody {
			badGraphQLRequest(w, http.StatusRequestEntityTooLarge, "The request body is larger than 1 MiB.")
			return
		}
		mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch mediaType {
		case "application/graphql":
			resp := v.exec(r.Context(), gqlRequest{Query: string(body)})
			writeJSON(w, answerStatus(resp), resp)
		case "application/json", "":
			s.graphqlJSON(w, r, v, body)
		default:
			badGraphQLRequest(w, http.StatusUnsupportedMediaType, "Send application/json or application/graphql.")
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		badGraphQLRequest(w, http.StatusMethodNotAllowed, "Use GET for queries or POST.")
	}
}

// graphqlJSON answers a JSON body: one request, or a batch run in order for the same visitor, answered
// 200 unless none of its requests was executed.
func (s *Shop) graphqlJSON(w http.ResponseWriter, r *http.Request, v *visit, body []byte) {
	const shape = `Send JSON such as {"query": "...", "variables": {...}, "operationName": "..."}, or an array of such objects.`
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '[' {
		var req gqlRequest
		if err := json.Unmarshal(body, &req); err != nil {
			badGraphQLRequest(w, http.StatusBadRequest, shape)
			return
		}
		resp := v.exec(r.Context(), req)
		writeJSON(w, answerStatus(resp), resp)
		return
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(body, &batch); err != nil || len(batch) == 0 {
		badGraphQLRequest(w, http.StatusBadRequest, shape)
		return
	}
	if len(batch) > maxBatch {
		badGraphQLRequest(w, http.StatusBadRequest, fmt.Sprintf("A batch holds at most %d requests.", maxBatch))
		return
	}
	answers := make([]*graphql.Response, len(batch))
	status := http.StatusBadRequest
	for i, raw := range batch {
		var req gqlRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			answers[i] = &graphql.Response{Errors: []*gqlerrors.QueryError{requestError(shape)}}
			continue
		}
		answers[i] = v.exec(r.Context(), req)
		if answerStatus(answers[i]) == http.StatusOK {
			status = http.StatusOK
		}
	}
	writeJSON(w, status, answers)
}

// answerStatus: 400 for a request that was not executed (it did not parse or validate), 200 otherwise.
func answerStatus(resp *graphql.Response) int {
	if resp.Data == nil {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

func mutationOverGET(w http.ResponseWriter) {
	w.Header().Set("Allow", "POST")
	badGraphQLRequest(w, http.StatusMethodNotAllowed, "Mutations are not served over GET: send them with POST.")
}

// badGraphQLRequest answers a request that is not GraphQL over HTTP: {"errors": [...]} with status.
func badGraphQLRequest(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, graphql.Response{Errors: []*gqlerrors.QueryError{requestError(message)}})
}

func requestError(message string) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: message, Extensions: map[string]any{"code": "BAD_REQUEST"}}
}

// visit is what the resolvers of one HTTP request (or one ExecGraphQL) know of the visitor. Its
// fields after s are used under s.mu.
type visit struct {
	s               *Shop
	w               http.ResponseWriter // where a cart made by a mutation sets its cookie; nil without HTTP
	r               *http.Request       // for the cart cookie; nil without HTTP
	readOnly        bool                // a GET: mutations are refused
	refusedMutation bool                // a mutation was refused for readOnly
	cart            *cart               // the visitor's cart, once looked up or made
	calls           []AddItemCall
}

type visitKey struct{}

func visitOf(ctx context.Context) *visit { return ctx.Value(visitKey{}).(*visit) }

// exec executes req for v's visitor. The errors of a request that was not executed get
// extensions.code.
func (v *visit) exec(ctx context.Context, req gqlRequest) *graphql.Response {
	resp := graphqlSchema.Exec(context.WithValue(ctx, visitKey{}, v), req.Query, req.OperationName, req.Variables)
	if resp.Data == nil && ctx.Err() == nil {
		for _, e := range resp.Errors {
			if e.Extensions == nil {
				code := "GRAPHQL_VALIDATION_FAILED"
				if errors.Is(e, gqlerrors.ErrSyntax) {
					code = "GRAPHQL_PARSE_FAILED"
				}
				e.Extensions = map[string]any{"code": code}
			}
		}
	}
	return resp
}

// currentCart is the visitor's cart: the one the request made, or that of the cart cookie; nil when
// there is neither. Callers hold s.mu.
func (v *visit) currentCart() *cart {
	if v.cart == nil && v.r != nil {
		v.cart = v.s.cookieCart(v.r)
	}
	return v.cart
}

// refuse refuses a mutation of a read-only request (never reached when the GET check found it first).
func (v *visit) refuse() error {
	v.refusedMutation = true
	return &resolverError{code: "METHOD_NOT_ALLOWED", message: "Mutations are not served over GET: send them with POST."}
}

// resolverError is a field's error with its extensions.code.
type resolverError struct{ code, message string }

func (e *resolverError) Error() string              { return e.message }
func (e *resolverError) Extensions() map[string]any { return map[string]any{"code": e.code} }

func notFound(format string, args ...any) error {
	return &resolverError{code: "ENTITY_NOT_FOUND", message: fmt.Sprintf(format, args...)}
}

// gqlRoot resolves Query and Mutation. Each resolver takes the shop's lock and answers snapshots, so
// operationType is the type ("query", "mutation" or "subscription") of the operation a request
// selects in doc: the one named operationName, or the document's only operation; "" when there is no
// such operation. It reads only the heads of the document's definitions, for the method check of a
// GET; reading the document is the executor's business.
func operationType(doc, operationName string) string {
	type operation struct{ kind, name string }
	var ops []operation
	depth := 0
	head := true   // the next token at depth 0 begins a definition
	named := false // the previous token was an operation's keyword: a name may follow
	for i := 0; i < len(doc); {
		c := doc[i]
		wasNamed := named
		named = false
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			named = wasNamed
			i++
		case c == '#':
			named = wasNamed
			for i < len(doc) && doc[i] != '\n' && doc[i] != '\r' {
				i++
			}
		case strings.HasPrefix(doc[i:], `"""`):
			i = blockStringEnd(doc, i+3)
		case c == '"':
			i = stringEnd(doc, i+1)
		case c == '{' || c == '(' || c == '[':
			if depth == 0 && head && c == '{' { // a query's shorthand
				ops = append(ops, operation{kind: "query"})
				head = false
			}
			depth++
			i++
		case c == '}' || c == ')' || c == ']':
			depth--
			if depth == 0 && c == '}' {
				head = true
			}
			i++
		case c == '_' || isAlnum(c):
			j := i + 1
			for j < len(doc) && (doc[j] == '_' || isAlnum(doc[j])) {
				j++
			}
			word := doc[i:j]
			i = j
			if depth != 0 {
				break
			}
			switch {
			case head:
				head = false
				if word == "query" || word == "mutation" || word == "subscription" {
					ops = append(ops, operation{kind: word})
					named = true
				}
			case wasNamed:
				ops[len(ops)-1].name = word
			}
		default:
			i++
		}
	}
	for _, op := range ops {
		if (operationName == "" && len(ops) == 1) || (operationName != "" && op.name == operationName) {
			return op.kind
		}
	}
	return ""
}

// stringEnd is the index after the string whose content begins at i.
func stringEnd(doc string, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case '\\':
			i += 2
		case '"':
			return i + 1
		case '\n', '\r':
			return i
		default:
			i++
		}
	}
	return len(doc)
}

// blockStringEnd is the index after the block string whose content begins at i.
func blockStringEnd(doc string, i int) int {
	for i < len(doc) {
		switch {
		case strings.HasPrefix(doc[i:], `\"""`):
			i += 4
		case strings.HasPrefix(doc[i:], `"""`):
			return i + 3
		default:
			i++
		}
	}
	return len(doc)
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
