// Package fields reads what a request says (admission fields, the waiting room's form or JSON
// fields, the admin API's JSON bodies) the one strict way: a body is read at most once under a
// limit and put back byte for byte for the origin, a field given twice or a JSON key repeated in any
// letter case is refused as ambiguous, and data after a JSON value is refused. Every step that takes
// a value from a visitor's request reads it here, so edgeq and the origin read the same value.
package fields

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// Reader reads the fields of one request. The body is read at most once (up to a limit, 413 beyond),
// parsed at most once, and put back byte for byte for the origin.
//
// A field is read the way the usual origin frameworks read it, or refused as ambiguous (400
// INVALID_REQUEST, the origin not contacted) when they could read another value than edgeq: the same
// name given twice, another spelling of the name that some framework takes for it (letter case,
// PHP's "." and " " for "_", "name[]", "X_User" for "X-User", a percent-encoded cookie name), or the
// same name in the query and in the body, which PHP's $_REQUEST, Rails' params, Flask's
// request.values, Laravel's input() and Go's FormValue merge, or a cookie of a query or form field's
// name (PHP's $_REQUEST and classic ASP.NET's Request[name] merge cookies too). docs/security.md
// lists the frameworks.
type Reader struct {
	r       *http.Request
	limit   int64
	body    []byte
	read    bool
	query   url.Values
	form    map[string][]string
	jsonDoc any
	parsed  bool
}

// New reads r's fields; its body is read (when a field needs it) up to maxBody bytes.
func New(r *http.Request, maxBody int64) *Reader { return &Reader{r: r, limit: maxBody} }

// Get returns the value of a source; found is false when the request does not carry it. A refusal is
// a *web.Error (400 INVALID_REQUEST, 413, 415).
func (f *Reader) Get(src config.FieldSource) (value string, found bool, e *web.Error) {
	switch src.Kind {
	case "path":
		v := f.r.PathValue(src.Name)
		return v, v != "", nil
	case "query":
		if e := f.parseQuery(src.Name); e != nil {
			return "", false, e
		}
		if value, found, e = pick(src, f.query); e != nil {
			return "", false, e
		}
		if e := f.notInBody(src); e != nil {
			return "", false, e // ambiguous: no value comes with a refusal
		}
		if e := f.notInCookies(src); e != nil {
			return "", false, e
		}
		return value, found, nil
	case "form":
		if e := f.parseForm(); e != nil {
			return "", false, e
		}
		if value, found, e = pick(src, f.form); e != nil {
			return "", false, e
		}
		if e := f.notInQuery(src); e != nil {
			return "", false, e
		}
		if e := f.notInCookies(src); e != nil {
			return "", false, e
		}
		return value, found, nil
	case "json":
		if e := f.parseJSON(); e != nil {
			return "", false, e
		}
		path := src.JSONPath()
		if value, found, e = lookupJSON(f.jsonDoc, path); e != nil {
			return "", false, e
		}
		if len(path) == 1 {
			if e := f.notInQuery(src); e != nil {
				return "", false, e
			}
		}
		return value, found, nil
	case "header":
		return f.header(src)
	case "cookie":
		return f.cookie(src)
	}
	return "", false, web.ErrInternal.Because(fmt.Errorf("unknown source kind %q", src.Kind))
}

// pick reads src.Name from values (a query or a form): refused when it is there twice or when
// another key is the same name to some framework (formSpelling).
func pick(src config.FieldSource, values map[string][]string) (string, bool, *web.Error) {
	vals := values[src.Name]
	if len(vals) > 1 {
		return "", false, ambiguous(src, len(vals))
	}
	want := formSpelling(src.Name)
	for name := range values {
		if name != src.Name && sameForm(name, want) {
			return "", false, otherSpelling(src, name)
		}
	}
	if len(vals) == 0 {
		return "", false, nil
	}
	return vals[0], true, nil
}

