package idmatch

// The number readings of an id, each as one language or database reads a string as a number.

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// reading is one reading of an id as a number: its value (integer or float key) and whether the
// reading took the whole id (a shop that reads ids as numbers keeps numbers, so a guarded id counts
// only under the readings it is whole for).
type reading struct {
	value string
	whole bool
}

// readings are the ways the common languages and databases read an id as a number
// (docs/reference.md "Other spellings of a guarded id").
func readings(id string) []reading {
	var rs []reading
	for _, read := range []func(string) []reading{phpInt, rubyToI, jsParseInt, jsNumber, mysqlNumber, postgresInt} {
		rs = append(rs, read(id)...)
	}
	return rs
}

// integerForm is the id's integer when it starts with one (after an optional sign) and every reading
// that reads an integer from the start agrees on it (PHP, Ruby, parseInt, MySQL, and Number when it
// reads one): "#42" for "042" and "42abc"; "" otherwise ("4e1" is 40 to PHP and 4 to Ruby, "0x2A"
// 0 to PHP and 42 to parseInt).
func integerForm(id string) string {
	_, body := sign(strings.TrimLeft(id, space))
	if body == "" || !isDigit(body[0]) {
		return ""
	}
	var values []string
	for _, read := range []func(string) []reading{phpInt, rubyToI, jsParseInt, jsNumber, mysqlNumber} {
		for _, rd := range read(id) {
			values = append(values, rd.value)
		}
	}
	for _, v := range values[1:] {
		if v != values[0] {
			return ""
		}
	}
	return "#" + values[0]
}

// phpInt is PHP's (int) and intval() of a string (PHP 8, 64 bits): leading whitespace, then the
// longest numeric prefix ("42abc" is 42; "1e3" is 1000 since PHP 7.1; an integer too large for 64 bits
// is read as a float); a float is truncated and capped to the int range. No number at all is 0. An
// infinite float ("1e999") gives 0 and the cap: PHP versions have differed.
func phpInt(id string) []reading {
	s := strings.TrimLeft(id, space)
	_, body := sign(s)
	n, isFloat := decimalPrefix(body)
	if n == 0 {
		return []reading{{value: "0"}}
	}
	number := s[:len(s)-len(body)+n]
	whole := strings.Trim(body[n:], space) == ""
	if !isFloat {
		if v, err := strconv.ParseInt(number, 10, 64); err == nil {
			return []reading{{strconv.FormatInt(v, 10), whole}}
		}
	}
	f, _ := strconv.ParseFloat(number, 64) // out of range: ±Inf
	if math.IsInf(f, 0) {
		return []reading{{"0", whole}, {capInt(f), whole}}
	}
	return []reading{{capInt(f), whole}}
}

// capInt truncates f to an int64, capped to its range.
func capInt(f float64) string {
	switch {
	case f >= math.MaxInt64:
		return strconv.FormatInt(math.MaxInt64, 10)
	case f <= math.MinInt64:
		return strconv.FormatInt(math.MinInt64, 10)
	}
	return strconv.FormatInt(int64(f), 10)
}

// rubyToI is Ruby's String#to_i: leading whitespace, a sign, an optional "0d" prefix, then digits with
// single underscores between them ("4_2" is 42), of any size. No number is 0.
func rubyToI(id string) []reading {
	neg, body := sign(strings.TrimLeft(id, space))
	if len(body) > 2 && body[0] == '0' && (body[1] == 'd' || body[1] == 'D') && isDigit(body[2]) {
		body = body[2:]
	}
	var digits []byte
	n := 0
	for ; n < len(body); n++ {
		c := body[n]
		between := c == '_' && n > 0 && isDigit(body[n-1]) && n+1 < len(body) && isDigit(body[n+1])
		if !isDigit(c) && !between {
			break
		}
		if c != '_' {
			digits = append(digits, c)
		}
	}
	if len(digits) == 0 {
		return []reading{{value: "0"}}
	}
	v, _ := new(big.Int).SetString(string(digits), 10)
	if neg {
		v.Neg(v)
	}
	return []reading{{v.String(), strings.Trim(body[n:], space) == ""}}
}

// jsParseInt is JavaScript's parseInt(s) without a radix: leading whitespace, a sign, "0x" for hex,
// then the longest run of digits, as a double (so a long id rounds). No digit is NaN: no reading.
func jsParseInt(id string) []reading {
	neg, body := sign(strings.TrimLeftFunc(id, jsSpace))
	base := 10
	if len(body) >= 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		base, body = 16, body[2:]
	}
	n := 0
	for n < len(body) && digitValue(body[n]) < base {
		n++
	}
	if n == 0 {
		return nil
	}
	v, _ := new(big.Int).SetString(body[:n], base)
	if neg {
		v.Neg(v)
	}
	f, _ := new(big.Float).SetInt(v).Float64()
	return []reading{{floatKey(f), strings.TrimFunc(body[n:], jsSpace) == ""}}
}

