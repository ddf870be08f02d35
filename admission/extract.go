package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Errors of field extraction: the request cannot say what it wants.
var (
	ErrInvalidRequest   = &web.Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: "The request is missing a field or has a malformed one."}
	ErrUnsupportedMedia = &web.Error{Status: http.StatusUnsupportedMediaType, Code: "UNSUPPORTED_MEDIA_TYPE", Message: "The request body is not of the expected type."}
)

// fields reads the admission fields of one request. The body is read at most once (up to
// server.max_body_bytes, 413 beyond), parsed at most once, and put back byte for byte for the origin.
type fields struct {
	r       *http.Request
	limit   int64
	body    []byte
	read    bool
	form    map[string][]string
	jsonDoc any
	parsed  bool
}

func newFields(r *http.Request, maxBody int64) *fields { return &fields{r: r, limit: maxBody} }

// get returns the value of a source; found is false when the request does not carry it.
func (f *fields) get(src config.FieldSource) (value string, found bool, err error) {
	switch src.Kind {
	case "path":
		v := f.r.PathValue(src.Name)
		return v, v != "", nil
	case "query":
		// url.Query drops pairs it cannot parse (a ";" among them) where other servers split them:
		// a query that does not parse cleanly is refused, as a malformed form body is.
		query, err := url.ParseQuery(f.r.URL.RawQuery)
		if err != nil {
			return "", false, ErrInvalidRequest.With("field", src.Name).Because(fmt.Errorf("malformed query: %w", err))
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
	return "", false, fmt.Errorf("unknown source kind %q", src.Kind)
}

// ErrAmbiguousField refuses a request that gives an admission field (or the user's cookie or header)
// more than once: edgeq and the origin could read different copies (Go takes the first form value,
// PHP and Rails the last), and the bid or purchase admitted would not be the one the shop records.
var ErrAmbiguousField = &web.Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST",
	Message: "The request gives a field more than once."}

// clip shortens a visitor's text to 64 bytes for an answer or a log line.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func ambiguous(src config.FieldSource, n int) error {
	return ErrAmbiguousField.With("field", src.Name).Because(fmt.Errorf("%s given %d times", src, n))
}

func (f *fields) readBody() error {
	if f.read {
		return nil
	}
	f.read = true
	body, err := web.BufferBody(f.r, f.limit)
	if err != nil {
		return err
	}
	f.body = body
	return nil
}

func (f *fields) parseForm() error {
	if f.form != nil {
		return nil
	}
	ct := f.r.Header.Get("Content-Type")
	mediaType, params, _ := mime.ParseMediaType(ct)
	if mediaType != "application/x-www-form-urlencoded" && mediaType != "multipart/form-data" {
		return ErrUnsupportedMedia.Because(fmt.Errorf("content type %q, want a form", ct))
	}
	if err := f.readBody(); err != nil {
		return err
	}
	if mediaType == "application/x-www-form-urlencoded" {
		values, err := url.ParseQuery(string(f.body))
		if err != nil {
			return ErrInvalidRequest.Because(fmt.Errorf("malformed form: %w", err))
		}
		f.form = values
		return nil
	}
	form, err := multipart.NewReader(bytes.NewReader(f.body), params["boundary"]).ReadForm(f.limit)
	if err != nil {
		return ErrInvalidRequest.Because(fmt.Errorf("malformed multipart form: %w", err))
	}
	defer form.RemoveAll()
	f.form = form.Value
	return nil
}

func (f *fields) parseJSON() error {
	if f.parsed {
		return nil
	}
	ct := f.r.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ct)
	if mediaType != "application/json" && !strings.HasSuffix(mediaType, "+json") {
		return ErrUnsupportedMedia.Because(fmt.Errorf("content type %q, want JSON", ct))
	}
	if err := f.readBody(); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(f.body))
	dec.UseNumber()
	if err := dec.Decode(&f.jsonDoc); err != nil {
		return ErrInvalidRequest.Because(fmt.Errorf("malformed JSON: %w", err))
	}
	// Only white space may follow the value (More alone misses a stray "}" or "]").
	if _, err := dec.Token(); err != io.EOF {
		return ErrInvalidRequest.Because(errors.New("malformed JSON: data after the value"))
	}
	if key, dup := duplicateKey(f.body); dup {
		// encoding/json keeps the last copy; other parsers keep the first.
		key = clip(key)
		return ErrAmbiguousField.With("field", key).Because(fmt.Errorf("JSON key %q given twice in one object", key))
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
func lookupJSON(doc any, path []string) (string, bool, error) {
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
		return "", false, ErrInvalidRequest.Because(fmt.Errorf("json %s is not a string or number", strings.Join(path, ".")))
	}
}
