package idmatch_test

import (
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/idmatch"
)

// What a request's id becomes under each rule, with products 42 and sneaker-a guarded (and others
// where a case needs them): the spellings seen at real shops, and each reading docs/reference.md
// "Other spellings of a guarded id" lists.
func TestRule_AnotherSpellingIsAdmittedAsTheGuardedIDOrRefused(t *testing.T) {
	const refused, passed = "refused", "passed"
	guarded := []string{"42", "sneaker-a"}
	for _, tc := range []struct {
		id      string
		guarded []string // nil: guarded
		exact   string   // the guarded id it is admitted as, refused or passed
		ci      string
		numeric string
	}{
		{id: "042", exact: refused, ci: refused, numeric: "42"},
		{id: "0042", exact: refused, ci: refused, numeric: "42"},
		{id: "42abc", exact: refused, ci: refused, numeric: "42"},
		{id: "42-blue", exact: refused, ci: refused, numeric: "42"},
		{id: "SNEAKER-A", exact: refused, ci: "sneaker-a", numeric: refused},
		{id: "Sneaker-A", exact: refused, ci: "sneaker-a", numeric: refused},
		{id: "jersey", exact: passed, ci: passed, numeric: passed},
		{id: "421", exact: passed, ci: passed, numeric: passed},
		{id: "4", exact: passed, ci: passed, numeric: passed},
		// Readings that disagree on the number are refused under every rule.
		{id: "0x2A", exact: refused, ci: refused, numeric: refused},                         // parseInt, Number: 42; intval: 0
		{id: "4_2", exact: refused, ci: refused, numeric: refused},                          // Ruby to_i: 42; intval: 4
		{id: "0d42", exact: refused, ci: refused, numeric: refused},                         // Ruby to_i: 42
		{id: "42e0", exact: refused, ci: refused, numeric: "42"},                            // every reading: 42
		{id: "4e1", guarded: []string{"40"}, exact: refused, ci: refused, numeric: refused}, // intval 40, to_i 4
		{id: "0b101010", exact: refused, ci: refused, numeric: refused},                     // Number: 42
		// An id without a number is 0 to PHP, Ruby and MySQL: refused when 0 is guarded.
		{id: "jersey", guarded: []string{"0"}, exact: refused, ci: refused, numeric: refused},
		{id: "-0", guarded: []string{"0"}, exact: refused, ci: refused, numeric: "0"},
		// Long ids: JavaScript's doubles and PHP's 64-bit cap.
		{id: "9007199254740993", guarded: []string{"9007199254740992"}, exact: refused, ci: refused, numeric: refused},
		{id: "99999999999999999999", guarded: []string{"9223372036854775807"}, exact: refused, ci: refused, numeric: refused},
		// Two guarded ids the shop may both read it as.
		{id: "SNEAKER-B", guarded: []string{"sneaker-b", "Sneaker-B"}, exact: refused, ci: refused, numeric: refused},
		// A guarded SKU that starts with a number is no number to a text column.
		{id: "1001", guarded: []string{"1001-blue"}, exact: passed, ci: passed, numeric: "1001-blue"},
	} {
		g := tc.guarded
		if g == nil {
			g = guarded
		}
		for rule, want := range map[idmatch.Rule]string{idmatch.Exact: tc.exact, idmatch.CaseInsensitive: tc.ci, idmatch.Numeric: tc.numeric} {
			got := passed
			if near := rule.Near(tc.id, g); len(near) > 0 {
				got = refused
				if as, ok := rule.Resolve(tc.id, near); ok {
					got = as
				}
			}
			if got != want {
				t.Errorf("%s %q with %v guarded: %s, want %s", rule, tc.id, g, got, want)
			}
		}
	}
}

func TestRule_Form(t *testing.T) {
	for _, tc := range []struct {
		rule     idmatch.Rule
		id, form string
	}{
		{idmatch.Exact, "Sneaker-A", "Sneaker-A"},
		{idmatch.CaseInsensitive, "Sneaker-A", "sneaker-a"},
		{idmatch.CaseInsensitive, "042", "042"},
		{idmatch.Numeric, "042", "#42"},
		{idmatch.Numeric, "42abc", "#42"},
		{idmatch.Numeric, "-0", "#0"},
		{idmatch.Numeric, "0x2A", "0x2A"},
		{idmatch.Numeric, "sneaker-a", "sneaker-a"},
	} {
		if got := tc.rule.Form(tc.id); got != tc.form {
			t.Errorf("%s form of %q: %q, want %q", tc.rule, tc.id, got, tc.form)
		}
	}
	if r, err := idmatch.Parse(""); r != idmatch.Exact || err != nil {
		t.Errorf(`Parse(""): %v %v`, r, err)
	}
	if _, err := idmatch.Parse("fuzzy"); err == nil {
		t.Error(`Parse("fuzzy") succeeded`)
	}
}

