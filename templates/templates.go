// Package templates holds the HTML pages edgeq renders for browsers. They are embedded in the binary and
// parsed once at start-up, so a broken template stops edgeq from starting instead of failing a visitor.
// An operator can replace any page by putting a file of the same name in pages.templates_dir.
package templates

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed *.html
var builtin embed.FS

// layout is the frame every page is rendered in; the pages define its blocks.
const layout = "layout.html"

// Pages are the page templates, each parsed together with the layout.
var Pages = []string{"error.html", "wait.html", "challenge.html", "soldout.html", "expired.html", "bidtoolow.html", "busy.html", "invite.html"}

// builtinFuncs are available to every template, before the caller's funcs.
var builtinFuncs = template.FuncMap{"json": toJSON}

// toJSON renders v as JSON text, for data attributes that page scripts read (html/template escapes it
// for the attribute).
func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// Set is the parsed pages.
type Set struct {
	pages map[string]*template.Template
}

// Parse parses the layout and every page. A file in overrideDir (if not "") with the name of a built-in
// template replaces it; a file there that names no built-in template is an error, since it would
// otherwise be silently ignored. funcs are available to every template. A problem in the built-in
// language files (CheckLanguages) is an error too: the pages would show raw keys.
func Parse(overrideDir string, funcs template.FuncMap) (*Set, error) {
	if catalogErr != nil {
		return nil, fmt.Errorf("built-in languages: %w", catalogErr)
	}
	read := func(name string) (string, error) {
		if overrideDir != "" {
			//nolint:gosec // a template name of this package in the operator's override directory
			b, err := os.ReadFile(filepath.Join(overrideDir, name))
			if err == nil {
				return string(b), nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("template override %s: %w", name, err)
			}
		}
		b, err := builtin.ReadFile(name)
		return string(b), err
	}
	if overrideDir != "" {
		if err := checkOverrides(overrideDir); err != nil {
			return nil, err
		}
	}
	layoutText, err := read(layout)
	if err != nil {
		return nil, err
	}
	set := &Set{pages: make(map[string]*template.Template, len(Pages))}
	for _, name := range Pages {
		text, err := read(name)
		if err != nil {
			return nil, err
		}
		t, err := template.New(layout).Funcs(builtinFuncs).Funcs(funcs).Option("missingkey=error").Parse(layoutText)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", layout, err)
		}
		if _, err := t.New(name).Parse(text); err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		set.pages[name] = t
	}
	return set, nil
}

func checkOverrides(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pages.templates_dir: %w", err)
	}
	known := map[string]bool{layout: true}
	for _, p := range Pages {
		known[p] = true
	}
	for _, e := range entries {
		if !e.IsDir() && filepath.Ext(e.Name()) == ".html" && !known[e.Name()] {
			return fmt.Errorf("pages.templates_dir: %s replaces no built-in template (built-in: %s, %v)", e.Name(), layout, Pages)
		}
	}
	return nil
}

// Render executes page with data into a buffer and only then writes it, so a template error never
// sends half a page.
func (s *Set) Render(w io.Writer, page string, data any) error {
	t, ok := s.pages[page]
	if !ok {
		return fmt.Errorf("no template %q", page)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, layout, data); err != nil {
		return fmt.Errorf("render %s: %w", page, err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// reportPage is the report after a drop (report): a page of its own, self-contained.
const reportPage = "report.html"

// Report parses the report page.
func Report(funcs template.FuncMap) (*template.Template, error) {
	text, err := builtin.ReadFile(reportPage)
	if err != nil {
		return nil, err
	}
	t, err := template.New(reportPage).Funcs(builtinFuncs).Funcs(funcs).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", reportPage, err)
	}
	return t, nil
}

// dashboardPage is the operator dashboard: a page of its own (no shopper layout, no override).
const dashboardPage = "dashboard.html"

// Dashboard parses the operator dashboard page. funcs must provide "static" (asset URLs).
func Dashboard(funcs template.FuncMap) (*template.Template, error) {
	text, err := builtin.ReadFile(dashboardPage)
	if err != nil {
		return nil, err
	}
	t, err := template.New(dashboardPage).Funcs(builtinFuncs).Funcs(funcs).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", dashboardPage, err)
	}
	return t, nil
}
