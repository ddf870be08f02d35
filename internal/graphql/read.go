package graphql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

// Request is one HTTP request read as GraphQL: its operation requests (one, or a batched array).
// Reading is all or nothing: Read returns a Request only when every part of it was read exactly
// (docs/reference.md "GraphQL routes": what edgeq cannot read never reaches the shop).
type Request struct {
	ctx     context.Context
	method  string
	items   []item
	batched bool
	seen    *Seen
	// budget bounds the work of matching (document.go).
	budget budget
	// documents parsed for this request (several routes on one path parse a document once), and the
	// analyses of the routes (one per route, document and operationName).
	parsed   map[docRef]*parsed
	analyses map[analysisKey]*analysis
}

// item is one operation request: {"query", "operationName", "variables", "extensions"}.
type item struct {
	query         string
	hasQuery      bool
	operationName string
	// variables is the variables object as JSON (checked by fields.ValidJSON), nil when none.
	variables []byte
	// hash is the SHA-256 an automatic persisted query names (extensions.persistedQuery.sha256Hash), in
	// lower case; id a trusted document's id (documentId, doc_id).
	hash, id string
	// mismatch: the query came with a hash that is not its SHA-256 (servers refuse it).
	mismatch bool
}

// params are the names of an operation request's parameters, as JSON keys, form fields and query
// parameters.
var params = []string{"query", "operationName", "variables", "extensions", "documentId", "doc_id"}

// Read reads r as a GraphQL request, with its body up to limit bytes. The body is put back byte for
// byte for the origin; a multipart upload's files are not read, only its "operations" and "map"
// fields. seen learns the documents sent with their hash and resolves hash-only requests.
//
// Anything edgeq cannot read exactly as a GraphQL server reads it is refused, whatever it names: 413
// for a body over limit, 400 INVALID_REQUEST for the rest (a query string or body that does not parse,
// a key given twice or in another letter case, a parameter of the wrong type, invalid UTF-8, a
// compressed body, a charset other than UTF-8, a GET with a body, GraphQL parameters both in the URL
// and in the body of a POST, a WebSocket upgrade).
func Read(r *http.Request, limit int64, seen *Seen) (*Request, *web.Error) {
	req := &Request{ctx: r.Context(), method: r.Method, seen: seen, budget: newBudget(limit),
		parsed: map[docRef]*parsed{}, analyses: map[analysisKey]*analysis{}}
	fromURL, e := urlItem(r.URL.RawQuery)
	if e != nil {
		return nil, e
	}
	if up := r.Header.Get("Upgrade"); up != "" {
		// graphql-ws and subscriptions-transport-ws carry operations, mutations included, inside the
		// WebSocket stream, where edgeq cannot read them.
		return nil, refuse("Upgrade", fmt.Sprintf("an Upgrade to %q: operations inside it cannot be read", fields.Clip(up)))
	}
	hasBody := r.Body != nil && r.Body != http.NoBody
	if hasBody && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// express-graphql reads the body of any method, and its parameters with the URL's.
		return nil, refuse("body", "a GET or HEAD request with a body")
	}
	var items []item
	if hasBody {
		items, req.batched, e = bodyItems(r, limit)
		if e != nil {
			return nil, e
		}
	}
	if fromURL != nil {
		if len(items) > 0 || req.batched {
			// express-graphql reads a POST's URL parameters before its body's, Apollo, Yoga,
			// graphql-http and graphql-go the body's alone: a request with both is read two ways.
			return nil, refuse("query string", "GraphQL parameters in the URL of a request that has them in its body")
		}
		items = []item{*fromURL}
	}
	req.items = items
	req.learn(seen)
	return req, nil
}

// refuse is the 400 of a request edgeq cannot read exactly.
func refuse(field, why string) *web.Error {
	return web.ErrInvalidRequest.With("field", field).With("problems", why).Because(errors.New(why))
}

