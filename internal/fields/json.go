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
// "AMOUNT" are the same field to a Go shop, and to ASP.NET's defaults). It reads the bytes once; an
// object's keys are compared one by one while it has a few (no allocation beyond the keys), through a
// set of folded keys once it has more, so the work stays linear in the body.
func duplicateKey(body []byte) (string, bool) {
	// stack holds per open object (or array: object false) the keys seen so far; frames are reused.
	type frame struct {
		object bool
		keys   []string
		folded map[string]struct{}
	}
	var stack []frame
	depth := 0
	push := func(object bool) {
		if depth == len(stack) {
			stack = append(stack, frame{})
		}
		stack[depth].object, stack[depth].keys, stack[depth].folded = object, stack[depth].keys[:0], nil
		depth++
	}
	const fewKeys = 16
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			push(true)
		case '[':
			push(false)
		case '}', ']':
			if depth > 0 {
				depth--
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
			if next >= len(body) || body[next] != ':' || depth == 0 || !stack[depth-1].object {
				continue
			}
			key := string(raw[1 : len(raw)-1])
			if escaped || !utf8.ValidString(key) {
				// encoding/json reads escapes, and each byte of broken UTF-8 as U+FFFD: so must we, or
				// "\x9e" and "\xbf" would be two keys here and one to a Go origin.
				_ = json.Unmarshal(raw, &key) // raw is a whole string token the scan checked: it decodes
			}
			fr := &stack[depth-1]
			if fr.folded == nil {
				for _, seen := range fr.keys {
					if strings.EqualFold(seen, key) {
						return key, true
					}
				}
				if fr.keys = append(fr.keys, key); len(fr.keys) <= fewKeys {
					continue
				}
				fr.folded = make(map[string]struct{}, 2*len(fr.keys))
				for _, seen := range fr.keys[:len(fr.keys)-1] {
					fr.folded[foldKey(seen)] = struct{}{}
				}
			}
			folded := foldKey(key)
			if _, seen := fr.folded[folded]; seen {
				return key, true
			}
			fr.folded[folded] = struct{}{}
		}
	}
	return "", false
}

// foldKey maps every spelling of a key that encoding/json would match case-insensitively to one
// string: each rune to the smallest rune of its Unicode fold orbit, and an ASCII letter (the smallest
// of its orbit, or "K" of the Kelvin sign's, "S" of the long s's) to lower case. A key of ASCII
// without capitals is its own folding (no allocation: most keys).
func foldKey(key string) string {
	i := 0
	for i < len(key) && key[i] < utf8.RuneSelf && (key[i] < 'A' || key[i] > 'Z') {
		i++
	}
	if i == len(key) {
		return key
	}
	var b strings.Builder
	b.Grow(len(key))
	b.WriteString(key[:i])
	for _, r := range key[i:] {
		if r >= utf8.RuneSelf {
			for {
				next := unicode.SimpleFold(r)
				if next <= r {
					r = next
					break
				}
				r = next
			}
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
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
