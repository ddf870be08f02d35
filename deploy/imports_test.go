package deploy

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pathGroup is a set of packages: those matching a path of in and none of out. A path is a package
// directory relative to the module's root, "dir/..." is dir and every package below it, and "..."
// alone is every package.
type pathGroup struct{ in, out []string }

// pathSet is the union of its groups: one side of a rule line.
type pathSet []pathGroup

// closeness is how closely pattern names pkg: 0 when it does not, more for a deeper "/...", most for
// pkg's own path.
func closeness(pattern, pkg string) int {
	base, tree := strings.CutSuffix(pattern, "/...")
	switch {
	case pattern == "...":
		return 1
	case tree && (pkg == base || strings.HasPrefix(pkg, base+"/")):
		return 2 + 2*len(base)
	case !tree && pattern == pkg:
		return 3 + 2*len(pkg)
	}
	return 0
}

// closeness is how closely s names pkg: its closest path's, not counting a group whose out matches.
func (s pathSet) closeness(pkg string) int {
	best := 0
	for _, g := range s {
		if !slices.ContainsFunc(g.out, func(p string) bool { return closeness(p, pkg) > 0 }) {
			for _, p := range g.in {
				best = max(best, closeness(p, pkg))
			}
		}
	}
	return best
}

// importRule is a line "packages : what they may import"; line is its line in the doc.
type importRule struct {
	line      int
	who, may  pathSet
	mayString string // "only ..." or "no package of the module"
}

// parseImportRules reads the rules of doc, docs/architecture.md's text: the "~~~imports" block of its
// "## Packages" section (fenced with tildes: mapRows reads every line of a backtick block there as a
// row).
func parseImportRules(doc string) ([]importRule, error) {
	lines := strings.Split(doc, "\n")
	start := slices.Index(lines, "## Packages")
	if start < 0 {
		return nil, fmt.Errorf(`no "## Packages" section`)
	}
	open := slices.Index(lines[start:], "~~~imports") + start
	if open < start {
		return nil, fmt.Errorf(`no "~~~imports" block in "## Packages"`)
	}
	var rules []importRule
	groups := map[string]pathGroup{}
	// set reads one side of a rule line: groups' names and paths.
	set := func(text string) (s pathSet) {
		for _, w := range strings.Fields(text) {
			g, ok := groups[w]
			if !ok {
				g = pathGroup{in: []string{w}}
			}
			s = append(s, g)
		}
		return s
	}
	for i := open + 1; i < len(lines); i++ {
		n, text := i+1, lines[i]
		if text == "~~~" {
			return rules, nil
		}
		text, _, _ = strings.Cut(text, "#")
		if strings.TrimSpace(text) == "" {
			continue
		}
		if name, def, ok := strings.Cut(text, "="); ok {
			name = strings.TrimSpace(name)
			if _, dup := groups[name]; dup || strings.ContainsAny(name, " /") {
				return nil, fmt.Errorf("line %d: %q is not a new group's name", n, name)
			}
			in, out, _ := strings.Cut(def, " except ")
			groups[name] = pathGroup{in: strings.Fields(in), out: strings.Fields(out)}
			continue
		}
		who, may, ok := strings.Cut(text, ":")
		if !ok || len(strings.Fields(who)) == 0 {
			return nil, fmt.Errorf(`line %d: %q is neither "name = paths" nor "packages : what they may import"`,
				n, lines[i])
		}
		r := importRule{line: n, who: set(who), may: set(may)}
		r.mayString = "only " + strings.Join(strings.Fields(may), ", ")
		if len(r.may) == 0 {
			r.mayString = "no package of the module"
		}
		rules = append(rules, r)
	}
	return nil, fmt.Errorf("line %d: the rules block is not closed with ~~~", open+1)
}

// anImport is one import of a package: the file that has it and the imported package, both relative
// to the module's root.
type anImport struct{ file, pkg string }