// bodyItems reads the operation requests of a body. Its encoding must be one edgeq reads as the
// server does: no Content-Encoding (Apollo and express-graphql inflate gzip bodies), UTF-8 (Apollo
// decodes UTF-16), valid UTF-8 throughout.
func bodyItems(r *http.Request, limit int64) ([]item, bool, *web.Error) {
	for _, enc := range r.Header.Values("Content-Encoding") {
		if v := strings.TrimSpace(enc); v != "" && !strings.EqualFold(v, "identity") {
			return nil, false, refuse("Content-Encoding", fmt.Sprintf("a body with Content-Encoding %q", fields.Clip(v)))
		}
	}
	var mediaType string
	var mparams map[string]string
	if len(r.Header.Values("Content-Type")) > 1 {
		return nil, false, refuse("Content-Type", "Content-Type given twice")
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		var err error
		if mediaType, mparams, err = mime.ParseMediaType(ct); err != nil {
			return nil, false, refuse("Content-Type", fmt.Sprintf("a Content-Type that does not parse (%v)", err))
		}
		if cs, ok := mparams["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
			return nil, false, refuse("Content-Type", fmt.Sprintf("charset %q: send UTF-8", fields.Clip(cs)))
		}
	}
	var body []byte
	var e *web.Error
	if mediaType == "multipart/form-data" {
		body, e = operationsPart(r, mparams["boundary"], limit)
	} else {
		body, e = fields.Buffer(r, limit)
	}
	if e != nil {
		return nil, false, e
	}
	if !utf8.Valid(body) {
		return nil, false, refuse("body", "a body that is not valid UTF-8")
	}
	switch mediaType {
	case "application/graphql":
		if len(body) == 0 {
			return nil, false, nil
		}
		return []item{{query: string(body), hasQuery: true}}, false, nil
	case "application/x-www-form-urlencoded":
		it, e := urlItem(string(body))
		if e != nil || it == nil {
			return nil, false, e
		}
		return []item{*it}, false, nil
	}
	// JSON: application/json, a multipart upload's operations, and bodies of other types that hold
	// JSON (some servers decode any body).
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, false, nil
	}
	if trimmed[0] != '{' && trimmed[0] != '[' {
		return nil, false, refuse("body", fmt.Sprintf("a %q body that is not a JSON object or array", fields.Clip(mediaType)))
	}
	return jsonItems(body)
}

// urlItem reads the GraphQL parameters of a query string or form body; nil when it has none.
func urlItem(raw string) (*item, *web.Error) {
	if raw == "" {
		return nil, nil
	}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return nil, refuse("query string", fmt.Sprintf("a query string that does not parse (%v)", err))
	}
	var it item
	found := false
	for key, vals := range values {
		if !slices.Contains(params, key) {
			if e := otherCase(key, params...); e != nil {
				return nil, e
			}
			continue
		}
		if len(vals) > 1 {
			return nil, ambiguous(key, fmt.Sprintf("%s given %d times", key, len(vals)))
		}
		v := vals[0]
		if !utf8.ValidString(v) {
			return nil, refuse(key, "a parameter that is not valid UTF-8")
		}
		found = true
		var e *web.Error
		switch key {
		case "query":
			it.query, it.hasQuery = v, true
		case "operationName":
			it.operationName = v
		case "documentId", "doc_id":
			if it.id != "" {
				return nil, ambiguous("documentId", "documentId and doc_id both given")
			}
			it.id = v
		case "variables":
			if strings.TrimSpace(v) != "" {
				it.variables, e = variables([]byte(v), false)
			}
		case "extensions":
			if strings.TrimSpace(v) != "" {
				ext := []byte(v)
				if e = fields.ValidJSON(ext); e == nil {
					it.hash, e = persistedHash(fields.Trim(ext))
				}
			}
		}
		if e != nil {
			return nil, e.With("field", key)
		}
	}
	if !found {
		return nil, nil
	}
	return &it, nil
}

// jsonItems reads a JSON body: one operation request, or a batched array of them.
func jsonItems(body []byte) ([]item, bool, *web.Error) {
	if e := fields.ValidJSON(body); e != nil {
		return nil, false, e
	}
	body = fields.Trim(body)
	if body[0] == '{' {
		it, e := objectItem(body)
		return []item{it}, false, e
	}
	n := 0
	fields.Elements(body, func([]byte) bool { n++; return true })
	items := make([]item, 0, n)
	var e *web.Error
	fields.Elements(body, func(elem []byte) bool {
		if elem[0] != '{' {
			e = refuse("body", fmt.Sprintf("batch element %d is not an object", len(items)))
			return false
		}
		var it item
		if it, e = objectItem(elem); e != nil {
			return false
		}
		items = append(items, it)
		return true
	})
	return items, true, e
}

// objectItem reads one operation request object: every parameter of the type servers take, or a
// refusal. A parameter in another letter case ("Query") is refused: a Go server decoding into a
// struct reads it as the parameter, others ignore it.
func objectItem(obj []byte) (item, *web.Error) {
	var it item
	var e *web.Error
	var docID string
	var hasDocID bool
	fields.Members(obj, func(key string, value []byte) bool {
		switch key {
		case "query":
			it.query, it.hasQuery, e = stringParam(key, value)
		case "operationName":
			it.operationName, _, e = stringParam(key, value)
		case "documentId":
			it.id, _, e = stringParam(key, value)
		case "doc_id":
			docID, hasDocID, e = stringParam(key, value)
		case "variables":
			it.variables, e = variables(value, true)
		case "extensions":
			it.hash, e = persistedHash(value)
		default:
			e = otherCase(key, params...)
		}
		return e == nil
	})
	if e == nil && hasDocID {
		if it.id != "" {
			return it, ambiguous("documentId", "documentId and doc_id both given")
		}
		it.id = docID
	}
	return it, e
}