// FuzzIDMatch: an id the rule lets pass as unknown is not equal to any
// guarded id under any reading docs/reference.md "Other spellings of a guarded id" lists, written below
// as reference readings of their own: PHP's intval, Ruby's to_i, JavaScript's parseInt and Number,
// MySQL's comparison of a string with a number column, and MySQL's case- and accent-insensitive PAD
// SPACE collation (utf8mb4_0900_ai_ci, utf8mb4_general_ci). A guarded id counts under a number reading
// when that reading takes it whole (a shop that reads ids as numbers keeps numbers). An id admitted as
// another is that id under the rule's own comparison. Ids outside the id syntax (config.ID) never get
// here: they are refused 400.
func FuzzIDMatch(f *testing.F) {
	for _, seed := range [][4]string{
		{"042", "42", "sneaker-a", ""}, {"42abc", "42", "", ""}, {"SNEAKER-A", "sneaker-a", "42", ""},
		{"0x2A", "42", "", ""}, {"4e1", "40", "4", ""}, {"4_2", "42", "", ""}, {"0d42", "42", "", ""},
		{"jersey", "0", "", ""}, {"9007199254740993", "9007199254740992", "", ""},
		{"99999999999999999999", "9223372036854775807", "", ""}, {"1e999", "9223372036854775807", "0", ""},
		{"0o17", "15", "", ""}, {"0b101", "5", "", ""}, {"-0", "0", "", ""}, {"\uff14\uff12", "42", "", ""},
		{"\u00c9t\u00e9", "ete", "", ""}, {"Infinity", "infinity", "", ""}, {"1001", "1001-blue", "1001", ""},
		{"SNEAKER-B", "sneaker-b", "Sneaker-B", ""},
	} {
		for rule := range uint8(3) {
			f.Add(seed[0], seed[1], seed[2], seed[3], rule)
		}
	}
	f.Fuzz(func(t *testing.T, id, g1, g2, g3 string, ruleIndex uint8) {
		rule := idmatch.Rule(idmatch.Rules[int(ruleIndex)%len(idmatch.Rules)])
		var guarded []string
		for _, g := range []string{g1, g2, g3} {
			if config.ID.MatchString(g) && !slices.Contains(guarded, g) {
				guarded = append(guarded, g)
			}
		}
		// Every function reads any string without panicking.
		rule.Form(id)
		idmatch.GuardedKeys(id)
		if !config.ID.MatchString(id) || slices.Contains(guarded, id) {
			return // refused by the id syntax, or the store knows it as spelled
		}
		near := rule.Near(id, guarded)
		if len(near) == 0 {
			for _, g := range guarded {
				if how := sameUnderSomeReading(id, g); how != "" {
					t.Fatalf("%s: %q passes as unknown, but %s reads it as guarded %q", rule, id, how, g)
				}
				if rule.Form(id) == rule.Form(g) {
					t.Fatalf("%s: %q passes as unknown, but the rule makes it guarded %q", rule, id, g)
				}
			}
			return
		}
		as, ok := rule.Resolve(id, near)
		if !ok {
			return // refused 400
		}
		if !slices.Contains(guarded, as) {
			t.Fatalf("%s: %q admitted as %q, which is not guarded (%v)", rule, id, as, guarded)
		}
		switch rule {
		case idmatch.Exact:
			t.Fatalf("exact: %q admitted as %q", id, as)
		case idmatch.CaseInsensitive:
			if mysqlText(id) != mysqlText(as) {
				t.Fatalf("case_insensitive: %q admitted as %q, which MySQL's collation tells apart", id, as)
			}
		case idmatch.Numeric:
			if phpIntval(id) != phpIntval(as) || rubyToI(id).Cmp(rubyToI(as)) != 0 {
				t.Fatalf("numeric: %q admitted as %q: intval %d and %d, to_i %v and %v", id, as,
					phpIntval(id), phpIntval(as), rubyToI(id), rubyToI(as))
			}
		}
	})
}

// sameUnderSomeReading names a reading that makes id the guarded id g, "" if none does.
func sameUnderSomeReading(id, g string) string {
	if mysqlText(id) == mysqlText(g) {
		return "MySQL's utf8mb4_0900_ai_ci"
	}
	if phpWhole(g) && phpIntval(id) == phpIntval(g) {
		return "PHP's intval"
	}
	if rubyWhole(g) && rubyToI(id).Cmp(rubyToI(g)) == 0 {
		return "Ruby's to_i"
	}
	if a, ok := jsParseInt(id); ok {
		if b, ok := jsParseInt(g); ok && parseIntWhole(g) && a == b {
			return "JavaScript's parseInt"
		}
	}
	if a, ok := jsNumber(id); ok {
		if b, ok := jsNumber(g); ok && a == b {
			return "JavaScript's Number"
		}
	}
	if mysqlWhole(g) && mysqlNumber(id) == mysqlNumber(g) {
		return "MySQL's string-to-number comparison"
	}
	return ""
}

// The reference readings, written from each language's documentation.

// phpNumeric is PHP 8's leading-numeric string: whitespace, then an integer or float literal.
var phpNumeric = regexp.MustCompile(`^[ \t\n\r\v\f]*([+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?)`)

