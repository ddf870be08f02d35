package config

import (
	"maps"
	"reflect"
	"strings"
)

// hotKeys are the top-level and nested keys a reload applies without a restart (docs/reference.md
// "Configuration").
// Registered sections say for themselves (SectionSpec.Hot).
var hotKeys = []string{"origins", "queues", "routes", "log.level"}

// RestartKeys lists the keys whose values differ between old and next but only take effect after a
// restart (listeners, store, keys, ...). A reload applies the rest and logs these as ignored.
func RestartKeys(old, next *Config) []string {
	var changed []string
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem()
	for _, key := range leafKeys(ov.Type(), "") {
		if isHot(key) {
			continue
		}
		if !reflect.DeepEqual(fieldAt(ov, key).Interface(), fieldAt(nv, key).Interface()) {
			changed = append(changed, key)
		}
	}
	for name, settings := range old.Challenge.Settings {
		if !reflect.DeepEqual(settings, next.Challenge.Settings[name]) {
			changed = append(changed, "challenge."+name)
		}
	}
	for _, s := range sectionSpecs() {
		if !s.Hot && !reflect.DeepEqual(old.Sections[s.Name], next.Sections[s.Name]) {
			changed = append(changed, s.Name)
		}
	}
	return changed
}

func isHot(key string) bool {
	for _, h := range hotKeys {
		if key == h || strings.HasPrefix(key, h+".") {
			return true
		}
	}
	return false
}

func fieldAt(v reflect.Value, key string) reflect.Value {
	for part := range strings.SplitSeq(key, ".") {
		v = v.Field(fieldsByKey(v.Type())[part])
	}
	return v
}

// WithHot returns a copy of running with the hot-reloadable keys taken from next: what a reload puts in
// force. Keys that need a restart keep their running values, so every reader of the configuration sees
// what is actually in effect.
func WithHot(running, next *Config) *Config {
	out := *running
	ov, nv := reflect.ValueOf(&out).Elem(), reflect.ValueOf(next).Elem()
	for _, key := range hotKeys {
		fieldAt(ov, key).Set(fieldAt(nv, key))
	}
	out.Sections = maps.Clone(running.Sections)
	for _, s := range sectionSpecs() {
		if v, ok := next.Sections[s.Name]; s.Hot && ok {
			if out.Sections == nil {
				out.Sections = map[string]Section{}
			}
			out.Sections[s.Name] = v
		}
	}
	return &out
}