// notInQuery refuses a body field whose name the query carries (in any spelling), whether or not the
// body has it: an origin that merges the two may read the query's.
func (f *Reader) notInQuery(src config.FieldSource) *web.Error {
	if f.r.URL.RawQuery == "" {
		return nil
	}
	if e := f.parseQuery(src.Name); e != nil {
		return e
	}
	name := src.Name
	if src.Kind == "json" {
		name = src.JSONPath()[0]
	}
	want := formSpelling(name)
	for key := range f.query {
		if sameForm(key, want) {
			return web.ErrFieldInQuery.With("field", Clip(name)).Because(fmt.Errorf("%s is also in the query as %q", src, Clip(key)))
		}
	}
	return nil
}

// notInBody refuses a query field whose name a form or JSON object body also carries at its top
// level (in any spelling). Other bodies carry no fields.
func (f *Reader) notInBody(src config.FieldSource) *web.Error {
	if f.r.Body == nil || f.r.Body == http.NoBody {
		return nil
	}
	mediaType, _, _ := mime.ParseMediaType(f.r.Header.Get("Content-Type"))
	var keys []string
	switch {
	case mediaType == "application/x-www-form-urlencoded" || mediaType == "multipart/form-data":
		if e := f.parseForm(); e != nil {
			return e
		}
		for k := range f.form {
			keys = append(keys, formSpelling(k))
		}
	case isJSON(mediaType):
		if e := f.parseJSON(); e != nil {
			return e
		}
		if doc, ok := f.jsonDoc.(map[string]any); ok {
			for k := range doc {
				keys = append(keys, formSpelling(k))
			}
		}
	}
	if slices.Contains(keys, formSpelling(src.Name)) {
		return web.ErrFieldInBody.With("field", Clip(src.Name)).Because(fmt.Errorf("%s is also in the body", src))
	}
	return nil
}

// notInCookies refuses a query or form field whose name a cookie also carries (in any spelling PHP
// reads alike: cookieSpelling), whether or not the field is there: PHP's $_REQUEST with request_order
// unset (variables_order "GPCS": a cookie overrides the query and the body) and classic ASP.NET's
// Request[name] (query, form, then cookies) merge them. No framework merges cookies with a JSON body,
// so json: fields are not checked. The Cookie header is split here, not by http.Request.Cookies,
// which drops names that are not HTTP tokens ("sku[0]") and PHP reads all the same.
func (f *Reader) notInCookies(src config.FieldSource) *web.Error {
	lines := f.r.Header["Cookie"]
	if len(lines) == 0 {
		return nil
	}
	want := formSpelling(src.Name)
	for _, line := range lines {
		for part := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(part, "=")
			if name = textproto.TrimString(name); name != "" && sameCookieForm(name, want) {
				return web.ErrAmbiguousField.With("field", Clip(src.Name)).
					Because(fmt.Errorf("%s is also a cookie, named %q", src, Clip(name)))
			}
		}
	}
	return nil
}

// header reads a header: refused when given twice, or when another header is the same one to a
// CGI-style origin (PHP-FPM, WSGI, Rack, Puma map "X-User" and "X_User" both to HTTP_X_USER).
func (f *Reader) header(src config.FieldSource) (string, bool, *web.Error) {
	vals := f.r.Header.Values(src.Name)
	if len(vals) > 1 {
		return "", false, ambiguous(src, len(vals))
	}
	canonical := http.CanonicalHeaderKey(src.Name)
	for name := range f.r.Header {
		if name != canonical && sameHeader(name, canonical) {
			return "", false, otherSpelling(src, name)
		}
	}
	if len(vals) == 0 {
		return "", false, nil
	}
	return vals[0], vals[0] != "", nil
}

// cookie reads a cookie: refused when given twice, or when another cookie is the same one to PHP or
// Rack, which percent-decode cookie names (and PHP turns "." and " " into "_").
func (f *Reader) cookie(src config.FieldSource) (string, bool, *web.Error) {
	var value string
	n := 0
	want := cookieSpelling(src.Name)
	for _, c := range f.r.Cookies() {
		switch {
		case c.Name == src.Name:
			value = c.Value
			n++
		case cookieSpelling(c.Name) == want:
			return "", false, otherSpelling(src, c.Name)
		}
	}
	if n > 1 {
		return "", false, ambiguous(src, n)
	}
	return value, n == 1 && value != "", nil
}

