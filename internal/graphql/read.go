package graphql

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

// Request is one HTTP request read as GraphQL: its operation requests (one, or a batched array).
type Request struct {
	method  string
	items   []item
	batched bool
	// bad is why the request could not be read as GraphQL (malformed JSON, a parameter given twice or
	// in two places); raw is what it said, searched for the names of guarded fields: a request edgeq
	// cannot read is refused only when it names one (Route.Match).
	bad *web.Error
	raw []byte
	// documents parsed so far, by text: several routes on one path parse a document once; seen keeps
	// them for later requests.
	parsed map[string]*parsed
	seen   *Seen
}

// item is one operation request: {"query", "operationName", "variables", "extensions"}.
type item struct {
	query         string
	hasQuery      bool
	operationName string
	variables     map[string]any
	// hash is the SHA-256 an automatic persisted query names (extensions.persistedQuery.sha256Hash), in
	// lower case; id a trusted document's id (documentId, doc_id).
	hash, id string
	// mismatch: the query came with a hash that is not its SHA-256 (servers refuse it).
	mismatch bool
}

// params are the names of an operation request's parameters, as JSON keys, form fields and query
// parameters.
var params = []string{"query", "operationName", "variables", "extensions", "documentId", "doc_id"}

// Read reads r as a GraphQL request, with its body up to limit bytes (413 beyond: edgeq cannot see
// what a larger one asks for). The body is put back byte for byte for the origin; a multipart
// upload's files are not read, only its "operations" field. seen learns the documents sent with
// their hash and resolves hash-only requests. Anything else that cannot be read is kept in the
// Request (Route.Match decides): only an oversized body is refused here.
func Read(r *http.Request, limit int64, seen *Seen) (*Request, *web.Error) {
	req := &Request{method: r.Method, parsed: map[string]*parsed{}, seen: seen}
	fromURL, e := urlItem(r.URL.RawQuery)
	if e != nil {
		req.fail(e, []byte(r.URL.RawQuery))
		if unescaped, err := url.QueryUnescape(r.URL.RawQuery); err == nil {
			req.raw = append(req.raw, unescaped...)
		}
		return req, nil
	}
	hasBody := r.Body != nil && r.Body != http.NoBody && r.Method != http.MethodGet && r.Method != http.MethodHead
	if !hasBody {
		if fromURL != nil {
			req.items = []item{*fromURL}
		}
		req.learn(seen)
		return req, nil
	}
	mediaType, mparams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var body []byte
	if mediaType == "multipart/form-data" {
		body, e = operationsPart(r, mparams["boundary"], limit)
	} else {
		body, e = fields.Buffer(r, limit)
	}
	if e != nil {
		if e.Code == web.ErrPayloadTooLarge.Code {
			return nil, e
		}
		req.fail(e, body)
		return req, nil
	}
	var items []item
	switch {
	case mediaType == "application/graphql":
		items = []item{{query: string(body), hasQuery: true}}
	case mediaType == "application/x-www-form-urlencoded":
		it, e := urlItem(string(body))
		if e != nil {
			req.fail(e, body)
			return req, nil
		}
		if it != nil {
			items = []item{*it}
		}
	default:
		// JSON (application/json, a multipart upload's operations, and bodies of other types that hold
		// JSON: some servers decode any body).
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if len(trimmed) == 0 {
			break
		}
		if trimmed[0] != '{' && trimmed[0] != '[' {
			req.fail(web.ErrInvalidRequest.Because(fmt.Errorf("a %q body that is not JSON", mediaType)), body)
			return req, nil
		}
		if items, req.batched, e = jsonItems(body); e != nil {
			req.fail(e, body)
			return req, nil
		}
	}
	if fromURL != nil {
		// Some servers (express-graphql, graphql-http) read parameters from the URL of a POST too.
		if req.batched || len(items) > 1 {
			req.fail(ambiguous("query string", "a batched body and GraphQL parameters in the URL"), append(body, r.URL.RawQuery...))
			return req, nil
		}
		if len(items) == 0 {
			items = []item{{}}
		}
		if e := merge(&items[0], fromURL); e != nil {
			req.fail(e, append(body, r.URL.RawQuery...))
			return req, nil
		}
	}
	req.items = items
	req.learn(seen)
	return req, nil
}

func (req *Request) fail(e *web.Error, raw []byte) {
	req.bad, req.raw, req.items = e, raw, nil
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

// urlItem reads the GraphQL parameters of a query string or form body; nil when it has none.
func urlItem(raw string) (*item, *web.Error) {
	if raw == "" {
		return nil, nil
	}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return nil, web.ErrInvalidRequest.With("field", "query").Because(fmt.Errorf("malformed query string: %w", err))
	}
	obj := map[string]any{}
	for _, name := range params {
		vals, ok := values[name]
		if !ok {
			continue
		}
		if len(vals) > 1 {
			return nil, ambiguous(name, fmt.Sprintf("%s given %d times", name, len(vals)))
		}
		v := vals[0]
		switch name {
		case "variables", "extensions":
			if v == "" {
				continue
			}
			doc, e := fields.ParseJSON([]byte(v))
			if e != nil {
				return nil, e.With("field", name)
			}
			obj[name] = doc
		default:
			obj[name] = v
		}
	}
	if len(obj) == 0 {
		return nil, nil
	}
	it, e := objectItem(obj)
	return &it, e
}

