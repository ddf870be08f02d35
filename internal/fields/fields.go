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
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/web"
)

// Reader reads the fields of one request. The body is read at most once (up to a limit, 413 beyond),
// parsed at most once, and put back byte for byte for the origin.
type Reader struct {
	r       *http.Request
	limit   int64
	body    []byte
	read    bool
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
		// url.Query drops pairs it cannot parse (a ";" among them) where other servers split them:
		// a query that does not parse cleanly is refused, as a malformed form body is.
		query, err := url.ParseQuery(f.r.URL.RawQuery)
		if err != nil {
			return "", false, web.ErrInvalidRequest.With("field", src.Name).Because(fmt.Errorf("malformed query: %w", err))
		}
		vals := query[src.Name]
		if len(vals) > 1 {
			return "", false, ambiguous(src, len(vals))
		}
		if len(vals) == 0 {
			return "", false, nil
		}
		return vals[0], true, nil
	case "header":
		vals := f.r.Header.Values(src.Name)
		if len(vals) > 1 {
			return "", false, ambiguous(src, len(vals))
		}
		if len(vals) == 0 {
			return "", false, nil
		}
		return vals[0], vals[0] != "", nil
	case "cookie":
		cookies := f.r.CookiesNamed(src.Name)
		if len(cookies) > 1 {
			return "", false, ambiguous(src, len(cookies))
		}
		if len(cookies) == 0 {
			return "", false, nil
		}
		return cookies[0].Value, cookies[0].Value != "", nil
	case "form":
		if err := f.parseForm(); err != nil {
			return "", false, err
		}
		vals := f.form[src.Name]
		if len(vals) > 1 {
			return "", false, ambiguous(src, len(vals))
		}
		if len(vals) == 0 {
			return "", false, nil
		}
		return vals[0], true, nil
	case "json":
		if err := f.parseJSON(); err != nil {
			return "", false, err
		}
		return lookupJSON(f.jsonDoc, src.JSONPath())
	}
	return "", false, web.ErrInternal.Because(fmt.Errorf("unknown source kind %q", src.Kind))
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

// Clip shortens a visitor's text to 64 bytes for an answer or a log line.
func Clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func ambiguous(src config.FieldSource, n int) *web.Error {
	return web.ErrAmbiguousField.With("field", src.Name).Because(fmt.Errorf("%s given %d times", src, n))
}

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
	defer form.RemoveAll()
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

// duplicateKey finds a key given twice in one object of a JSON document (parseJSON calls it on valid
// ones; on anything else it answers something without panicking: FuzzDuplicateKey). Keys are
// compared the way encoding/json matches them to struct fields, without regard to case ("amount" and
// "AMOUNT" are the same field to a Go shop, and to ASP.NET's defaults). It reads the bytes once and
// allocates only for object keys.
func duplicateKey(body []byte) (string, bool) {
	var stack []map[string]struct{} // per open object its folded keys; nil for an array
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			stack = append(stack, map[string]struct{}{})
		case '[':
			stack = append(stack, nil)
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case '"':
			end, escaped := i+1, false
			for ; end < len(body) && body[end] != '"'; end++ {
				if body[end] == '\\' {
					end++
					escaped = true
				}
			}
			if end >= len(body) {
				return "", false // an unterminated string: not JSON (parseJSON never gets here)
			}
			raw := body[i : end+1]
			i = end
			// In valid JSON a string followed by ':' is an object key.
			next := end + 1
			for next < len(body) && (body[next] == ' ' || body[next] == '\t' || body[next] == '\n' || body[next] == '\r') {
				next++
			}
			if next >= len(body) || body[next] != ':' || len(stack) == 0 || stack[len(stack)-1] == nil {
				continue
			}
			key := string(raw[1 : len(raw)-1])
			if escaped {
				json.Unmarshal(raw, &key)
			}
			keys, folded := stack[len(stack)-1], foldKey(key)
			if _, seen := keys[folded]; seen {
				return key, true
			}
			keys[folded] = struct{}{}
		}
	}
	return "", false
}

// foldKey maps every spelling of a key that encoding/json would match case-insensitively to one
// string: ASCII letters upper-cased, other runes to the smallest rune of their Unicode fold orbit
// (so the Kelvin sign is "K").
func foldKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				r = next
				break
			}
			r = next
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lookupJSON follows a dotted path: object keys by name, array elements by index.
func lookupJSON(doc any, path []string) (string, bool, *web.Error) {
	cur := doc
	for _, step := range path {
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[step]
			if !ok {
				return "", false, nil
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(node) {
				return "", false, nil
			}
			cur = node[i]
		default:
			return "", false, nil
		}
	}
	switch v := cur.(type) {
	case string:
		return v, true, nil
	case json.Number:
		return v.String(), true, nil
	case nil:
		return "", false, nil
	default:
		return "", false, web.ErrInvalidRequest.Because(fmt.Errorf("json %s is not a string or number", strings.Join(path, ".")))
	}
}
