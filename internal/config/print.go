package config

import (
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Masked is what Print shows instead of a secret that is set.
const Masked = "********"

// Print writes the effective configuration as YAML — defaults filled in, environment overrides applied,
// every key in the order of config.example.yaml — with secrets that are set shown as Masked. Durations
// and times are written the way the file takes them, so the output (secrets aside) loads as the same
// configuration.
func Print(cfg *Config, w io.Writer) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(withSections(node(reflect.ValueOf(cfg).Elem(), false), cfg)); err != nil {
		return err
	}
	return enc.Close()
}

// withSections puts the registered sections into m, the file's mapping, after routes:.
func withSections(m *yaml.Node, cfg *Config) *yaml.Node {
	var content []*yaml.Node
	for _, s := range sectionSpecs() {
		if v, ok := cfg.Sections[s.Name]; ok {
			content = append(content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s.Name}, node(reflect.ValueOf(v).Elem(), false))
		}
	}
	at := len(m.Content)
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].Value == "routes" {
			at = i + 2
		}
	}
	m.Content = slices.Insert(m.Content, at, content...)
	return m
}

func node(v reflect.Value, secret bool) *yaml.Node {
	scalar := func(tag, value string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
		if tag == "!!str" {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n
	}
	switch v.Type() {
	case durationType:
		return scalar("!!str", time.Duration(v.Int()).String())
	case byteSizeType:
		return scalar("!!str", ByteSize(v.Int()).String())
	case challengeType:
		// provider, then each provider's section by name.
		c := v.Interface().(Challenge)
		m := &yaml.Node{Kind: yaml.MappingNode}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "provider"}, scalar("!!str", c.Provider))
		names := make([]string, 0, len(c.Settings))
		for name := range c.Settings {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name},
				node(reflect.ValueOf(c.Settings[name]).Elem(), false))
		}
		return m
	case timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return scalar("!!str", "")
		}
		return scalar("!!str", t.Format(time.RFC3339))
	}
	switch v.Kind() {
	case reflect.Struct:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if f.IsExported() && opts == "inline" && f.Type.Kind() == reflect.Map {
				// The kinds' own route fields (Admission.Own), in key order, where the field stands.
				m.Content = append(m.Content, node(v.Field(i), false).Content...)
				continue
			}
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			key := scalar("!!str", name)
			key.Style = 0
			m.Content = append(m.Content, key, node(v.Field(i), f.Tag.Get("secret") == "true"))
		}
		return m
	case reflect.Slice:
		s := &yaml.Node{Kind: yaml.SequenceNode}
		if v.Type().Elem().Kind() != reflect.Struct {
			s.Style = yaml.FlowStyle
		}
		for i := 0; i < v.Len(); i++ {
			s.Content = append(s.Content, node(v.Index(i), secret))
		}
		return s
	case reflect.Map:
		// Keys in order, so that the output is the same every time; values of a secret map masked.
		m := &yaml.Node{Kind: yaml.MappingNode}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		if len(keys) == 0 {
			m.Style = yaml.FlowStyle
		}
		for _, k := range keys {
			key := scalar("!!str", k.String())
			key.Style = 0
			m.Content = append(m.Content, key, node(v.MapIndex(k), secret))
		}
		return m
	case reflect.String:
		if secret && v.String() != "" {
			return scalar("!!str", Masked)
		}
		return scalar("!!str", v.String())
	case reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return scalar("!!int", strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalar("!!int", strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := strconv.FormatFloat(v.Float(), 'g', -1, 64)
		if !strings.ContainsAny(f, ".eIN") {
			f += ".0" // read back as a number with a fraction, as it was written: 1.0, not 1
		}
		return scalar("!!float", f)
	}
	return scalar("!!str", v.String())
}
