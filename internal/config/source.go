package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// FieldSource says where in a request an admission field is read: "path:product" (a wildcard of the
// route pattern), "query:id", "form:amount", "json:items.0.sku" (a dotted path; numbers index arrays),
// "header:X-User", "cookie:session" or, on a graphql: route, "graphql:productVariantId" (an argument of
// the matched field; a dotted path into an input object: "graphql:input.sku").
type FieldSource struct {
	Kind string // path, query, form, json, header, cookie, graphql
	Name string // wildcard, parameter, field, header or cookie name; a dotted path for json and graphql
}

func (s FieldSource) String() string { return s.Kind + ":" + s.Name }

// JSONPath splits the dotted path of a json or graphql source into its steps.
func (s FieldSource) JSONPath() []string { return strings.Split(s.Name, ".") }

var (
	sourceKinds = map[string]bool{"path": true, "query": true, "form": true, "json": true, "header": true, "cookie": true, "graphql": true}
	// RFC 9110 token characters, which covers header and cookie names and sensible form/query keys.
	tokenName    = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
	wildcardName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// GraphQLName is a GraphQL name (spec section 2.1.9): field, argument and input field names.
	GraphQLName = regexp.MustCompile(`^[_A-Za-z][_0-9A-Za-z]{0,127}$`)
	// answerStep is one step of an answer: path: a JSON key, an array index, or $field.
	answerStep = regexp.MustCompile(`^[^.]{1,128}$`)
	jsonStep   = regexp.MustCompile(`^[^.]{1,128}$`)
)

// ParseFieldSource parses the "kind:name" syntax of admission field sources.
func ParseFieldSource(text string) (FieldSource, error) {
	kind, name, ok := strings.Cut(text, ":")
	if !ok || !sourceKinds[kind] {
		return FieldSource{}, fmt.Errorf("%q is not a field source (use path:, query:, form:, json:, header:, cookie: or graphql: followed by a name)", text)
	}
	src := FieldSource{Kind: kind, Name: name}
	switch kind {
	case "path":
		if !wildcardName.MatchString(name) {
			return src, fmt.Errorf("%q: path wildcard name must be a Go identifier", text)
		}
	case "graphql":
		for _, step := range strings.Split(name, ".") {
			if !GraphQLName.MatchString(step) {
				return src, fmt.Errorf("%q: a graphql source is an argument name, or a dotted path of names into an input object", text)
			}
		}
	case "json":
		if len(name) > 512 {
			return src, fmt.Errorf("%q: json path is too long", text)
		}
		for _, step := range strings.Split(name, ".") {
			if !jsonStep.MatchString(step) {
				return src, fmt.Errorf("%q: json path has an empty or too long step", text)
			}
		}
	default:
		if !tokenName.MatchString(name) {
			return src, fmt.Errorf("%q: %s name must be 1-128 token characters", text, kind)
		}
	}
	return src, nil
}

// UserSource says how an admission identifies the user: "token" (the queue request id of the access
// token: one place in line), "visitor" (the browser's signed visitor id: one browser, whatever its
// places in line), or a field of the request ("cookie:NAME", "header:NAME", ...).
type UserSource struct {
	FromToken   bool
	FromVisitor bool
	Field       FieldSource // when neither: the field the user is read from
}

// The user sources that are not fields of the request (routes[].admission.user).
const (
	UserToken   = "token"
	UserVisitor = "visitor"
)

// ParseUserSource parses the syntax of routes[].admission.user.
func ParseUserSource(text string) (UserSource, error) {
	switch text {
	case UserToken:
		return UserSource{FromToken: true}, nil
	case UserVisitor:
		return UserSource{FromVisitor: true}, nil
	}
	src, err := ParseFieldSource(text)
	if err != nil || src.Kind == "path" {
		return UserSource{}, fmt.Errorf("%q: user must be token, visitor, cookie:NAME, header:NAME, json:PATH, form:NAME or query:NAME", text)
	}
	return UserSource{Field: src}, nil
}

// UsesVisitor reports whether a route identifies its buyers or bidders by visitor id: edgeq then gives
// every browser one (docs/reference.md "Visitor ids").
func (r Route) UsesVisitor() bool { return r.Admission.Type != "" && r.Admission.User == UserVisitor }

// ReleaseOutcome is one entry of routes[].admission.release_on (and of complete_on): a status class
// ("5xx"), an exact status ("503"), "error" (the shop never received the whole request: a failed dial,
// a refused connection, a write that failed), "timeout" (no complete answer after the whole request was
// sent: the shop may have acted on it), "answer:PATH" (the shop's JSON answer has a value at PATH) or
// "answer:!PATH" (it is JSON and has none there: absent or null): web.Outcome.Matches.
type ReleaseOutcome struct {
	Class   int // 1..5 for "1xx".."5xx", else 0
	Status  int // exact status, else 0
	Error   bool
	Timeout bool
	// Answer is the path of an answer: outcome (object keys, array indexes, "$field" for the matched
	// GraphQL field's response key), nil for the others.
	Answer []string
	// Absent: the answer:!PATH form, met when the answer has no value at Answer.
	Absent bool
}

// ParseReleaseOutcome parses one release_on entry.
func ParseReleaseOutcome(text string) (ReleaseOutcome, error) {
	switch text {
	case "error":
		return ReleaseOutcome{Error: true}, nil
	case "timeout":
		return ReleaseOutcome{Timeout: true}, nil
	}
	if path, ok := strings.CutPrefix(text, "answer:"); ok {
		path, absent := strings.CutPrefix(path, "!")
		steps := strings.Split(path, ".")
		if len(path) > 512 || slices.ContainsFunc(steps, func(s string) bool { return !answerStep.MatchString(s) }) {
			return ReleaseOutcome{}, fmt.Errorf("%q: answer: is followed by a dotted path into the shop's JSON answer, or by ! and one for its absence (answer:errors, answer:data.$field.errorCode, answer:!data.$field)", text)
		}
		return ReleaseOutcome{Answer: steps, Absent: absent}, nil
	}
	if len(text) == 3 && text[1:] == "xx" && text[0] >= '1' && text[0] <= '5' {
		return ReleaseOutcome{Class: int(text[0] - '0')}, nil
	}
	if code, err := strconv.Atoi(text); err == nil && len(text) == 3 && code >= 100 && code <= 599 {
		return ReleaseOutcome{Status: code}, nil
	}
	return ReleaseOutcome{}, fmt.Errorf("%q: use a status class (5xx), a status code (503), error, timeout, answer:PATH or answer:!PATH", text)
}

// Failure is how a forwarded request failed to get an answer.
type Failure int

const (
	// Answered: the shop answered (a status).
	Answered Failure = iota
	// NotSent: the shop never received the whole request ("error").
	NotSent
	// NoAnswer: the whole request was sent and no complete answer came ("timeout"): the shop may
	// have acted on it.
	NoAnswer
)

// Matches reports whether an origin outcome (a status, or how it failed) is this one. An answer:
// outcome needs the answer itself: web.Outcome.Matches reads it; here it is false.
func (o ReleaseOutcome) Matches(status int, failure Failure) bool {
	switch {
	case o.Answer != nil:
		return false
	case o.Error:
		return failure == NotSent
	case o.Timeout:
		return failure == NoAnswer
	case failure != Answered:
		return false
	case o.Class != 0:
		return status/100 == o.Class
	default:
		return status == o.Status
	}
}
