package report

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ScopeInfo describes a scope a package registers (RegisterScope): an admission kind whose owners get
// series in the report without the report knowing the kind.
type ScopeInfo struct {
	// Name is the scope's key in the JSON ("scopes": {"drawings": ...}), its CSV columns' prefix
	// ("drawings:<id>:<series>") and its section on the page: lower-case letters, digits and
	// underscores, starting with a letter.
	Name string
	// Noun names one owner on the page ("drawing"); Name when empty.
	Noun string
	// Series are the counted series the scope shows, in order ("entered", "committed", "released"):
	// the names its package adds to a Tally scope of its kind. Refusals (Scope.Refuse) are shown
	// besides them, by code.
	Series []string
}

// registeredScope is a registered scope and its kind.
type registeredScope struct {
	kind Kind
	ScopeInfo
}

var scopeRegistry struct {
	sync.RWMutex
	byKind map[Kind]ScopeInfo
}

// scopeName is what a registered scope's name and series names look like: a JSON key, a part of a CSV
// column's name and of an HTML id alike.
var scopeName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// RegisterScope makes the owners of kind k a scope of the report: their series, written by a Tally
// and Writer.Flush as a product's are, read for the ids in Query.Owners[k], and shown in the JSON
// ("scopes"), the CSV and the page. A package calls it from its init. Its keys are under the hash tag
// of the kind's letter and the owner's id ("{<k>:<id>}", store.Keys.Global), where an Extra.Aux of the
// scope must be too.
//
// It panics on a kind that is the report's own (Queue, Product, Auction) or is not a lower-case
// letter or digit (the letter names the keys' hash tag), on a kind or a name registered before, and
// on a name or series name that is empty or not of lower-case letters, digits and underscores, a
// series named like a gauge or "refused", or a series given twice.
func RegisterScope(k Kind, s ScopeInfo) {
	switch {
	case k == Queue || k == Product || k == Auction:
		panic(fmt.Sprintf("report: scope %q: kind %q is the report's own", s.Name, rune(k)))
	case (k < 'a' || k > 'z') && (k < '0' || k > '9'):
		panic(fmt.Sprintf("report: scope %q: kind %q is not a lower-case letter or digit", s.Name, rune(k)))
	case s.Name == "":
		panic(fmt.Sprintf("report: the scope of kind %q has no name", rune(k)))
	case !scopeName.MatchString(s.Name) || s.Name == "product" || s.Name == "auction":
		panic(fmt.Sprintf("report: scope name %q: want lower-case letters, digits and underscores, not product or auction", s.Name))
	}
	for i, name := range s.Series {
		if !scopeName.MatchString(name) || isGauge(name) || name == "refused" || slices.Contains(s.Series[:i], name) {
			panic(fmt.Sprintf("report: scope %q: series %q is not a name of its own (lower-case letters, digits and "+
				"underscores, no gauge, not refused, once)", s.Name, name))
		}
	}
	if s.Noun == "" {
		s.Noun = s.Name
	}
	s.Series = slices.Clone(s.Series)
	scopeRegistry.Lock()
	defer scopeRegistry.Unlock()
	if old, ok := scopeRegistry.byKind[k]; ok {
		panic(fmt.Sprintf("report: scope %q: kind %q is registered already (scope %q)", s.Name, rune(k), old.Name))
	}
	for other, info := range scopeRegistry.byKind {
		if info.Name == s.Name {
			panic(fmt.Sprintf("report: scope %q is registered already (kind %q)", s.Name, rune(other)))
		}
	}
	if scopeRegistry.byKind == nil {
		scopeRegistry.byKind = map[Kind]ScopeInfo{}
	}
	scopeRegistry.byKind[k] = s
}

// registeredScopes are the registered scopes in the order of their names.
func registeredScopes() []registeredScope {
	scopeRegistry.RLock()
	defer scopeRegistry.RUnlock()
	out := make([]registeredScope, 0, len(scopeRegistry.byKind))
	for k, info := range scopeRegistry.byKind {
		out = append(out, registeredScope{kind: k, ScopeInfo: info})
	}
	slices.SortFunc(out, func(a, b registeredScope) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// scopeByName is the registered scope of a name; for a name none has (a report built elsewhere), its
// series are those the report holds, by name.
func scopeByName(name string, r *Report) ScopeInfo {
	for _, s := range registeredScopes() {
		if s.Name == name {
			return s.ScopeInfo
		}
	}
	info := ScopeInfo{Name: name, Noun: name}
	for _, ss := range r.Scopes[name] {
		for series := range ss.Counts {
			if !slices.Contains(info.Series, series) {
				info.Series = append(info.Series, series)
			}
		}
	}
	slices.Sort(info.Series)
	return info
}

// ScopeSummary is one owner's range in a registered scope: each of its series' total (0 included) and
// its refusals by code.
type ScopeSummary struct {
	ID      string           `json:"id"`
	Counts  map[string]int64 `json:"counts"`
	Refused map[string]int64 `json:"refused"`
}

// ScopeSeries is one owner's points in a registered scope: each series' (zeros where nothing was
// counted), every refusal per point and each code's.
type ScopeSeries struct {
	Counts        map[string][]int64 `json:"counts"`
	Refused       []int64            `json:"refused"`
	RefusedByCode map[string][]int64 `json:"refused_by_code"`
}

// scopeOwner is one owner's summary and points in a registered scope.
func scopeOwner(id string, info ScopeInfo, sd *scopeData, w window) (ScopeSummary, ScopeSeries) {
	sum := ScopeSummary{ID: id, Counts: make(map[string]int64, len(info.Series)), Refused: sd.refusals()}
	series := ScopeSeries{Counts: make(map[string][]int64, len(info.Series)), Refused: sd.refusedPoints(w),
		RefusedByCode: sd.byCode(w)}
	for _, name := range info.Series {
		sum.Counts[name] = sd.total(name)
		series.Counts[name] = sd.points(name, w)
	}
	return sum, series
}

// readRegistered adds to rep the owners of every registered scope in owners that counted something in
// the range, in id order.
func (rd reader) readRegistered(ctx context.Context, rep *Report, owners map[Kind][]string, w window) error {
	for _, sc := range registeredScopes() {
		ids := slices.Compact(slices.Sorted(slices.Values(owners[sc.kind])))
		if len(ids) == 0 {
			continue
		}
		data, err := rd.readScopes(ctx, sc.kind, ids, w)
		if err != nil {
			return err
		}
		for i, id := range ids {
			if !data[i].any {
				continue
			}
			sum, series := scopeOwner(id, sc.ScopeInfo, data[i], w)
			if rep.Scopes == nil {
				rep.Scopes, rep.Series.Scopes = map[string][]ScopeSummary{}, map[string]map[string]ScopeSeries{}
			}
			if rep.Series.Scopes[sc.Name] == nil {
				rep.Series.Scopes[sc.Name] = map[string]ScopeSeries{}
			}
			rep.Scopes[sc.Name] = append(rep.Scopes[sc.Name], sum)
			rep.Series.Scopes[sc.Name][id] = series
		}
	}
	return nil
}

// scopeNames are the names of the report's scopes with data, in order.
func (r *Report) scopeNames() []string { return slices.Sorted(maps.Keys(r.Scopes)) }
