// Package idmatch tells which guarded product or auction a request's id may stand for at the shop
// (routes[].admission.id_match; docs/reference.md "Other spellings of a guarded id"). A shop reads the
// id a request names with its own comparison: a case-insensitive SQL collation finds "SNEAKER-A" for
// sneaker-a, PHP's intval, Ruby's to_i and JavaScript's parseInt find product 42 for "042" and "42abc".
// An id the store does not know as spelled must therefore not pass as unknown when such a reading makes
// it a guarded one: it is admitted as that id, when the route's rule (how the operator says the shop
// compares) makes the two one id, or refused.
//
// Guarded ids are indexed under their keys (GuardedKeys); a request's id is looked up under its own
// (Rule.Keys): the two share a key exactly when some common reading takes the request's id for the
// guarded one. Resolve then decides. Ids reach this package after the id syntax (config.ID: ASCII
// letters, digits, "_" and "-"). Spaces, "+" and "." never arrive, though the number readings handle
// them as the languages do. Nor do full-width digits and accented letters, which accent-insensitive
// collations read as their ASCII letters ("４２" is "42" to utf8mb4_0900_ai_ci) and the text key does
// not fold: the id syntax must stay ASCII (FuzzIDMatch checks the two together).
package idmatch

import (
	"fmt"
	"slices"
	"strings"
)

// Rule is how a shop compares a route's product or auction ids (admission.id_match).
type Rule string

// The values of admission.id_match.
const (
	// Exact: the shop compares ids as they are (PostgreSQL's default collation, a Go or Node map).
	Exact Rule = "exact"
	// CaseInsensitive: ASCII letter case and trailing spaces do not matter (MySQL's default
	// collations, SQL Server's, SQLite's NOCASE, PostgreSQL's citext).
	CaseInsensitive Rule = "case_insensitive"
	// Numeric: the shop reads an id as the integer it starts with (PHP intval and (int), Ruby to_i,
	// JavaScript parseInt, an integer column compared with a string).
	Numeric Rule = "numeric"
)

// Rules are the values of admission.id_match, the default first.
var Rules = []string{string(Exact), string(CaseInsensitive), string(Numeric)}

// Parse reads an admission.id_match value; "" is the default, exact.
func Parse(text string) (Rule, error) {
	if text == "" {
		return Exact, nil
	}
	if !slices.Contains(Rules, text) {
		return "", fmt.Errorf("id_match %q is not one of %s", text, strings.Join(Rules, ", "))
	}
	return Rule(text), nil
}

// Form is id as the rule compares ids: two ids with one form are one product (or auction) to the
// shop. Under Numeric an id that starts with an integer on which every integer reading agrees is that
// integer ("042", "42abc": 42); any other id is compared as it is.
func (r Rule) Form(id string) string {
	switch r {
	case CaseInsensitive:
		return lowerASCII(strings.TrimRight(id, " "))
	case Numeric:
		if n := integerForm(id); n != "" {
			return n
		}
	}
	return id
}

// GuardedKeys are the keys a guarded id is indexed under: its text as a case-insensitive collation
// compares it, every number a reading takes the whole id for (a shop that reads ids as numbers keeps
// numbers: "42", "042", "4e1", "0x2A"), and its integer form (Rule.Form under Numeric).
func GuardedKeys(id string) []string {
	keys := []string{textKey(id)}
	for _, rd := range readings(id) {
		if rd.whole {
			keys = append(keys, numberKey(rd.value))
		}
	}
	if n := integerForm(id); n != "" {
		keys = append(keys, formKey(n))
	}
	return dedupe(keys)
}

// Keys are the keys to look a request's id up under: its text as a case-insensitive collation
// compares it, every number a reading takes it for (from its start: "42abc" is 42 to intval, and an
// id without a number is 0 to PHP, Ruby and MySQL) and, under Numeric, its integer form. A guarded id
// found under one of them is one that a common reading, or the route's rule, makes the same id.
func (r Rule) Keys(id string) []string {
	keys := []string{textKey(id)}
	for _, rd := range readings(id) {
		keys = append(keys, numberKey(rd.value))
	}
	if r == Numeric {
		if n := integerForm(id); n != "" {
			keys = append(keys, formKey(n))
		}
	}
	return dedupe(keys)
}

// Resolve decides a request's id that the store does not know as spelled, given the guarded ids
// found under its keys (at least one): it is admitted as the guarded id when that is the only one
// and the rule makes the two one id; otherwise (another reading than the rule's, or several guarded
// ids) the shop might sell a guarded id without admission, and the request is refused (ok false).
func (r Rule) Resolve(id string, near []string) (as string, ok bool) {
	if len(near) != 1 || r.Form(near[0]) != r.Form(id) {
		return "", false
	}
	return near[0], true
}

// Near returns the ids of guarded, other than id itself, that share a key with id under the rule:
// what an index of guarded (GuardedKeys) answers for Keys(id). For checks without a store.
func (r Rule) Near(id string, guarded []string) []string {
	want := r.Keys(id)
	var near []string
	for _, g := range guarded {
		if g != id && slices.ContainsFunc(GuardedKeys(g), func(k string) bool { return slices.Contains(want, k) }) {
			near = append(near, g)
		}
	}
	return near
}

// Key namespaces: text (collation), number (a reading's value), form (Numeric's integer form).
func textKey(id string) string   { return "t:" + lowerASCII(strings.Trim(id, space)) }
func numberKey(v string) string  { return "v:" + v }
func formKey(n string) string    { return "n:" + n }
func lowerASCII(s string) string { return strings.Map(lowerByte, s) }

func lowerByte(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

func dedupe(keys []string) []string {
	slices.Sort(keys)
	return slices.Compact(keys)
}

// space is what PHP, Ruby and MySQL skip before a number (C isspace).
const space = " \t\n\v\f\r"
