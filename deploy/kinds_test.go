package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Each admission kind is a package of its own (admission/<kind>) that registers itself (Register, in
// an init), and admission/'s files, the pipeline, name no kind. docs/architecture.md "Adding an
// admission kind" lists what a kind implements: these tests keep both true.

const admissionDir = "../admission"

// admissionKinds reads the registered kinds' words: the name of every package under admission/ whose
// init calls Register and the owner noun its Owner() method returns or its About literal names. A
// file of admission/ itself that registers a kind is an error: a kind is a package.
func admissionKinds(t *testing.T) (words []string) {
	t.Helper()
	var inPipeline []string
	kindsIn(t, admissionDir, &inPipeline)
	if len(inPipeline) > 0 {
		t.Errorf("admission/ registers kinds in its own files %v: a kind is a package of its own (admission/<kind>)", inPipeline)
	}
	dirs, err := filepath.Glob(filepath.Join(admissionDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		var registers []string
		if nouns := kindsIn(t, dir, &registers); len(registers) > 0 {
			words = append(append(words, filepath.Base(dir)), nouns...)
		}
	}
	slices.Sort(words)
	return slices.Compact(words)
}

// kindsIn reads the Go files of dir (tests left out): each file whose init calls Register is added
// to registers (its name less .go), and, when there is one, the owner nouns of every file are
// returned.
func kindsIn(t *testing.T, dir string, registers *[]string) (nouns []string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn.Name.Name == "init" && fn.Recv == nil && calls(fn.Body, "Register") {
				*registers = append(*registers, strings.TrimSuffix(filepath.Base(path), ".go"))
			}
			if fn.Recv != nil && fn.Name.Name == "Owner" {
				if noun, ok := returnedString(fn); ok {
					nouns = append(nouns, noun)
				}
			}
		}
		// A kind that embeds About names its owner in the literal: About{..., OwnerNoun: "product"}.
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if key, isIdent := kv.Key.(*ast.Ident); isIdent && key.Name == "OwnerNoun" {
				if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if noun, err := strconv.Unquote(lit.Value); err == nil {
						nouns = append(nouns, noun)
					}
				}
			}
			return true
		})
	}
	if len(*registers) == 0 {
		return nil
	}
	return nouns
}

// calls reports whether body calls the function name.
func calls(body *ast.BlockStmt, name string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			switch f := c.Fun.(type) {
			case *ast.Ident:
				found = f.Name == name
			case *ast.SelectorExpr:
				found = f.Sel.Name == name
			}
		}
		return !found
	})
	return found
}

// returnedString is the string literal fn returns, when its body is that one return.
func returnedString(fn *ast.FuncDecl) (string, bool) {
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return "", false
	}
	ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return "", false
	}
	lit, ok := ret.Results[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func TestKinds_PipelineNamesNoKind(t *testing.T) {
	names := admissionKinds(t)
	for _, want := range []string{"stock", "product", "bid", "auction"} {
		if !slices.Contains(names, want) {
			t.Fatalf("found the kinds' names %v: %q is missing (is Register still called from each kind's init?)", names, want)
		}
	}
	words := regexp.MustCompile(`(?i)\b(` + strings.Join(names, "|") + `)`)
	files, err := filepath.Glob(filepath.Join(admissionDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	pipeline := 0
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		pipeline++
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if m := words.FindString(line); m != "" {
				t.Errorf("admission/%s:%d names the kind %q in the pipeline: move it into the kind's own files, or make it a capability the kind declares (admission/kind.go)",
					name, i+1, m)
			}
		}
	}
	if pipeline < 10 {
		t.Fatalf("only %d pipeline files in admission/: the test no longer finds them", pipeline)
	}
}

func TestKinds_TheDocListsWhatAKindImplements(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(admissionDir, "kind.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string // the kind interface's methods, and every capability interface
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, spec := range g.Specs {
			ts := spec.(*ast.TypeSpec)
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok {
				continue
			}
			if ts.Name.Name != "Kind" {
				names = append(names, ts.Name.Name)
				continue
			}
			for _, m := range it.Methods.List {
				for _, n := range m.Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("read only %v from admission/kind.go", names)
	}
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "## Adding an admission kind")
	if start < 0 {
		t.Fatal(`docs/architecture.md has no section "## Adding an admission kind"`)
	}
	section = section[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	for _, n := range names {
		if !strings.Contains(section, "`"+n+"`") {
			t.Errorf("docs/architecture.md \"Adding an admission kind\" does not name `%s` (admission/kind.go): say what a kind does with it", n)
		}
	}
}
