package templates

import (
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var funcs = template.FuncMap{"static": func(name string) string { return "/_edgeq/static/" + name }}

type page struct {
	Brand, Lang, CorrelationID, Code, Heading, Message string
	Status                                             int
	Retry                                              bool
}

type waitPage struct {
	Brand, Lang, CorrelationID, QueueID, Title, Self string
	Position, Ahead, ETASeconds                      int64
	RefreshSeconds                                   int
}

func TestParse_BuiltinPagesRender(t *testing.T) {
	set, err := Parse("", funcs)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data any
		want []string
	}{
		{"error.html", page{Brand: "Shop", Lang: "en", Status: 502, Code: "ORIGIN_UNAVAILABLE",
			Heading: "The shop is not answering", Message: "<b>try</b>", CorrelationID: "abc", Retry: true},
			[]string{"The shop is not answering", "&lt;b&gt;try&lt;/b&gt;", "abc"}},
		{"wait.html", waitPage{Brand: "Shop", Lang: "en", QueueID: "drop", Title: "<i>Drop</i>", Position: 42,
			Ahead: 41, ETASeconds: 300, RefreshSeconds: 5, Self: "/_edgeq/wait/drop?return=%2F"},
			[]string{"&lt;i&gt;Drop&lt;/i&gt;", ">42<", ">41<", "about 5 minutes", `content="5"`}},
	}
	if len(cases) != len(Pages) {
		t.Fatalf("pages %v: add a case for each", Pages)
	}
	for _, c := range cases {
		var b strings.Builder
		if err := set.Render(&b, c.name, c.data); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		out := b.String()
		for _, want := range append(c.want, `<html lang="en">`, "/_edgeq/static/edgeq.css") {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", c.name, want, out)
			}
		}
	}
}

func TestParse_OverrideReplacesABuiltinPage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "error.html"), []byte(`{{define "main"}}<p>Custom {{.Code}}</p>{{end}}`), 0o644)
	set, err := Parse(dir, funcs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := set.Render(&b, "error.html", page{Brand: "B", Lang: "en", Code: "X"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<p>Custom X</p>") || !strings.Contains(b.String(), "<header") {
		t.Fatalf("override not used inside the layout:\n%s", b.String())
	}
}

func TestParse_BrokenOrUnknownOverrideFails(t *testing.T) {
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "error.html"), []byte(`{{define "main"}}{{if}}{{end}}`), 0o644)
	if _, err := Parse(broken, funcs); err == nil || !strings.Contains(err.Error(), "error.html") {
		t.Fatalf("broken override: %v", err)
	}
	unknown := t.TempDir()
	os.WriteFile(filepath.Join(unknown, "eror.html"), []byte(`x`), 0o644)
	if _, err := Parse(unknown, funcs); err == nil || !strings.Contains(err.Error(), "eror.html replaces no built-in template") {
		t.Fatalf("unknown override: %v", err)
	}
	if _, err := Parse(filepath.Join(unknown, "missing"), funcs); err == nil {
		t.Fatal("a missing templates_dir must fail")
	}
}

// A template that fails while executing must not send half a page.
func TestRender_FailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "error.html"), []byte(`{{define "main"}}<p>start {{.Missing}}</p>{{end}}`), 0o644)
	set, err := Parse(dir, funcs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := set.Render(&b, "error.html", page{Brand: "B", Lang: "en"}); err == nil {
		t.Fatal("want an execution error")
	}
	if b.Len() != 0 {
		t.Fatalf("half a page was written: %q", b.String())
	}
}
