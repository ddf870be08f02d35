package fields

import (
	"errors"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/edgeq/edgeq/internal/web"
)

// Identity normalises a user identity before it is pseudonymised (docs/reference.md "Stock admission"),
// so that one shopper cannot appear as several to edgeq while the shop sees one account: "dave",
// "Dave", "%64ave" in a cookie and " dave" are one user. The value is percent-decoded where the usual
// frameworks decode it (kind "cookie": PHP, Rack and Express decode cookie values; query and form
// values arrive decoded by parsing; headers, JSON and the queue request id are taken as they are),
// trimmed, put in Unicode NFC and case-folded. An empty result is 400 INVALID_REQUEST (field "user").
//
// Normalising can only merge identities, never split one: two spellings the shop tells apart (which
// it would only do with a case-sensitive user name) count as one for per_user_limit and SELF_BID,
// the safe direction.
func Identity(raw, kind string) (string, *web.Error) {
	v := raw
	if kind == "cookie" {
		v = Unescape(v)
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return "", errEmptyIdentity
	}
	if ascii(v) {
		// ASCII is already NFC, and folding it is lower-casing (no allocation without capitals).
		return strings.ToLower(v), nil
	}
	// Canonical caseless matching (Unicode 3.13): normalise, fold, normalise again (folding can
	// leave a string that is not in NFC).
	v = norm.NFC.String(cherokeeCapitals(cases.Fold().String(norm.NFC.String(v))))
	if strings.TrimSpace(v) == "" {
		return "", errEmptyIdentity
	}
	return v, nil
}

// cherokeeCapitals maps Cherokee small letters to their capitals, as Unicode's case folding does
// (CaseFolding.txt folds Cherokee to the capitals, encoded first, for stability). x/text's Fold maps
// the capitals to the small letters and the small letters back, so folding alone is not idempotent
// there (FuzzIdentity: "Ꮜ" gave "ꮜ", which gave "Ꮜ"); after this step it is. Every other byte stays
// as it was, bytes that are not UTF-8 too, as normalising and folding leave them: rewritten here as
// U+FFFD, they would make the result depend on whether a Cherokee letter stood beside them
// (FuzzIdentity: "\xeaꮮ" gave "\xeaᏞ", which gave "\uFFFDᏞ").
func cherokeeCapitals(s string) string {
	if !strings.ContainsFunc(s, isCherokeeSmall) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r >= 0xAB70 && r <= 0xABBF: // CHEROKEE SMALL LETTER A .. YA -> U+13A0 .. U+13EF
			b.WriteRune(r - 0xAB70 + 0x13A0)
		case r >= 0x13F8 && r <= 0x13FD: // CHEROKEE SMALL LETTER YE .. MV -> U+13F0 .. U+13F5
			b.WriteRune(r - 8)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isCherokeeSmall(r rune) bool { return r >= 0xAB70 && r <= 0xABBF || r >= 0x13F8 && r <= 0x13FD }

var errEmptyIdentity = web.ErrInvalidRequest.With("field", "user").Because(errors.New("the user identity is empty once normalised"))

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
