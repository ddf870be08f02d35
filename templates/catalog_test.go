package templates

import (
	"html/template"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// Every language has every key of English, no key English lacks, no empty string, and the same fmt
// verbs in the same order. The failures name the language and the key, one per line, so a translator
// sees everything left to do at once.
func TestCatalog_EveryLanguageHasEveryKeyOfEnglish(t *testing.T) {
	if err := CheckLanguages(); err != nil {
		t.Errorf("the built-in language files:\n%v", err)
	}
	en := catalog["en"]
	if len(en) < 100 {
		t.Fatalf("lang/en.json has %d keys", len(en))
	}
	for _, lang := range Languages {
		strs, ok := catalog[lang]
		if !ok {
			t.Errorf("%s: no lang/%s.json loaded", lang, lang)
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(en)) {
			s, ok := strs[key]
			switch {
			case !ok:
				t.Errorf("%s lacks %s", lang, key)
			case strings.TrimSpace(s) == "":
				t.Errorf("%s: %s is empty", lang, key)
			case !slices.Equal(verbs(s), verbs(en[key])):
				t.Errorf("%s: %s has the verbs %q, English %q", lang, key, verbs(s), verbs(en[key]))
			}
		}
		for key := range strs {
			if _, ok := en[key]; !ok {
				t.Errorf("%s: %s is not a key of English", lang, key)
			}
		}
	}
}

// A broken language file is reported, naming the file and the key, and stops Parse (start-up).
func TestLoadCatalog_ReportsBrokenFiles(t *testing.T) {
	const en = `{"a": "Hello", "n": "%d in line", "s": "%s and %d"}`
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"not JSON", map[string]string{"xx": `{"a": "Hi",`}, "lang/xx.json: after 1 keys"},
		{"not an object", map[string]string{"xx": `["a"]`}, "lang/xx.json: not a JSON object"},
		{"a value that is not a string", map[string]string{"xx": `{"a": 1, "n": "%d", "s": "%s %d"}`}, "lang/xx.json: a: the value is not a string"},
		{"a key given twice", map[string]string{"xx": `{"a": "Hi", "a": "Ho", "n": "%d", "s": "%s %d"}`}, "lang/xx.json: a: given twice"},
		{"more after the object", map[string]string{"xx": `{"a": "Hi", "n": "%d", "s": "%s %d"} {}`}, "lang/xx.json: more after the object"},
		{"a missing key", map[string]string{"xx": `{"a": "Hi", "s": "%s %d"}`}, "lang/xx.json: lacks n"},
		{"an extra key", map[string]string{"xx": `{"a": "Hi", "n": "%d", "s": "%s %d", "b": "B"}`}, "lang/xx.json: b is not a key of lang/en.json"},
		{"an empty string", map[string]string{"xx": `{"a": " ", "n": "%d", "s": "%s %d"}`}, "lang/xx.json: a is empty"},
		{"a verb missing", map[string]string{"xx": `{"a": "Hi", "n": "in line", "s": "%s %d"}`}, `lang/xx.json: n has the verbs [], English has [%d]`},
		{"another verb", map[string]string{"xx": `{"a": "Hi", "n": "%s in line", "s": "%s %d"}`}, `lang/xx.json: n has the verbs [%s], English has [%d]`},
		{"verbs in another order", map[string]string{"xx": `{"a": "Hi", "n": "%d", "s": "%d %s"}`}, `lang/xx.json: s has the verbs [%d %s], English has [%s %d]`},
		{"a stray percent sign", map[string]string{"xx": `{"a": "100 %", "n": "%d", "s": "%s %d"}`}, `lang/xx.json: a has the verbs [%], English has []`},
		{"a missing file", map[string]string{}, "open lang/xx.json: file does not exist"},
		{"a file nobody lists", map[string]string{"xx": `{"a": "Hi", "n": "%d", "s": "%s %d"}`, "yy": `{}`}, `lang/yy.json: "yy" is not in templates.Languages`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{"lang/en.json": {Data: []byte(en)}}
			for tag, text := range c.files {
				fsys["lang/"+tag+".json"] = &fstest.MapFile{Data: []byte(text)}
			}
			cat, err := loadCatalog(fsys, "lang", []string{"en", "xx"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
			if cat["en"]["a"] != "Hello" {
				t.Errorf("English was not kept: %v", cat["en"])
			}
		})
	}
	// Literal percent signs written as %% are not verbs; a good file gives no error.
	fsys := fstest.MapFS{
		"lang/en.json": {Data: []byte(`{"p": "100%% sure, %d"}`)},
		"lang/xx.json": {Data: []byte(`{"p": "%d, sûr à 100%%"}`)},
	}
	if _, err := loadCatalog(fsys, "lang", []string{"en", "xx"}); err != nil {
		t.Fatalf("a good pair of files: %v", err)
	}
}

