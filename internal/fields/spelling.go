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

// sameHeader reports whether two header names are one to CGI-style origins (RFC 3875
// meta-variables: PHP-FPM, WSGI, Rack, Puma): case does not matter, and "-" and "_" are alike. It
// compares byte by byte without allocating: it runs for every header of every admission.
func sameHeader(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := headerByte(a[i]), headerByte(b[i])
		if x != y {
			return false
		}
	}
	return true
}

func headerByte(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case c == '-':
		return '_'
	}
	return c
}

// sameForm reports whether two query or form names spell one field (formSpelling), without
// allocating for the common case: names of ASCII letters, digits, "-" and "_" only.
func sameForm(name, wantSpelling string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 0x80 || c == '[' || c == '.' || c == ' ' || c == '%' {
			return formSpelling(name) == wantSpelling
		}
	}
	if len(name) != len(wantSpelling) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != wantSpelling[i] {
			return false
		}
	}
	return true
}

// cookieSpelling is a cookie name as PHP ($_COOKIE) and Rack read it: percent-decoded, then (PHP)
// with "." and " " turned into "_" and "name[...]" as "name".
func cookieSpelling(name string) string {
	return formSpelling(Unescape(name))
}

// sameCookieForm reports whether a cookie name is, to PHP, the query or form name whose spelling is
// wantSpelling (formSpelling), without allocating for names that need no decoding.
func sameCookieForm(cookie, wantSpelling string) bool {
	if strings.ContainsAny(cookie, "%+") {
		return cookieSpelling(cookie) == wantSpelling
	}
	return sameForm(cookie, wantSpelling)
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