// jsNumber is JavaScript's Number(s): the whole string, trimmed, must be a number: a decimal literal
// with an optional sign and exponent, "0x", "0o" or "0b" digits without a sign, or Infinity; else NaN
// (no reading).
func jsNumber(id string) []reading {
	s := strings.TrimFunc(id, jsSpace)
	if s == "" {
		return []reading{{"0", true}}
	}
	if base := basePrefix(s); base != 0 {
		if !allDigits(s[2:], base) {
			return nil
		}
		v, _ := new(big.Int).SetString(s[2:], base)
		f, _ := new(big.Float).SetInt(v).Float64()
		return []reading{{floatKey(f), true}}
	}
	neg, body := sign(s)
	if body == "Infinity" {
		if neg {
			return []reading{{floatKey(math.Inf(-1)), true}}
		}
		return []reading{{floatKey(math.Inf(1)), true}}
	}
	if n, _ := decimalPrefix(body); n == 0 || n != len(body) {
		return nil
	}
	f, _ := strconv.ParseFloat(s, 64)
	return []reading{{floatKey(f), true}}
}

// mysqlNumber is how MySQL compares a string with a number column: the string's longest numeric prefix
// as a double ("42abc" is 42, "4e1" 40); no number is 0. A double too large is given as infinite and as
// the largest double.
func mysqlNumber(id string) []reading {
	s := strings.TrimLeft(id, space)
	_, body := sign(s)
	n, _ := decimalPrefix(body)
	if n == 0 {
		return []reading{{value: "0"}}
	}
	whole := strings.Trim(body[n:], space) == ""
	f, _ := strconv.ParseFloat(s[:len(s)-len(body)+n], 64)
	if math.IsInf(f, 0) {
		return []reading{{floatKey(f), whole}, {floatKey(math.Copysign(math.MaxFloat64, f)), whole}}
	}
	return []reading{{floatKey(f), whole}}
}

// postgresInt is PostgreSQL's cast of a whole string to a bigint: surrounding whitespace, a sign,
// digits; since PostgreSQL 16 also "0x", "0o" and "0b" prefixes and underscores between digits (and
// after a prefix: "0o_1_755").
func postgresInt(id string) []reading {
	neg, body := sign(strings.Trim(id, space))
	base := 10
	if b := basePrefix(body); b != 0 {
		base, body = b, strings.TrimPrefix(body[2:], "_")
	}
	if body == "" || body[0] == '_' || body[len(body)-1] == '_' || strings.Contains(body, "__") {
		return nil
	}
	digits := strings.ReplaceAll(body, "_", "")
	if !allDigits(digits, base) {
		return nil
	}
	v, _ := new(big.Int).SetString(digits, base)
	if neg {
		v.Neg(v)
	}
	if !v.IsInt64() {
		return nil
	}
	return []reading{{v.String(), true}}
}

// basePrefix is the base of a "0x", "0o" or "0b" prefix (any case) that s starts with, 0 for none.
func basePrefix(s string) int {
	if len(s) < 2 || s[0] != '0' {
		return 0
	}
	switch s[1] {
	case 'x', 'X':
		return 16
	case 'o', 'O':
		return 8
	case 'b', 'B':
		return 2
	}
	return 0
}

// allDigits reports whether s is one or more digits of base.
func allDigits(s string, base int) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if digitValue(s[i]) >= base {
			return false
		}
	}
	return true
}

// sign splits an optional leading "+" or "-" off s.
func sign(s string) (neg bool, rest string) {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		return s[0] == '-', s[1:]
	}
	return false, s
}

// decimalPrefix is the length of the decimal number at the start of s (digits with an optional
// fraction, or a fraction alone, then an optional exponent, as strtod reads them), and whether it has a
// fraction or an exponent.
func decimalPrefix(s string) (n int, isFloat bool) {
	digitsAt := func(i int) int {
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		return j - i
	}
	whole := digitsAt(0)
	n = whole
	if n < len(s) && s[n] == '.' {
		if frac := digitsAt(n + 1); whole > 0 || frac > 0 {
			n, isFloat = n+1+frac, true
		}
	}
	if n == 0 {
		return 0, false
	}
	if n < len(s) && (s[n] == 'e' || s[n] == 'E') {
		i := n + 1
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if exp := digitsAt(i); exp > 0 {
			n, isFloat = i+exp, true
		}
	}
	return n, isFloat
}

// floatKey is a float's value as a key: an integral value as its exact integer (as an integer
// reading writes it), any other as Go's shortest representation, infinities as "inf" and "-inf".
func floatKey(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case f == math.Trunc(f):
		v, _ := new(big.Float).SetFloat64(f).Int(nil)
		return v.String()
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digitValue is the value of a hex digit, 99 for anything else.
func digitValue(c byte) int {
	switch {
	case isDigit(c):
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

// jsSpace is JavaScript's WhiteSpace and LineTerminator (ECMA-262): what parseInt and Number trim.
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', '\u2028', '\u2029', '\ufeff':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}
