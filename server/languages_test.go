package server

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/templates"
)

// page fetches path from the instance as a browser with acceptLanguage would.
func (in *instance) page(t *testing.T, path, acceptLanguage string) (int, string) {
	t.Helper()
	header := http.Header{"Accept": {"text/html"}}
	if acceptLanguage != "" {
		header.Set("Accept-Language", acceptLanguage)
	}
	r, err := send("GET", in.public+path, header)
	if err != nil {
		t.Fatal(err)
	}
	return r.status, r.body
}

// A real page through the real server speaks the visitor's language, and a
// right-to-left one (Arabic, Hebrew) says so in <html dir>.
func TestPages_LanguageAndDirectionFromAcceptLanguage(t *testing.T) {
	origin := newOrigin(t)
	redisAddr := privateRedisWith(t).Addr()
	in := start(t, configText(origin.URL, routeA)+fmt.Sprintf("redis: {addr: %q}\nqueues:\n  - { id: drop, capacity: 0 }\n", redisAddr))
	cases := []struct{ acceptLanguage, lang, dir string }{
		{"ar", "ar", "rtl"},
		{"ar-SA,ar;q=0.9,en;q=0.8", "ar", "rtl"},
		{"he-IL,he;q=0.9", "he", "rtl"},
		{"iw", "he", "rtl"},
		{"ja-JP,ja;q=0.9,en;q=0.8", "ja", "ltr"},
		{"pt-PT,pt;q=0.9", "pt-BR", "ltr"},
		{"de-AT", "de", "ltr"},
		{"ru", "en", "ltr"},
		{"", "en", "ltr"},
	}
	for _, c := range cases {
		t.Run(c.acceptLanguage, func(t *testing.T) {
			text := templates.For(c.lang)
			html := `<html lang="` + c.lang + `" dir="` + c.dir + `">`
			status, body := in.page(t, "/_edgeq/wait/drop?return=%2F", c.acceptLanguage)
			if status != 200 || !strings.Contains(body, html) {
				t.Fatalf("waiting page: %d, want %s:\n%s", status, html, body)
			}
			for _, key := range []string{"wait.title", "wait.lead", "wait.your_number", "wait.ahead", "wait.refresh"} {
				if want := template.HTMLEscapeString(text.T(key)); !strings.Contains(body, want) {
					t.Errorf("the waiting page lacks %s in %s (%q)", key, c.lang, want)
				}
			}
			// An error page too.
			status, body = in.page(t, "/_edgeq/no-such-page", c.acceptLanguage)
			if status != 404 || !strings.Contains(body, html) || !strings.Contains(body, template.HTMLEscapeString(text.T("msg.NOT_FOUND"))) {
				t.Errorf("404 page: %d, want %s and %q:\n%s", status, html, text.T("msg.NOT_FOUND"), body)
			}
		})
	}
}

// pages.languages restricts the choice: a visitor whose languages are not offered gets
// pages.default_language, even when edgeq has the language built in.
func TestPages_LanguagesRestrictTheChoice(t *testing.T) {
	origin := newOrigin(t)
	in := start(t, configText(origin.URL, routeA)+"queues:\n  - { id: drop, capacity: 0 }\npages:\n  default_language: ko\n  languages: [ko, en, he]\n")
	cases := []struct{ acceptLanguage, lang string }{
		{"ja", "ko"},                   // built in, not offered: the fallback
		{"ja,en;q=0.5", "en"},          // the next one the visitor accepts that is offered
		{"en-GB", "en"},                // offered
		{"iw-IL", "he"},                // offered, by its old code
		{"ar,fr;q=0.9,ru;q=0.8", "ko"}, // none offered
		{"", "ko"},
	}
	for _, c := range cases {
		_, body := in.page(t, "/_edgeq/wait/drop?return=%2F", c.acceptLanguage)
		if want := `<html lang="` + c.lang + `"`; !strings.Contains(body, want) {
			t.Errorf("Accept-Language %q: want %s:\n%s", c.acceptLanguage, want, body)
		}
	}
}

// edgeq check and start-up refuse a language edgeq does not have, naming it, and a fallback that is
// not among the languages offered.
func TestCheck_RefusesUnknownLanguages(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ yaml, path, reason string }{
		{"pages: {languages: [en, xx-YY]}\n", "pages.languages[1]", `"xx-YY" is not a built-in language (built-in: en, zh-TW,`},
		{"pages: {default_language: ja, languages: [ja, ja]}\n", "pages.languages[1]", `"ja" is listed twice`},
		{"pages: {default_language: en, languages: [ja, ko]}\n", "pages.default_language", `"en" is not one of pages.languages (ja, ko)`},
		{"pages: {default_language: klingon}\n", "pages.default_language", `"klingon" is not a built-in language`},
	}
	for i, c := range cases {
		path := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
		os.WriteFile(path, []byte(c.yaml), 0o644)
		problems, _, err := Check(path)
		if err != nil || len(problems) != 1 || problems[0].Path != c.path || !strings.HasPrefix(problems[0].Reason, c.reason) {
			t.Errorf("%s: check = %v, %v; want %s: %s", c.yaml, problems, err, c.path, c.reason)
		}
		var startup *StartupError
		if err := Run(context.Background(), Options{ConfigPath: path, LogOutput: io.Discard}); !errors.As(err, &startup) ||
			!strings.Contains(err.Error(), c.path+": "+c.reason) {
			t.Errorf("%s: start-up: %v", c.yaml, err)
		}
	}
}