// stringParam reads a parameter that is a string or null.
func stringParam(name string, value []byte) (string, bool, *web.Error) {
	switch value[0] {
	case 'n':
		return "", false, nil
	case '"':
		return fields.String(value), true, nil
	}
	return "", false, refuse(name, name+" is not a string")
}

// variables reads the variables parameter: an object or null, kept as JSON; some clients send it as a
// JSON string, which express-graphql and others parse (checked, given: a query string's or a form's
// value, already a string).
func variables(value []byte, checked bool) ([]byte, *web.Error) {
	if value[0] == '"' {
		text := fields.String(value)
		if strings.TrimSpace(text) == "" {
			return nil, nil
		}
		value, checked = []byte(text), false
	}
	if !checked {
		if e := fields.ValidJSON(value); e != nil {
			return nil, e.With("field", "variables")
		}
		value = fields.Trim(value)
	}
	switch value[0] {
	case 'n':
		return nil, nil
	case '{':
		return value, nil
	}
	return nil, refuse("variables", "variables is not an object")
}

// otherCase refuses key when it is one of names in another letter case: a Go server decoding into a
// struct (or mapstructure, as gqlgen reads persisted queries) reads it as the name, others ignore it.
func otherCase(key string, names ...string) *web.Error {
	for _, name := range names {
		if key != name && strings.EqualFold(key, name) {
			return ambiguous(name, fmt.Sprintf("%s given as %q", name, fields.Clip(key)))
		}
	}
	return nil
}

// persistedHash reads extensions (an object or null) for persistedQuery.sha256Hash, in lower case; ""
// when none is given.
func persistedHash(extensions []byte) (string, *web.Error) {
	switch extensions[0] {
	case 'n':
		return "", nil
	case '{':
	default:
		return "", refuse("extensions", "extensions is not an object")
	}
	var hash string
	var e *web.Error
	fields.Members(extensions, func(key string, pq []byte) bool {
		if key != "persistedQuery" {
			e = otherCase(key, "persistedQuery")
			return e == nil
		}
		switch pq[0] {
		case 'n':
			return true
		case '{':
		default:
			e = refuse("extensions.persistedQuery", "persistedQuery is not an object")
			return false
		}
		fields.Members(pq, func(key string, value []byte) bool {
			if key != "sha256Hash" {
				e = otherCase(key, "sha256Hash", "version")
				return e == nil
			}
			switch value[0] {
			case 'n':
			case '"':
				hash = strings.ToLower(fields.String(value))
			default:
				e = refuse("extensions.persistedQuery.sha256Hash", "sha256Hash is not a string")
			}
			return e == nil
		})
		return e == nil
	})
	return hash, e
}

// learn remembers the documents sent with their SHA-256 hash; a hash that is not the document's marks
// the operation request (it must not teach edgeq a wrong document for the hash).
func (req *Request) learn(seen *Seen) {
	for i := range req.items {
		it := &req.items[i]
		if it.hasQuery && it.hash != "" {
			if !seen.learn(it.hash, it.query) {
				it.mismatch = true
			}
		}
	}
}

func ambiguous(field, why string) *web.Error {
	return web.ErrAmbiguousField.With("field", field).Because(errors.New(why))
}

// operationsPart reads the "operations" and "map" fields of a GraphQL multipart request (the GraphQL
// multipart request spec puts them first, in that order, before the files), at most limit bytes in
// all, and puts back every byte it read in front of the rest of the body: the files stream on to the
// origin unread. A body that does not start with exactly these two fields is refused: graphql-upload
// takes the last "operations" before "map", Yoga the first of the whole body.
func operationsPart(r *http.Request, boundary string, limit int64) ([]byte, *web.Error) {
	var prefix bytes.Buffer
	orig := r.Body
	// The multipart reader reads ahead in blocks: what it took beyond the parts is in prefix too.
	tee := io.TeeReader(io.LimitReader(orig, limit+64<<10), &prefix)
	defer func() {
		r.Body = restored{Reader: io.MultiReader(bytes.NewReader(prefix.Bytes()), orig), Closer: orig}
		r.GetBody = nil
	}()
	mr := multipart.NewReader(tee, boundary)
	var ops []byte
	left := limit
	for _, name := range []string{"operations", "map"} {
		part, err := mr.NextPart()
		if err != nil {
			return nil, refuse("body", fmt.Sprintf("a multipart body without its %s field (%v)", name, err))
		}
		if part.FormName() != name || part.FileName() != "" {
			return nil, refuse(name, fmt.Sprintf("the multipart field %q where %s belongs", fields.Clip(part.FormName()), name))
		}
		value, err := io.ReadAll(io.LimitReader(part, left+1))
		if err != nil {
			return nil, refuse("body", fmt.Sprintf("a multipart body that does not read (%v)", err))
		}
		if left -= int64(len(value)); left < 0 {
			return nil, web.ErrPayloadTooLarge
		}
		if name == "operations" {
			ops = value
		}
	}
	return ops, nil
}

type restored struct {
	io.Reader
	io.Closer
}