// checkImports returns what breaks rules in graph (every package directory and the imports of its
// non-test files): a package no rule line places, or placed by two equally, and an import its line
// does not allow.
func checkImports(rules []importRule, graph map[string][]anImport) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		var rule *importRule
		best, tie := 0, 0
		for i := range rules {
			switch c := rules[i].who.closeness(pkg); {
			case c > best:
				rule, best, tie = &rules[i], c, 0
			case c == best && c > 0:
				tie = rules[i].line
			}
		}
		switch {
		case rule == nil:
			problems = append(problems, fmt.Sprintf("%s matches no line of the import rules: add it to the "+
				"line of its layer in docs/architecture.md (\"## Packages\")", pkg))
			continue
		case tie != 0:
			problems = append(problems, fmt.Sprintf("%s is placed by two lines of the import rules, "+
				"docs/architecture.md:%d and :%d: name it on one only", pkg, rule.line, tie))
			continue
		}
		for _, imp := range graph[pkg] {
			if rule.may.closeness(imp.pkg) == 0 {
				problems = append(problems, fmt.Sprintf("%s: imports %s, but %s may import %s "+
					"(docs/architecture.md:%d)", imp.file, imp.pkg, pkg, rule.mayString, rule.line))
			}
		}
	}
	return problems
}

// importGraph walks the module at root and returns its package directories with the module-internal
// imports of their non-test files (a directory holding only tests has none). It skips testdata,
// node_modules, hidden directories and nested modules (a directory with its own go.mod).
func importGraph(t *testing.T, root string) map[string][]anImport {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	module, _, _ := strings.Cut(strings.TrimPrefix(string(mod), "module "), "\n")
	if err != nil || !strings.HasPrefix(string(mod), "module ") {
		t.Fatalf("%s/go.mod does not start with the module's path (%v)", root, err)
	}
	graph := map[string][]anImport{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			_, err := os.Stat(filepath.Join(path, "go.mod"))
			if name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") ||
				strings.HasPrefix(name, "_") || err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		file, pkg := filepath.ToSlash(rel), filepath.ToSlash(filepath.Dir(rel))
		if _, ok := graph[pkg]; !ok {
			graph[pkg] = nil // a package even when it holds only tests
		}
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imported, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if inModule, ok := strings.CutPrefix(imported, module+"/"); ok {
				graph[pkg] = append(graph[pkg], anImport{file: file, pkg: inModule})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

// rulesAndGraph reads the rules of docs/architecture.md and the import graph of the module.
func rulesAndGraph(t *testing.T) ([]importRule, map[string][]anImport) {
	t.Helper()
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseImportRules(string(doc))
	if err != nil {
		t.Fatalf("docs/architecture.md: the import rules cannot be read: %v", err)
	}
	graph := importGraph(t, "..")
	if _, ok := graph["deploy"]; !ok || len(graph) < 10 {
		t.Fatalf("found only %d package directories: is .. the module's root?", len(graph))
	}
	return rules, graph
}

func TestImports_FollowTheLayers(t *testing.T) {
	rules, graph := rulesAndGraph(t)
	problems := checkImports(rules, graph)
	if len(problems) > 0 {
		t.Errorf("the packages break the import rules of docs/architecture.md (\"## Packages\"): move the code " +
			"to a package that may import what it needs, or, if the layers should change, change the rule " +
			"there and say why")
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestImports_CatchAPlantedViolation(t *testing.T) {
	rules, graph := rulesAndGraph(t)
	before := checkImports(rules, graph) // what TestImports_FollowTheLayers reports
	graph["internal/web"] = append(graph["internal/web"],
		anImport{file: "internal/web/planted.go", pkg: "admission"})
	graph["internal/vocab"] = append(graph["internal/vocab"],
		anImport{file: "internal/vocab/planted.go", pkg: "internal/config"})
	graph["planted"] = nil // a package no rule line places
	got := slices.DeleteFunc(checkImports(rules, graph), func(p string) bool {
		return slices.Contains(before, p)
	})
	for _, p := range got {
		t.Log(p)
	}
	wantPrefixes := []string{
		"internal/vocab/planted.go: imports internal/config, but internal/vocab may import no package of the " +
			"module",
		"internal/web/planted.go: imports admission, but internal/web may import only vocab, internal/config,",
		"planted matches no line of the import rules",
	}
	if len(got) != len(wantPrefixes) {
		t.Fatalf("checkImports reported %d problems, want the %d planted ones: %q",
			len(got), len(wantPrefixes), got)
	}
	for i, want := range wantPrefixes {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("problem %d is %q, want it to start with %q", i, got[i], want)
		}
	}
}
