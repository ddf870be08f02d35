package admission

import (
	"html/template"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/templates"
)

// Every kind's refusals read in the shopper's language: a refusal a browser gets as the error page
// (not one with a page of its own, such as the sold-out page) has its message, and its heading where
// the kind gives one, in every language's texts, which the kind keeps beside its code
// (a texts/<tag>.json of its own, templates.RegisterTexts).
func TestKindCodes_EveryRefusalInEveryLanguage(t *testing.T) {
	if err := templates.CheckLanguages(); err != nil {
		t.Fatal(err)
	}
	pages, err := templates.Parse("", template.FuncMap{"static": func(string) string { return "/s.css" }})
	if err != nil {
		t.Fatal(err)
	}
	rs := &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"}
	s := &Service{}
	checked := 0
	for _, r := range registered {
		k := r.newKind(s)
		for _, e := range k.Refusals() {
			if refusalPage(k, e) != "" {
				continue
			}
			checked++
			for _, lang := range templates.Languages {
				text := templates.For(lang)
				if !text.Has("msg." + e.Code) {
					t.Errorf("%s: no msg.%s in %s: its page would show the English %q", k.Name(), e.Code, lang, e.Message)
					continue
				}
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("Accept", "text/html")
				req.Header.Set("Accept-Language", lang)
				rec := httptest.NewRecorder()
				rs.Error(rec, req, e)
				page := rec.Body.String()
				want := []string{`<html lang="` + lang + `"`, template.HTMLEscapeString(text.T("msg." + e.Code))}
				if text.Has("head." + e.Code) {
					want = append(want, "<h1>"+template.HTMLEscapeString(text.T("head."+e.Code))+"</h1>")
				}
				for _, w := range want {
					if !strings.Contains(page, w) {
						t.Errorf("%s %s %s: the page lacks %q", k.Name(), lang, e.Code, w)
					}
				}
			}
		}
	}
	if checked < 8 {
		t.Fatalf("checked %d refusals of %d kinds: expected stock's and bid's", checked, len(registered))
	}
}