// phpIntval is intval($s) on 64 bits (PHP 8): the leading number, an integer as it is, a float (or
// an integer out of range, which PHP reads as a float) truncated towards zero and capped; a
// non-finite float is 0 (zend_dval_to_lval_cap); no number is 0.
func phpIntval(s string) int64 {
	m := phpNumeric.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	if m[3] == "" && m[4] == "" && !strings.HasPrefix(strings.TrimLeft(m[1], "+-"), ".") {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			return n
		}
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	switch {
	case math.IsInf(f, 0) || math.IsNaN(f):
		return 0
	case f >= 9223372036854775807:
		return math.MaxInt64
	case f < -9223372036854775808:
		return math.MinInt64
	}
	return int64(f)
}

// phpWhole: PHP's is_numeric (trailing whitespace allowed since PHP 8).
func phpWhole(s string) bool {
	m := phpNumeric.FindString(s)
	return m != "" && strings.TrimRight(s[len(m):], " \t\n\r\v\f") == ""
}

var rubyInteger = regexp.MustCompile(`^[ \t\n\v\f\r]*([+-]?)(0[dD])?([0-9]+(_[0-9]+)*)`)

// rubyToI is String#to_i: whitespace, a sign, an optional 0d, digits with single underscores between
// them, of any size; no number is 0.
func rubyToI(s string) *big.Int {
	m := rubyInteger.FindStringSubmatch(s)
	if m == nil {
		return big.NewInt(0)
	}
	n, _ := new(big.Int).SetString(strings.ReplaceAll(m[3], "_", ""), 10)
	if m[1] == "-" {
		n.Neg(n)
	}
	return n
}

func rubyWhole(s string) bool {
	m := rubyInteger.FindString(s)
	return m != "" && strings.TrimSpace(s[len(m):]) == ""
}

// jsWhiteSpace is ECMA-262's WhiteSpace and LineTerminator code points.
func jsWhiteSpace(r rune) bool {
	return strings.ContainsRune("\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff", r) || (r >= '\u2000' && r <= '\u200a')
}

var (
	jsHex     = regexp.MustCompile(`^[0-9a-fA-F]+`)
	jsDecimal = regexp.MustCompile(`^[0-9]+`)
)

// jsParseInt is parseInt(s) (ECMA-262 19.2.5): trim leading white space, a sign, "0x" selects 16,
// the longest run of digits; none is NaN (ok false).
func jsParseInt(s string) (float64, bool) {
	s = strings.TrimLeftFunc(s, jsWhiteSpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	var f float64
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		digits := jsHex.FindString(s[2:])
		if digits == "" {
			return 0, false
		}
		f, _ = strconv.ParseFloat("0x"+digits+"p0", 64)
	} else {
		digits := jsDecimal.FindString(s)
		if digits == "" {
			return 0, false
		}
		f, _ = strconv.ParseFloat(digits, 64)
	}
	if neg {
		f = -f
	}
	return f, true
}

func parseIntWhole(s string) bool {
	s = strings.TrimFunc(s, jsWhiteSpace)
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		return len(s) > 2 && jsHex.FindString(s[2:]) == s[2:]
	}
	return s != "" && jsDecimal.FindString(s) == s
}

var (
	jsDecimalLiteral = regexp.MustCompile(`^[+-]?(Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)$`)
	jsRadixLiteral   = regexp.MustCompile(`^0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)$`)
)

// jsNumber is Number(s) (ECMA-262 StringToNumber): the trimmed string is empty (0), a decimal literal,
// Infinity, or a 0x/0o/0b literal without a sign; anything else is NaN (ok false).
func jsNumber(s string) (float64, bool) {
	s = strings.TrimFunc(s, jsWhiteSpace)
	switch {
	case s == "":
		return 0, true
	case jsRadixLiteral.MatchString(s):
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[1]]
		n, _ := new(big.Int).SetString(s[2:], base)
		f, _ := new(big.Float).SetInt(n).Float64()
		return f, true
	case jsDecimalLiteral.MatchString(s):
		f, _ := strconv.ParseFloat(s, 64)
		return f, true
	}
	return 0, false
}

// mysqlNumber is a string compared with a number column: both as doubles, the string's leading number
// (MySQL's conversion reads as strtod does, without hex); no number is 0.
func mysqlNumber(s string) float64 {
	m := phpNumeric.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return f
}

func mysqlWhole(s string) bool { return phpWhole(s) }

// mysqlText is a string as utf8mb4_0900_ai_ci compares it under PAD SPACE (utf8mb4_general_ci):
// compatibility forms (full-width digits and letters) as their plain letters, accents ignored, case
// folded, trailing spaces ignored.
func mysqlText(s string) string {
	t := transform.Chain(norm.NFKD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	plain, _, _ := transform.String(t, s)
	return strings.TrimRight(cases.Fold().String(plain), " ")
}

// BenchmarkKeys is what looking an unknown id up costs edgeq's CPU, besides the store's one HMGET: the
// keys of a plain id, of a numeric one, and of a long one.
func BenchmarkKeys(b *testing.B) {
	for _, id := range []string{"jersey", "042", "99999999999999999999abc"} {
		b.Run(id, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				idmatch.Numeric.Keys(id)
			}
		})
	}
}
