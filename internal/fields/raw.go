package fields

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/edgeq/edgeq/internal/web"
)

// Reading JSON without decoding it: a body checked once by ValidJSON is walked where it lies
// (Members, Elements) and only the values a reader needs are decoded. Decoding a whole body into
// maps and slices costs tens of milliseconds a megabyte (a 1 MiB array of numbers, about 70 ms);
// checking and walking it costs a few.

// ValidJSON checks that body is one JSON value as every mainstream parser reads it the same way:
// valid UTF-8 throughout, valid JSON (RFC 8259), no escape of a lone UTF-16 surrogate ("\ud800":
// U+FFFD to encoding/json, kept by JavaScript), no key given twice in one object in any letter case
// (400 INVALID_REQUEST otherwise). Numbers beyond float64 are valid: readers keep them as text.
func ValidJSON(body []byte) *web.Error {
	switch {
	case !utf8.Valid(body):
		return web.ErrInvalidJSON.Because(errors.New("the JSON is not valid UTF-8"))
	case !json.Valid(body):
		// encoding/json says where; Valid does not.
		var v any
		return web.ErrInvalidJSON.Because(json.Unmarshal(body, &v))
	case loneSurrogate(body):
		return web.ErrInvalidJSON.Because(errors.New(`a string escapes a lone UTF-16 surrogate ("\ud800")`))
	}
	if key, dup := duplicateKey(body); dup {
		key = Clip(key)
		return web.ErrAmbiguousField.With("field", key).Because(errors.New("JSON key " + key + " given twice in one object"))
	}
	return nil
}

// loneSurrogate reports whether a JSON text escapes a UTF-16 surrogate that is not half of a pair.
func loneSurrogate(body []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range body[i+2 : i+6] {
			if !isHex(c) {
				return 0, false
			}
			r = r<<4 | rune(unhex(c))
		}
		return r, true
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
			i++ // another escape (a backslash, a quote, \n): skip the escaped byte
		case 0xD800 <= r && r <= 0xDBFF:
			if low, ok := hex4(i + 6); !ok || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 11
		case 0xDC00 <= r && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// The walkers below read JSON that ValidJSON passed; on anything else they stop early without
// panicking.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// skipString returns the end of the string that starts at b[i] (its closing quote included).
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// Trim returns raw without the white space around its value.
func Trim(raw []byte) []byte {
	i := skipSpace(raw, 0)
	j := len(raw)
	for j > i && (raw[j-1] == ' ' || raw[j-1] == '\t' || raw[j-1] == '\n' || raw[j-1] == '\r') {
		j--
	}
	return raw[i:j]
}

// Members calls f with the key and the value (its bytes) of each member of the object raw, in order,
// until f returns false. raw that is not an object: no call.
func Members(raw []byte, f func(key string, value []byte) bool) {
	members(raw, func(key, value []byte) bool { return f(String(key), value) })
}

// Member returns the value of the member of the object raw named key (exactly), and whether there is
// one. Keys without escapes are compared where they lie.
func Member(raw []byte, key string) (value []byte, found bool) {
	members(raw, func(k, v []byte) bool {
		inner := k[1 : len(k)-1]
		if bytes.IndexByte(inner, '\\') < 0 {
			found = string(inner) == key
		} else {
			found = String(k) == key
		}
		if found {
			value = v
		}
		return !found
	})
	return value, found
}

// members calls f with the key (as JSON, quotes included) and the value of each member of raw.
func members(raw []byte, f func(key, value []byte) bool) {
	raw = Trim(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return
	}
	for i := 1; ; {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return
		}
		keyEnd := skipString(raw, i)
		key := raw[i:keyEnd]
		i = skipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' || len(key) < 2 {
			return
		}
		i = skipSpace(raw, i+1)
		end := skipValue(raw, i)
		if !f(key, raw[i:end]) {
			return
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i++
	}
}

// Elements calls f with each element (its bytes) of the array raw, in order, until f returns false.
// raw that is not an array: no call.
func Elements(raw []byte, f func(value []byte) bool) {
	raw = Trim(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return
	}
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return
	}
	for i < len(raw) {
		end := skipValue(raw, i)
		if !f(raw[i:end]) {
			return
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i = skipSpace(raw, i+1)
	}
}

// String decodes the JSON string raw ("" for anything else).
func String(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			_ = json.Unmarshal(raw, &s) // raw is a string token of a checked document: it decodes
			return s
		}
	}
	return string(inner)
}
