// Package money parses and formats amounts of money. Amounts travel as decimal strings with at most two
// places ("123.45") and are held as integer cents: floats never touch money.
package money

import (
	"errors"
	"strconv"
)

// MaxCents bounds parsed amounts (just under 10^12 currency units) so that sums of many amounts stay far
// from int64 overflow and nobody can write a 40-digit bid.
const MaxCents = 99_999_999_999_999

// ErrInvalid is returned for any text that is not a non-negative decimal with at most two places.
var ErrInvalid = errors.New("not a decimal amount with at most 2 decimal places")

// Parse reads "123", "123.4" or "123.45" as integer cents. Signs, exponents, spaces, thousands
// separators, empty parts ("1.", ".5") and more than two decimals are refused.
func Parse(s string) (int64, error) {
	whole, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			whole, frac = s[:i], s[i+1:]
			if frac == "" || len(frac) > 2 {
				return 0, ErrInvalid
			}
			break
		}
	}
	if whole == "" || len(whole) > 12 || !digits(whole) || !digits(frac) {
		return 0, ErrInvalid
	}
	units, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, ErrInvalid
	}
	cents := units * 100
	switch len(frac) {
	case 1:
		cents += int64(frac[0]-'0') * 10
	case 2:
		cents += int64(frac[0]-'0')*10 + int64(frac[1]-'0')
	}
	if cents > MaxCents {
		return 0, ErrInvalid
	}
	return cents, nil
}

// Format writes cents as a decimal string with exactly two places: 12345 -> "123.45".
func Format(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	frac := cents % 100
	s := sign + strconv.FormatInt(cents/100, 10) + "."
	if frac < 10 {
		s += "0"
	}
	return s + strconv.FormatInt(frac, 10)
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
