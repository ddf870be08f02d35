package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a configuration, named by its field path ("routes[2].match").
type Problem struct {
	Path   string
	Reason string
}

func (p Problem) Error() string {
	if p.Path == "" {
		return p.Reason
	}
	return p.Path + ": " + p.Reason
}

// defaulter is implemented by list elements whose fields have defaults. Viper only layers defaults over
// maps, so list elements get theirs here, before their own keys are decoded over them.
type defaulter interface{ applyDefaults() }

// ItemDefaulter is implemented by the items of a registered section's list whose fields have
// defaults: Defaults sets them, before the item's own keys are decoded over them.
type ItemDefaulter interface{ Defaults() }

var (
	durationType = reflect.TypeFor[time.Duration]()
	timeType     = reflect.TypeFor[time.Time]()
)

// decoder copies the generic tree viper produces (maps, lists, scalars from YAML or strings from the
// environment) into the typed Config. It is written out rather than left to mapstructure so that every
// unknown key and every wrongly typed value becomes a Problem with its full field path, and so that all
// of them are reported at once. A value that cannot be decoded leaves the field at its default.
type decoder struct {
	problems []Problem
}

func (d *decoder) fail(path, format string, args ...any) {
	d.problems = append(d.problems, Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
}

func (d *decoder) decode(path string, in any, out reflect.Value) {
	if in == nil {
		return // "key:" with no value keeps the default
	}
	switch out.Type() {
	case durationType:
		d.decodeDuration(path, in, out)
		return
	case timeType:
		d.decodeTime(path, in, out)
		return
	case byteSizeType:
		d.decodeByteSize(path, in, out)
		return
	case challengeType:
		d.decodeChallenge(path, in, out)
		return
	}
	switch out.Kind() {
	case reflect.Struct:
		d.decodeStruct(path, in, out)
	case reflect.Slice:
		d.decodeSlice(path, in, out)
	case reflect.String:
		switch v := in.(type) {
		case string:
			out.SetString(v)
		case int, int64, uint64, float64:
			// `id: 1` is a natural way to write an id; keep its text.
			out.SetString(fmt.Sprint(v))
		default:
			d.fail(path, "must be a string, not %s", describe(in))
		}
	case reflect.Int, reflect.Int64:
		n, ok := toInt(in)
		if !ok {
			d.fail(path, "must be an integer, not %s", describe(in))
			return
		}
		out.SetInt(n)
	case reflect.Float64:
		f, ok := toFloat(in)
		if !ok {
			d.fail(path, "must be a number, not %s", describe(in))
			return
		}
		out.SetFloat(f)
	case reflect.Map:
		d.decodeStringMap(path, in, out)
	case reflect.Bool:
		switch v := in.(type) {
		case bool:
			out.SetBool(v)
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				d.fail(path, "must be true or false, not %q", v)
				return
			}
			out.SetBool(b)
		default:
			d.fail(path, "must be true or false, not %s", describe(in))
		}
	default:
		// Only reachable if a field of an unsupported kind is added to Config.
		panic(fmt.Sprintf("config: field %s has unsupported kind %s", path, out.Kind()))
	}
}

func (d *decoder) decodeStruct(path string, in any, out reflect.Value) {
	m, ok := in.(map[string]any)
	if !ok {
		d.fail(path, "must be a mapping of keys, not %s", describe(in))
		return
	}
	fields := fieldsByKey(out.Type())
	for key, value := range m {
		index, known := fields[strings.ToLower(key)]
		if !known && out.Type() == admissionType && ownField(strings.ToLower(key)) {
			d.decodeOwn(join(path, key), strings.ToLower(key), value, out.Addr().Interface().(*Admission))
			continue
		}
		if !known {
			d.fail(join(path, key), "unknown key")
			continue
		}
		d.decode(join(path, key), value, out.Field(index))
	}
}

// decodeOwn decodes a route field a registered kind reads (AdmissionKind.Fields) into a.Own.
func (d *decoder) decodeOwn(path, key string, in any, a *Admission) {
	var value string
	d.decode(path, in, reflect.ValueOf(&value).Elem())
	if a.Own == nil {
		a.Own = map[string]string{}
	}
	a.Own[key] = value
}

func (d *decoder) decodeSlice(path string, in any, out reflect.Value) {
	if s, isString := in.(string); isString {
		// Environment variables carry lists as text: "a,b" for lists of strings, YAML (or JSON) for
		// lists of mappings, e.g. EDGEQ_QUEUES='[{id: drop, capacity: 50}]'.
		parsed, err := parseListText(s, out.Type().Elem().Kind() == reflect.String)
		if err != nil {
			d.fail(path, "%v", err)
			return
		}
		in = parsed
	}
	list, ok := in.([]any)
	if !ok {
		d.fail(path, "must be a list, not %s", describe(in))
		return
	}
	result := reflect.MakeSlice(out.Type(), len(list), len(list))
	for i, item := range list {
		elem := result.Index(i)
		switch def := elem.Addr().Interface().(type) {
		case defaulter:
			def.applyDefaults()
		case ItemDefaulter:
			def.Defaults()
		}
		d.decode(fmt.Sprintf("%s[%d]", path, i), item, elem)
	}
	out.Set(result)
}