// parseQuery parses the query once; field names the field being read, for the refusal.
func (f *Reader) parseQuery(field string) *web.Error {
	if f.query != nil {
		return nil
	}
	// url.Query drops pairs it cannot parse (a ";" among them) where other servers split them: a
	// query that does not parse cleanly is refused, as a malformed form body is.
	query, err := url.ParseQuery(f.r.URL.RawQuery)
	if err != nil {
		return web.ErrInvalidRequest.With("field", Clip(field)).Because(fmt.Errorf("malformed query: %w", err))
	}
	f.query = query
	return nil
}

// Body returns a top-level field of the body, which may be a JSON object or a form (urlencoded or
// multipart): the waiting room's endpoints take either. A body of another type carries no fields.
func (f *Reader) Body(name string) (value string, found bool, e *web.Error) {
	mediaType, _, _ := mime.ParseMediaType(f.r.Header.Get("Content-Type"))
	switch {
	case isJSON(mediaType):
		return f.Get(config.FieldSource{Kind: "json", Name: name})
	case mediaType == "application/x-www-form-urlencoded" || mediaType == "multipart/form-data":
		return f.Get(config.FieldSource{Kind: "form", Name: name})
	}
	return "", false, nil
}

func isJSON(mediaType string) bool {
	return mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
}

// ValueMax bounds a visitor's text (a field's name or value) quoted in an answer or a log line, in bytes.
const ValueMax = 64

// Clip shortens a visitor's text to ValueMax bytes for an answer or a log line (vocab.Clip).
func Clip(s string) string { return vocab.Clip(s, ValueMax) }

func ambiguous(src config.FieldSource, n int) *web.Error {
	return web.ErrAmbiguousField.With("field", Clip(src.Name)).Because(fmt.Errorf("%s given %d times", src, n))
}

func otherSpelling(src config.FieldSource, name string) *web.Error {
	return web.ErrAmbiguousField.With("field", Clip(src.Name)).Because(fmt.Errorf("%s also given as %q", src, Clip(name)))
}

// ReadBody reads the whole body now (at most the limit), for a step that must hold the complete
// request before it acts; fields read later use the same bytes.
func (f *Reader) ReadBody() *web.Error { return f.readBody() }

func (f *Reader) readBody() *web.Error {
	if f.read {
		return nil
	}
	f.read = true
	body, err := Buffer(f.r, f.limit)
	if err != nil {
		return err
	}
	f.body = body
	return nil
}

func (f *Reader) parseForm() *web.Error {
	if f.form != nil {
		return nil
	}
	ct := f.r.Header.Get("Content-Type")
	mediaType, params, _ := mime.ParseMediaType(ct)
	if mediaType != "application/x-www-form-urlencoded" && mediaType != "multipart/form-data" {
		return web.ErrUnsupportedMedia.Because(fmt.Errorf("content type %q, want a form", ct))
	}
	if err := f.readBody(); err != nil {
		return err
	}
	if mediaType == "application/x-www-form-urlencoded" {
		values, err := url.ParseQuery(string(f.body))
		if err != nil {
			return web.ErrInvalidRequest.Because(fmt.Errorf("malformed form: %w", err))
		}
		f.form = values
		return nil
	}
	form, err := multipart.NewReader(bytes.NewReader(f.body), params["boundary"]).ReadForm(f.limit)
	if err != nil {
		return web.ErrInvalidRequest.Because(fmt.Errorf("malformed multipart form: %w", err))
	}
	defer func() { _ = form.RemoveAll() }()
	f.form = form.Value
	return nil
}

func (f *Reader) parseJSON() *web.Error {
	if f.parsed {
		return nil
	}
	ct := f.r.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ct)
	if !isJSON(mediaType) {
		return web.ErrUnsupportedMedia.Because(fmt.Errorf("content type %q, want JSON", ct))
	}
	if err := f.readBody(); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(f.body))
	dec.UseNumber()
	if err := dec.Decode(&f.jsonDoc); err != nil {
		return web.ErrInvalidRequest.Because(fmt.Errorf("malformed JSON: %w", err))
	}
	if e := checkJSON(f.body, dec); e != nil {
		return e
	}
	f.parsed = true
	return nil
}
