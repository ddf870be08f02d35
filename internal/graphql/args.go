package graphql

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

// Argument reads an argument of the matched field as the server will execute it: path is the
// argument's name, then input-object field names (or list indexes) into its value. The value may be
// written inline, come from a variable of any name, or from the variable's default. found is false
// when the argument is absent or null. Anything the server could read differently is refused (400
// INVALID_REQUEST naming the argument): a name given twice, a variable the operation does not declare,
// a number with a fraction or exponent (an ID or Int that JavaScript servers would read as another
// spelling), an object or list where a value was expected.
func (m *Match) Argument(path []string) (value string, found bool, e *web.Error) {
	name := strings.Join(path, ".")
	bad := func(format string, args ...any) (string, bool, *web.Error) {
		return "", false, web.ErrInvalidRequest.With("field", fields.Clip(name)).Because(fmt.Errorf(format, args...))
	}
	var arg *ast.Value
	n := 0
	for _, a := range m.field.Arguments {
		if a.Name == path[0] {
			arg, n = a.Value, n+1
		}
	}
	switch {
	case n > 1:
		return "", false, web.ErrAmbiguousField.With("field", fields.Clip(name)).Because(fmt.Errorf("argument %s given %d times", path[0], n))
	case n == 0:
		return "", false, nil
	}
	v, found, err := m.value(arg, path[1:])
	if err != nil {
		return bad("%s: %v", name, err)
	}
	if !found {
		return "", false, nil
	}
	switch x := v.(type) {
	case string:
		return x, true, nil
	case json.Number:
		if !exactInteger(string(x)) {
			return bad("%s is the number %s: write an integer JavaScript holds exactly, or a string", name, fields.Clip(string(x)))
		}
		return string(x), true, nil
	case bool:
		return strconv.FormatBool(x), true, nil
	}
	return bad("%s is an object or a list, not a value", name)
}

// exactInteger reports whether a JSON or GraphQL number is an integer every server reads the same way:
// no fraction or exponent, no "-0", and below 2^53 in magnitude (a JavaScript server holds a JSON
// number as a float64: 9007199254740993 becomes the ID "9007199254740992").
func exactInteger(s string) bool {
	if !integer.MatchString(s) {
		return false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > -(1<<53) && n < 1<<53
}

var integer = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)

// value follows rest into v: a scalar is a string (its text) or a json.Number (an Int or Float literal,
// or a variable's number); objects and lists are followed by rest.
func (m *Match) value(v *ast.Value, rest []string) (any, bool, error) {
	switch v.Kind {
	case ast.Variable:
		def := m.op.VariableDefinitions.ForName(v.Raw)
		if def == nil {
			return nil, false, fmt.Errorf("variable $%s is not declared by the operation", fields.Clip(v.Raw))
		}
		if given, ok := fields.Member(m.vars, v.Raw); ok {
			return walkJSON(given, rest)
		}
		if def.DefaultValue != nil {
			return m.value(def.DefaultValue, rest)
		}
		return nil, false, nil
	case ast.NullValue:
		return nil, false, nil
	case ast.ObjectValue:
		if len(rest) == 0 {
			return v, true, nil
		}
		var child *ast.Value
		n := 0
		for _, c := range v.Children {
			if c.Name == rest[0] { //nolint:gosec // rest is not empty: len(rest) == 0 returned above
				child, n = c.Value, n+1
			}
		}
		if n > 1 {
			//nolint:gosec // rest is not empty: len(rest) == 0 returned above
			return nil, false, fmt.Errorf("input field %s given %d times", fields.Clip(rest[0]), n)
		}
		if n == 0 {
			return nil, false, nil
		}
		return m.value(child, rest[1:]) //nolint:gosec // rest is not empty: len(rest) == 0 returned above
	case ast.ListValue:
		if len(rest) == 0 {
			return v, true, nil
		}
		i, err := strconv.Atoi(rest[0])
		if err != nil || i < 0 || i >= len(v.Children) {
			return nil, false, nil
		}
		return m.value(v.Children[i].Value, rest[1:])
	case ast.IntValue, ast.FloatValue:
		if len(rest) > 0 {
			return nil, false, nil
		}
		return json.Number(v.Raw), true, nil
	default: // strings, block strings, booleans, enum values: their text
		if len(rest) > 0 {
			return nil, false, nil
		}
		return v.Raw, true, nil
	}
}

// walkJSON follows rest into a variable's JSON value (checked by fields.ValidJSON, walked where it
// lies) and decodes what it finds: a string, a json.Number, a bool, or, for an object or a list, its
// bytes. Keys are matched exactly, as GraphQL input coercion does (fields.ValidJSON refused keys given
// twice in any letter case).
func walkJSON(v []byte, rest []string) (any, bool, error) {
	for _, step := range rest {
		var next []byte
		var ok bool
		switch v[0] {
		case '{':
			next, ok = fields.Member(v, step)
		case '[':
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 {
				return nil, false, nil
			}
			fields.Elements(v, func(elem []byte) bool {
				if i == 0 {
					next, ok = elem, true
				}
				i--
				return i >= 0
			})
		}
		if !ok {
			return nil, false, nil
		}
		v = next
	}
	switch v[0] {
	case 'n':
		return nil, false, nil
	case 't', 'f':
		return v[0] == 't', true, nil
	case '"':
		return fields.String(v), true, nil
	case '{', '[':
		return v, true, nil
	}
	return json.Number(v), true, nil
}
