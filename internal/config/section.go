package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// Section is a top-level part of the file that a package owns and registers with RegisterSection: an
// admission kind's list of owners (products:, auctions:) or its settings (auctions_source:). It is a
// pointer to a struct, or to a slice of structs, whose yaml tags name its keys; it is decoded (a
// list's items over their Defaults), overridden from the environment, printed and reloaded like the
// rest of the file.
type Section interface {
	// Check adds what is wrong with the section to c, paths from the file's root; cfg is the whole
	// file, for what the section refers to or is referred to by (routes, queues).
	Check(c Checker, cfg *Config)
}

// SectionSpec registers a section.
type SectionSpec struct {
	// Name is the section's top-level key.
	Name string
	// Order places it among the sections, which follow routes: when printed (lowest first).
	Order int
	// Hot sections are applied by a reload; the others need a restart.
	Hot bool
	// New returns the section at its defaults.
	New func() Section
}

var (
	sectionMu sync.RWMutex
	specs     []SectionSpec // in Order
)

// RegisterSection adds a section: called from the init of the package that owns it. A name that is a
// key of Config's own, registered twice or not in lower case panics.
func RegisterSection(s SectionSpec) {
	sectionMu.Lock()
	defer sectionMu.Unlock()
	_, builtIn := fieldsByKey(reflect.TypeFor[Config]())[s.Name]
	if builtIn || s.Name == "" || slices.ContainsFunc(specs, func(o SectionSpec) bool { return o.Name == s.Name }) {
		panic(fmt.Sprintf("config: section %q registered twice or a key of the file's own", s.Name))
	}
	if s.Name != strings.ToLower(s.Name) {
		// The file's keys are read in lower case (normalize): the section would never be found.
		panic(fmt.Sprintf("config: section %q: want a lower-case name", s.Name))
	}
	if k := reflect.TypeOf(s.New()); k.Kind() != reflect.Pointer || (k.Elem().Kind() != reflect.Struct && k.Elem().Kind() != reflect.Slice) {
		panic(fmt.Sprintf("config: section %q: want a pointer to a struct or a slice, not %s", s.Name, k))
	}
	at := slices.IndexFunc(specs, func(o SectionSpec) bool { return o.Order > s.Order })
	if at < 0 {
		at = len(specs)
	}
	specs = slices.Insert(specs, at, s)
}

func sectionSpecs() []SectionSpec {
	sectionMu.RLock()
	defer sectionMu.RUnlock()
	return slices.Clone(specs)
}

// defaultSections is every registered section at its defaults.
func defaultSections() map[string]Section {
	out := map[string]Section{}
	for _, s := range sectionSpecs() {
		out[s.Name] = s.New()
	}
	return out
}

// decodeSections decodes the registered sections of tree, the whole file, into cfg.Sections and takes
// their keys out of tree, which holds Config's own keys after.
func (d *decoder) decodeSections(tree map[string]any, cfg *Config) {
	for _, s := range sectionSpecs() {
		value, ok := tree[s.Name]
		if !ok {
			continue
		}
		delete(tree, s.Name)
		d.decode(s.Name, value, reflect.ValueOf(cfg.Sections[s.Name]).Elem())
	}
}

// sectionKeys are the keys the environment may set in the sections: a struct's leaves, a list whole.
func sectionKeys() []string {
	var keys []string
	for _, s := range sectionSpecs() {
		if t := reflect.TypeOf(s.New()).Elem(); t.Kind() == reflect.Struct {
			keys = append(keys, leafKeys(t, s.Name)...)
		} else {
			keys = append(keys, s.Name)
		}
	}
	return keys
}

// checkSections runs every section's Check.
func (cfg *Config) checkSections(c *check) {
	for _, s := range sectionSpecs() {
		if v, ok := cfg.Sections[s.Name]; ok {
			v.Check(Checker{c}, cfg)
		}
	}
}

// Checker is what a section's Check adds its problems to, with the rules the rest of the file is
// checked by (ids, money, URLs, bounds).
type Checker struct{ c *check }

// Add adds a problem at path.
func (k Checker) Add(path, format string, args ...any) { k.c.add(path, format, args...) }

// ID checks the syntax of an id (ID).
func (k Checker) ID(path, value string) { k.c.id(path, value) }

// AtLeast checks a lower bound.
func (k Checker) AtLeast(path string, value, minimum int64) { k.c.atLeast(path, value, minimum) }

// DurationAtLeast checks a lower bound of a duration.
func (k Checker) DurationAtLeast(path string, value, minimum time.Duration) {
	k.c.durationAtLeast(path, value, minimum)
}

// Money checks a positive amount of money written as a decimal string.
func (k Checker) Money(path, value string) { k.c.money(path, value) }

// HTTPURL checks an absolute http(s) URL.
func (k Checker) HTTPURL(path, value string) { k.c.httpURL(path, value) }

// Owners checks a kind's list of owners (products:, auctions:): every item with item, under the path
// list[i], no two with one id, and no two that the admission.id_match of a route of admissionType
// makes one id.
func Owners[T any](k Checker, cfg *Config, list, admissionType string, items []T, id func(T) string, item func(k Checker, p string, v T)) {
	checkEach(k.c, list, items, id, func(c *check, p string, v T) { item(Checker{c}, p, v) })
	ids := make([]string, len(items))
	for i, v := range items {
		ids[i] = id(v)
	}
	cfg.checkIDMatch(k.c, list, admissionType, ids)
}

// ValidateOne checks one item of a section's list outside a file (an item the admin API creates) with
// run: problem paths start at the item's own keys.
func ValidateOne(run func(k Checker)) error {
	return validateOne(func(c *check) { run(Checker{c}) })
}

// SectionOf is cfg's section name as a T, the type its New returns; false when cfg is nil or has no
// such section (a Config built by hand).
func SectionOf[T Section](cfg *Config, name string) (T, bool) {
	if cfg == nil {
		var none T
		return none, false
	}
	s, ok := cfg.Sections[name].(T)
	return s, ok
}

// WithSection sets cfg's section name to s and returns cfg. The map is copied first: cfg may share it
// with the configuration it was copied from.
func (cfg *Config) WithSection(name string, s Section) *Config {
	cfg.Sections = maps.Clone(cfg.Sections)
	if cfg.Sections == nil {
		cfg.Sections = map[string]Section{}
	}
	cfg.Sections[name] = s
	return cfg
}