// decodeStringMap decodes a mapping of names to strings (tracing.headers). Keys keep the case viper
// gives them: lower case. From the environment it is text: "name=value,name=value", or a YAML (or
// JSON) mapping. A value is never repeated in a problem: these maps hold credentials.
func (d *decoder) decodeStringMap(path string, in any, out reflect.Value) {
	if s, isString := in.(string); isString {
		parsed, err := parseMapText(s)
		if err != nil {
			d.fail(path, "%v", err)
			return
		}
		in = parsed
	}
	m, ok := in.(map[string]any)
	if !ok {
		d.fail(path, "must be a mapping of names to text, not %s", kindOf(in))
		return
	}
	result := reflect.MakeMapWithSize(out.Type(), len(m))
	for k, v := range m {
		switch v := v.(type) {
		case string:
			result.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(v))
		case int, int64, uint64, float64, bool:
			result.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(fmt.Sprint(v)))
		default:
			d.fail(join(path, k), "must be text, not %s", kindOf(v))
		}
	}
	out.Set(result)
}

// kindOf describes a value without quoting it.
func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "text"
	}
	return "a value"
}

func parseMapText(s string) (map[string]any, error) {
	s = strings.TrimSpace(s)
	out := map[string]any{}
	if s == "" {
		return out, nil
	}
	if strings.HasPrefix(s, "{") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			return nil, fmt.Errorf("must be name=value pairs or a YAML (or JSON) mapping")
		}
		return normalize(m).(map[string]any), nil
	}
	for part := range strings.SplitSeq(s, ",") {
		name, value, found := strings.Cut(part, "=")
		if name = strings.TrimSpace(name); !found || name == "" {
			return nil, fmt.Errorf("must be name=value pairs separated by commas")
		}
		out[strings.ToLower(name)] = strings.TrimSpace(value)
	}
	return out, nil
}

func parseListText(s string, ofStrings bool) ([]any, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []any{}, nil
	}
	if ofStrings && !strings.HasPrefix(s, "[") {
		var list []any
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				list = append(list, part)
			}
		}
		return list, nil
	}
	var list []any
	if err := yaml.Unmarshal([]byte(s), &list); err != nil {
		return nil, fmt.Errorf("must be a YAML or JSON list: %v", err)
	}
	return normalize(list).([]any), nil
}

// normalize turns the map[any]any and map[string]any trees of a YAML decoder into map[string]any with
// lower-cased keys, as viper does for the file.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			out[strings.ToLower(k)] = normalize(val)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			out[strings.ToLower(fmt.Sprint(k))] = normalize(val)
		}
		return out
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
		return v
	default:
		return v
	}
}

func (d *decoder) decodeDuration(path string, in any, out reflect.Value) {
	switch v := in.(type) {
	case string:
		dur, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			d.fail(path, "invalid duration %q (use Go syntax such as 30s, 5m, 1h30m)", v)
			return
		}
		out.SetInt(int64(dur))
	case int, int64, uint64, float64:
		if n, ok := toInt(v); ok && n == 0 {
			out.SetInt(0)
			return
		}
		d.fail(path, "invalid duration %v: a unit is required (such as %vs)", v, v)
	default:
		d.fail(path, "must be a duration, not %s", describe(in))
	}
}

func (d *decoder) decodeTime(path string, in any, out reflect.Value) {
	switch v := in.(type) {
	case time.Time:
		out.Set(reflect.ValueOf(v))
	case string:
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
		if err != nil {
			d.fail(path, "invalid time %q (use RFC 3339 such as 2026-12-01T12:00:00Z)", v)
			return
		}
		out.Set(reflect.ValueOf(t))
	default:
		d.fail(path, "must be an RFC 3339 time, not %s", describe(in))
	}
}

func toInt(in any) (int64, bool) {
	switch v := in.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		if v > math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, false
		}
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func toFloat(in any) (float64, bool) {
	switch v := in.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

func describe(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return strconv.Quote(v)
	default:
		return fmt.Sprintf("%v", v)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldsByKey maps the yaml key of each field of t to its index.
func fieldsByKey(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if key := keyOf(t.Field(i)); key != "" {
			fields[key] = i
		}
	}
	return fields
}

func keyOf(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// leafKeys lists the dotted path of every key of t that is not inside a list: the keys an environment
// variable of its own can set. Lists (of strings or of mappings) are leaves too.
func leafKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		key := keyOf(f)
		if key == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != durationType && f.Type != timeType {
			keys = append(keys, leafKeys(f.Type, join(prefix, key))...)
			continue
		}
		keys = append(keys, join(prefix, key))
	}
	return keys
}
