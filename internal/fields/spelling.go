package fields

import (
	"strings"
)

// The spelling functions map every name that some usual origin framework reads as the same field to
// one string, so that a request naming a field in two spellings is refused (Reader).

// formSpelling is a query or form field name as the frameworks match it: PHP keeps "name[...]" as
// "name" (an array) and turns "." and " " into "_"; ASP.NET model binding ignores letter case;
// Rails and PHP read "qty[]" as "qty".
func formSpelling(name string) string {
	if i := strings.IndexByte(name, '['); i > 0 {
		name = name[:i]
	}
	name = strings.TrimLeft(name, " ")
	name = strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' {
			return '_'
		}
		return r
	}, name)
	return foldKey(name)
}

// headerSpelling is a header name as CGI-style origins see it (RFC 3875 meta-variables: PHP-FPM,
// WSGI, Rack, Puma): case does not matter, and "-" and "_" both become "_".
func headerSpelling(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "-", "_"))
}

// cookieSpelling is a cookie name as PHP ($_COOKIE) and Rack read it: percent-decoded, then (PHP)
// with "." and " " turned into "_" and "name[...]" as "name".
func cookieSpelling(name string) string {
	return formSpelling(Unescape(name))
}

// Unescape percent-decodes s the lenient way PHP's urldecode and Rack's unescape do: "%XX" becomes
// the byte, "+" a space, and a "%" not followed by two hex digits stays as it is.
func Unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