func TestVerbs(t *testing.T) {
	cases := map[string][]string{
		"plain":           nil,
		"%d in line":      {"%d"},
		"%s and %d":       {"%s", "%d"},
		"%[2]s %5.2f %-d": {"%[2]s", "%5.2f", "%-d"},
		"100%% sure":      nil,
		"100 %":           {"%"},
		"50 % de remise":  {"% d"}, // fmt reads "% d" as a verb: exactly the mistake to catch
	}
	for s, want := range cases {
		if got := verbs(s); !slices.Equal(got, want) {
			t.Errorf("verbs(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestText_Dir(t *testing.T) {
	for _, lang := range Languages {
		want := "ltr"
		if lang == "ar" || lang == "he" {
			want = "rtl"
		}
		if got := For(lang).Dir(); got != want {
			t.Errorf("%s: Dir() = %s, want %s", lang, got, want)
		}
	}
	if For("xx").Dir() != "ltr" {
		t.Error("an unknown language falls back to English, left to right")
	}
}

// Every page renders in every language with <html lang dir>, the language's own words and no raw
// key; right-to-left pages keep the numbers they show readable (isolated where mixed with text).
func TestPages_EveryPageInEveryLanguage(t *testing.T) {
	bareStatus := regexp.MustCompile(`<p class="status">[0-9]`)
	set, err := Parse("", funcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range Languages {
		text := For(lang)
		b := base{Brand: "Shop", Lang: lang, CorrelationID: "abc-123", Text: text}
		pages := []struct {
			name string
			data any
			keys []string
		}{
			{"error.html", errorPage{base: b, Status: 502, Code: "ORIGIN_UNAVAILABLE", Heading: text.T("error.502"),
				Message: text.T("msg.ORIGIN_UNAVAILABLE"), Retry: true}, []string{"error.502", "msg.ORIGIN_UNAVAILABLE", "try_again"}},
			{"wait.html", waitPage{base: b, Phase: "waiting", Joined: true, Title: "Drop", Position: 1234, Ahead: 1200,
				ETASeconds: 300, Self: "/w"}, []string{"wait.title", "wait.lead", "wait.your_number", "wait.ahead", "wait.eta", "wait.updated", "wait.refresh"}},
			{"wait.html", waitPage{base: b, Phase: "join", Title: "Drop", Failed: true, Self: "/w"},
				[]string{"wait.join_lead", "wait.join", "msg.INVALID_TURNSTILE_TOKEN"}},
			{"challenge.html", challengePage{base: b, Failed: true, Self: "/c"}, []string{"challenge.title", "challenge.lead", "challenge.failed", "challenge.submit"}},
			{"soldout.html", refusalPage{errorPage: errorPage{base: b, Status: 409, Code: "INSUFFICIENT_STOCK"}}, []string{"soldout.title", "soldout.lead", "back_to_shop"}},
			{"expired.html", expiredPage{base: b, Title: "Drop", RejoinURL: "/r"}, []string{"expired.title", "expired.lead", "expired.rejoin"}},
			{"bidtoolow.html", refusalPage{errorPage: errorPage{base: b, Status: 409, Code: "BID_TOO_LOW"},
				Fields: map[string]any{"highest_amount": "25.00"}}, []string{"bidtoolow.title", "bidtoolow.lead", "bidtoolow.back"}},
			{"busy.html", busyPage{errorPage: errorPage{base: b, Status: 503, Code: "BUSY"}, RefreshSeconds: 5}, []string{"busy.title", "busy.lead", "try_again"}},
			{"busy.html", busyPage{errorPage: errorPage{base: b, Status: 503, Code: "BUSY"}}, []string{"busy.resend", "back_to_shop"}},
			{"invite.html", invitePage{base: b, Title: "Presale", Action: "/i"}, []string{"invite.title", "invite.lead", "invite.button"}},
		}
		for _, p := range pages {
			var out strings.Builder
			if err := set.Render(&out, p.name, p.data); err != nil {
				t.Fatalf("%s %s: %v", lang, p.name, err)
			}
			page := out.String()
			want := append([]string{`<html lang="` + lang + `" dir="` + text.Dir() + `">`, `<code dir="ltr">abc-123</code>`},
				template.HTMLEscapeString(text.T("ref")))
			for _, key := range p.keys {
				want = append(want, template.HTMLEscapeString(text.T(key)))
			}
			if p.name == "busy.html" && strings.Contains(page, "refresh") {
				want = append(want, template.HTMLEscapeString(text.T("busy.retrying", 5)))
			}
			if p.name == "bidtoolow.html" {
				want = append(want, template.HTMLEscapeString(text.T("bidtoolow.highest", "25.00")))
			}
			for _, w := range want {
				if !strings.Contains(page, w) {
					t.Errorf("%s %s lacks %q", lang, p.name, w)
				}
			}
			// A status line mixes a number and a Latin code: isolated left to right in every language.
			if bareStatus.MatchString(page) {
				t.Errorf("%s %s: the status line is not isolated", lang, p.name)
			}
			for _, key := range slices.Collect(maps.Keys(catalog["en"])) {
				if strings.Contains(page, ">"+key+"<") {
					t.Errorf("%s %s shows the raw key %s", lang, p.name, key)
				}
			}
		}
	}
}
