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
		if !integer.MatchString(string(x)) {
			return bad("%s is the number %s: write an integer or a string", name, fields.Clip(string(x)))
		}
		return string(x), true, nil
	case bool:
		return strconv.FormatBool(x), true, nil
	}
	return bad("%s is an object or a list, not a value", name)
}

// integer is a JSON or GraphQL integer as every server reads it the same way.
var integer = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// value follows rest into v: a scalar is a string (its text) or a json.Number (an Int or Float literal,
// or a variable's number); objects and lists are followed by rest.
func (m *Match) value(v *ast.Value, rest []string) (any, bool, error) {
	switch v.Kind {
	case ast.Variable:
		def := m.op.VariableDefinitions.ForName(v.Raw)
		if def == nil {
			return nil, false, fmt.Errorf("variable $%s is not declared by the operation", fields.Clip(v.Raw))
		}
		if given, ok := m.vars[v.Raw]; ok {
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
			if c.Name == rest[0] {
				child, n = c.Value, n+1
			}
		}
		if n > 1 {
			return nil, false, fmt.Errorf("input field %s given %d times", fields.Clip(rest[0]), n)
		}
		if n == 0 {
			return nil, false, nil
		}
		return m.value(child, rest[1:])
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

// walkJSON follows rest into a variable's JSON value. Keys are matched exactly, as GraphQL input
// coercion does (fields.ParseJSON refused keys given twice in any letter case).
func walkJSON(v any, rest []string) (any, bool, error) {
	for _, step := range rest {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[step]
			if !ok {
				return nil, false, nil
			}
			v = next
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false, nil
			}
			v = node[i]
		default:
			return nil, false, nil
		}
	}
	if v == nil {
		return nil, false, nil
	}
	return v, true, nil
}