// jsonItems reads a JSON body: one operation request, or a batched array of them.
func jsonItems(body []byte) ([]item, bool, *web.Error) {
	doc, e := fields.ParseJSON(body)
	if e != nil {
		return nil, false, e
	}
	switch v := doc.(type) {
	case map[string]any:
		it, e := objectItem(v)
		return []item{it}, false, e
	case []any:
		items := make([]item, 0, len(v))
		for i, elem := range v {
			obj, ok := elem.(map[string]any)
			if !ok {
				return nil, true, web.ErrInvalidRequest.Because(fmt.Errorf("batch element %d is not an object", i))
			}
			it, e := objectItem(obj)
			if e != nil {
				return nil, true, e
			}
			items = append(items, it)
		}
		return items, true, nil
	}
	return nil, false, web.ErrInvalidRequest.Because(errors.New("the JSON body is neither an object nor an array"))
}

// objectItem reads one operation request object. A parameter in another letter case ("Query") is
// refused: a Go server decoding into a struct reads it as the parameter, others ignore it.
func objectItem(obj map[string]any) (item, *web.Error) {
	var it item
	for key := range obj {
		for _, name := range params {
			if key != name && strings.EqualFold(key, name) {
				return it, ambiguous(name, fmt.Sprintf("%s given as %q", name, fields.Clip(key)))
			}
		}
	}
	str := func(name string) (string, bool, *web.Error) {
		switch v := obj[name].(type) {
		case nil:
			return "", false, nil
		case string:
			return v, true, nil
		}
		return "", false, web.ErrInvalidRequest.With("field", name).Because(fmt.Errorf("%s is not a string", name))
	}
	var e *web.Error
	if it.query, it.hasQuery, e = str("query"); e != nil {
		return it, e
	}
	if it.operationName, _, e = str("operationName"); e != nil {
		return it, e
	}
	if it.id, _, e = str("documentId"); e != nil {
		return it, e
	}
	if docID, ok, e := str("doc_id"); e != nil {
		return it, e
	} else if ok {
		if it.id != "" {
			return it, ambiguous("documentId", "documentId and doc_id both given")
		}
		it.id = docID
	}
	switch v := obj["variables"].(type) {
	case nil:
	case map[string]any:
		it.variables = v
	case string:
		// Some clients send the variables as a JSON string; express-graphql and others parse it.
		if strings.TrimSpace(v) != "" {
			doc, e := fields.ParseJSON([]byte(v))
			if e != nil {
				return it, e.With("field", "variables")
			}
			vars, ok := doc.(map[string]any)
			if !ok && doc != nil {
				return it, web.ErrInvalidRequest.With("field", "variables").Because(errors.New("variables is not an object"))
			}
			it.variables = vars
		}
	default:
		return it, web.ErrInvalidRequest.With("field", "variables").Because(errors.New("variables is not an object"))
	}
	if ext, ok := obj["extensions"].(map[string]any); ok {
		if pq, ok := ext["persistedQuery"].(map[string]any); ok {
			if hash, ok := pq["sha256Hash"].(string); ok {
				it.hash = strings.ToLower(hash)
			}
		}
	} else if obj["extensions"] != nil {
		return it, web.ErrInvalidRequest.With("field", "extensions").Because(errors.New("extensions is not an object"))
	}
	return it, nil
}

// merge fills the parameters an operation request's body lacks from the URL's; a parameter in both
// is ambiguous (servers disagree on which wins).
func merge(it *item, fromURL *item) *web.Error {
	conflict := func(name string) *web.Error {
		return ambiguous(name, name+" given in the body and in the URL")
	}
	if fromURL.hasQuery {
		if it.hasQuery {
			return conflict("query")
		}
		it.query, it.hasQuery = fromURL.query, true
	}
	if fromURL.operationName != "" {
		if it.operationName != "" {
			return conflict("operationName")
		}
		it.operationName = fromURL.operationName
	}
	if fromURL.variables != nil {
		if it.variables != nil {
			return conflict("variables")
		}
		it.variables = fromURL.variables
	}
	if fromURL.hash != "" {
		if it.hash != "" {
			return conflict("extensions")
		}
		it.hash = fromURL.hash
	}
	if fromURL.id != "" {
		if it.id != "" {
			return conflict("documentId")
		}
		it.id = fromURL.id
	}
	return nil
}

// operationsPart reads the "operations" field of a GraphQL multipart request (the GraphQL multipart
// request spec puts it first, before "map" and the files), at most limit bytes, and puts back every
// byte it read in front of the rest of the body: the files stream on to the origin unread.
func operationsPart(r *http.Request, boundary string, limit int64) ([]byte, *web.Error) {
	var prefix bytes.Buffer
	orig := r.Body
	// The multipart reader reads ahead in blocks: what it took beyond the part is in prefix too.
	tee := io.TeeReader(io.LimitReader(orig, limit+64<<10), &prefix)
	defer func() {
		r.Body = restored{Reader: io.MultiReader(bytes.NewReader(prefix.Bytes()), orig), Closer: orig}
		r.GetBody = nil
	}()
	part, err := multipart.NewReader(tee, boundary).NextPart()
	if err != nil {
		return prefix.Bytes(), web.ErrInvalidRequest.Because(fmt.Errorf("malformed multipart body: %w", err))
	}
	if part.FormName() != "operations" {
		return prefix.Bytes(), web.ErrInvalidRequest.With("field", "operations").
			Because(fmt.Errorf("the first part is %q, not operations", fields.Clip(part.FormName())))
	}
	ops, err := io.ReadAll(io.LimitReader(part, limit+1))
	if err != nil {
		return prefix.Bytes(), web.ErrInvalidBody.Because(err)
	}
	if int64(len(ops)) > limit {
		return nil, web.ErrPayloadTooLarge
	}
	return ops, nil
}

type restored struct {
	io.Reader
	io.Closer
}
