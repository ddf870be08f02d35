package fields

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgeq/edgeq/internal/web"
)

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
			if escaped || !utf8.ValidString(key) {
				// encoding/json reads escapes, and each byte of broken UTF-8 as U+FFFD: so must we, or
				// "\x9e" and "\xbf" would be two keys here and one to a Go origin.
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

// lookupJSON follows a dotted path: object keys by name (another letter case of the name is
// ambiguous), array elements by index.
func lookupJSON(doc any, path []string) (string, bool, *web.Error) {
	cur := doc
	for _, step := range path {
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[step]
			if !ok {
				// encoding/json matches keys to struct fields in any letter case: a Go origin reads
				// {"Quantity": 50} for "quantity", most others read nothing.
				want := foldKey(step)
				for key := range node {
					if foldKey(key) == want {
						return "", false, web.ErrAmbiguousField.With("field", Clip(step)).
							Because(fmt.Errorf("JSON key %q given as %q", Clip(step), Clip(key)))
					}
				}
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
