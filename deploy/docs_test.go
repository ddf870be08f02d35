package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// packageDirs lists the module's package directories below root, slash-separated and relative to it:
// every directory holding a .go file (tests too: e2e and scripts hold only tests) where the go command
// looks for packages (not testdata, node_modules, or a directory whose name starts with "." or "_").
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(seen))
	for dir := range seen {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	return dirs
}

// mapRows reads the package map of docs/architecture.md: the code blocks of its "## Packages"
// section, where a row is a line that starts with a package directory's path (continuation lines
// start with spaces). It returns each row's path and the line it is on.
func mapRows(t *testing.T, doc string) map[string]int {
	t.Helper()
	lines := strings.Split(doc, "\n")
	start := slices.Index(lines, "## Packages")
	if start < 0 {
		t.Fatal(`docs/architecture.md: no "## Packages" section`)
	}
	rows := map[string]int{}
	inBlock := false
	for i := start + 1; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock && strings.HasPrefix(line, "## ") {
			break
		}
		if !inBlock || line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		path := strings.Fields(line)[0]
		if first, ok := rows[path]; ok {
			t.Errorf("docs/architecture.md:%d: %s has a row already (line %d)", i+1, path, first)
			continue
		}
		rows[path] = i + 1
	}
	if inBlock {
		t.Error(`docs/architecture.md: a code block of "## Packages" is not closed`)
	}
	return rows
}

func TestArchitecture_EveryPackageHasARow(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := mapRows(t, string(doc))
	dirs := packageDirs(t, "..")
	if len(dirs) < 10 || !slices.Contains(dirs, "deploy") {
		t.Fatalf("found only %d package directories (%v): is .. the module's root?", len(dirs), dirs)
	}
	for _, dir := range dirs {
		if _, ok := rows[kindRow]; ok && isKindPackage(t, dir) {
			continue // one row for every kind's package
		}
		if _, ok := rows[dir]; !ok {
			t.Errorf(`%s holds a package but has no row in the map of docs/architecture.md ("## Packages"): `+
				"add a line starting with %s and saying what it holds, in its group", dir, dir)
		}
	}
	for path, line := range rows {
		if path != kindRow && !slices.Contains(dirs, path) {
			t.Errorf("docs/architecture.md:%d: the map has a row for %s, which holds no package", line, path)
		}
	}
}

// kindRow is the map's one row for the admission kinds' packages: each is admission/<kind>, and
// registers itself (admission.Register in an init), so a new kind needs no row of its own.
const kindRow = "admission/<kind>"

// isKindPackage reports whether dir is an admission kind's package: a directory right under
// admission/ whose non-test files call admission.Register from an init.
func isKindPackage(t *testing.T, dir string) bool {
	t.Helper()
	parent, _ := path.Split(dir)
	if parent != "admission/" {
		return false
	}
	files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		imports := slices.ContainsFunc(parsed.Imports, func(i *ast.ImportSpec) bool { return i.Path.Value == `"github.com/edgeq/edgeq/admission"` })
		for _, d := range parsed.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && imports && fn.Name.Name == "init" && fn.Recv == nil && calls(fn.Body, "Register") {
				return true
			}
		}
	}
	return false
}
