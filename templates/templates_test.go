package templates

import (
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var funcs = template.FuncMap{"static": func(name string) string { return "/_edgeq/static/" + name }}

// base mirrors web.PageBase (templates cannot import web).
type base struct {
	Brand, Lang, CorrelationID string
	Text                       Text
	LogoURL, AccentStylesheet  string
}

type errorPage struct {
	base
	Code, Heading, Message string
	Status                 int
	Retry                  bool
}

type waitPage struct {
	base
	QueueID, Title, RequestID, UpdatedAt, UpdatedClock           string
	Return, Self, RejoinURL, StatusURL, TokenURL, BeatURL        string
	Check                                                        widget
	Joined, Failed                                               bool
	Position, Ahead, ETASeconds, PollMs, HiddenPollMs, MaxPollMs int64
	Progress, RefreshSeconds                                     int
	Phase, OpensAt, OpensClock                                   string
	OpensIn, JoinsIn                                             int64
	Shuffle, Paused, Random                                      bool
}

type busyPage struct {
	errorPage
	RefreshSeconds int
}

type challengePage struct {
	base
	Check  widget
	Self   string
	Failed bool
}

// widget is a bot check's part of a page (the provider's snippet and script).
type widget struct {
	Snippet template.HTML
	Script  string
}

// refusalPage is the data of a refusal's own page (bidtoolow.html): the refusal's fields, and the
// same-site page the refused request came from.
type refusalPage struct {
	errorPage
	Fields map[string]any
	Back   string
}

type expiredPage struct {
	base
	Title, RejoinURL string
}

type invitePage struct {
	base
	Title, Action string
}

func en() base { return base{Brand: "Shop", Lang: "en", CorrelationID: "abc", Text: For("en")} }

// pageCase is a built-in page with data and strings its output must hold.
type pageCase struct {
	name string
	data any
	want []string
}

// builtinCases has a case for each built-in page, rendered with b.
func builtinCases(b base) []pageCase {
	return []pageCase{
		{"error.html", errorPage{base: b, Status: 502, Code: "ORIGIN_UNAVAILABLE",
			Heading: "The shop is not answering", Message: "<b>try</b>", Retry: true},
			[]string{"The shop is not answering", "&lt;b&gt;try&lt;/b&gt;", "Try again"}},
		{"wait.html", waitPage{base: b, Phase: "waiting", QueueID: "drop", Title: "<i>Drop</i>", Joined: true, Position: 42,
			Ahead: 41, ETASeconds: 300, RefreshSeconds: 5, Self: "/_edgeq/wait/drop?return=%2F", Return: `/p?x="><script>`},
			[]string{"&lt;i&gt;Drop&lt;/i&gt;", `id="position">42<`, `id="ahead">41<`, "About 5 minutes", `content="5"`,
				`data-return="/p?x=&#34;&gt;&lt;script&gt;"`, `<p id="announce" class="visually-hidden" aria-live="polite" aria-atomic="true"></p>`, "<progress"}},
		{"challenge.html", challengePage{base: b, Check: widget{Snippet: `<div class="cf-turnstile" data-sitekey="k"></div>`, Script: "https://c.example/api.js"},
			Self: "/_edgeq/challenge?return=%2F", Failed: true},
			[]string{`class="cf-turnstile" data-sitekey="k"`, `src="https://c.example/api.js"`, "did not succeed"}},
		{"soldout.html", refusalPage{errorPage: errorPage{base: b, Status: 410, Code: "SOLD_OUT"}, Fields: map[string]any{"queue_title": "<i>Last pairs</i>"}},
			[]string{"<title>&lt;i&gt;Last pairs&lt;/i&gt; · Sold out · ", `<hgroup><h1>&lt;i&gt;Last pairs&lt;/i&gt;</h1><p class="phase">Sold out</p></hgroup>`}},
		{"expired.html", expiredPage{base: b, Title: "Drop", RejoinURL: "/_edgeq/wait/drop?rejoin=1"},
			[]string{`<hgroup><h1>Drop</h1><p class="phase">Your place has expired</p></hgroup>`, `href="/_edgeq/wait/drop?rejoin=1"`}},
		{"bidtoolow.html", refusalPage{errorPage: errorPage{base: b, Status: 409, Code: "BID_TOO_LOW"},
			Fields: map[string]any{"highest_amount": "25.00"}, Back: "/auctions/7"},
			[]string{"<h1>Bid too low</h1>", "The highest bid is now 25.00.", `<a class="button" href="/auctions/7">Back to the auction</a>`}},
		{"busy.html", busyPage{errorPage: errorPage{base: b, Status: 503, Code: "BUSY"}, RefreshSeconds: 5},
			[]string{"The shop is busy", `<noscript><meta http-equiv="refresh" content="5"></noscript>`, "/_edgeq/static/busy.js", `data-seconds="5"`, "tries again by itself in 5 seconds", `<span dir="ltr">503 · BUSY</span>`}},
		{"invite.html", invitePage{base: b, Title: "Presale", Action: "/_edgeq/invite/drop/abc?return=%2Fsale"},
			[]string{"<h1>Opening your invitation</h1>", `<form id="invite" method="post" action="/_edgeq/invite/drop/abc?return=%2Fsale">`,
				`/_edgeq/static/invite.js`, "Open my invitation"}},
	}
}

func TestParse_BuiltinPagesRender(t *testing.T) {
	set, err := Parse("", funcs)
	if err != nil {
		t.Fatal(err)
	}
	cases := builtinCases(en())
	// Without a refresh (a form post, which a refresh would not repeat) the busy page does not reload.
	var b strings.Builder
	if err := set.Render(&b, "busy.html", busyPage{errorPage: errorPage{base: en(), Status: 503, Code: "BUSY"}}); err != nil ||
		strings.Contains(b.String(), `http-equiv="refresh"`) || !strings.Contains(b.String(), "send the form again") {
		t.Errorf("busy page for a form post (%v):\n%s", err, b.String())
	}
	// A refusal of stock admission (no queue behind it) keeps "Sold out" as its heading.
	b.Reset()
	if err := set.Render(&b, "soldout.html", refusalPage{errorPage: errorPage{base: en(), Status: 409, Code: "INSUFFICIENT_STOCK"}}); err != nil ||
		!strings.Contains(b.String(), "<h1>Sold out</h1>") || strings.Contains(b.String(), "<hgroup>") {
		t.Errorf("sold-out page of a stock refusal (%v):\n%s", err, b.String())
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
		// Every page declares edgeq's own icon, so a browser never asks the shop for /favicon.ico.
		for _, want := range append(c.want, `<html lang="en" dir="ltr">`, "/_edgeq/static/edgeq.css", `rel="icon" href="/_edgeq/static/favicon.svg"`, `Reference <code dir="ltr">abc</code>`) {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", c.name, want, out)
			}
		}
	}
}

// With a logo and an accent colour, every page shows the logo (the brand as its alt text) instead of
// the brand text, and loads the accent stylesheet after edgeq's own; without, neither appears.
func TestLayout_LogoAndAccentOnEveryPage(t *testing.T) {
	set, err := Parse("", funcs)
	if err != nil {
		t.Fatal(err)
	}
	branded := en()
	branded.Brand, branded.LogoURL, branded.AccentStylesheet = `Tom & "Jerry"`, "/_edgeq/static/logo.0123456789.svg", "/_edgeq/static/accent.0123456789.css"
	for _, c := range builtinCases(branded) {
		var b strings.Builder
		if err := set.Render(&b, c.name, c.data); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		out := b.String()
		logo := `<header class="brand"><img class="logo" src="/_edgeq/static/logo.0123456789.svg" alt="Tom &amp; &#34;Jerry&#34;"></header>`
		css := `<link rel="stylesheet" href="/_edgeq/static/edgeq.css">` + "\n" + `<link rel="stylesheet" href="/_edgeq/static/accent.0123456789.css">`
		if !strings.Contains(out, logo) || !strings.Contains(out, css) {
			t.Errorf("%s lacks the logo or the accent stylesheet after edgeq.css:\n%s", c.name, out)
		}
	}
	for _, c := range builtinCases(en()) {
		var b strings.Builder
		if err := set.Render(&b, c.name, c.data); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if out := b.String(); strings.Contains(out, "<img") || strings.Contains(out, "accent.") || !strings.Contains(out, `<header class="brand"><span>Shop</span></header>`) {
			t.Errorf("%s without a look:\n%s", c.name, out)
		}
	}
}

// Every phase of the waiting page (docs/reference.md "Waiting room") renders in every language with its
// own words, and none falls back to English or shows a raw key. Every phase keeps the drop's title as
// its one heading, the phase said on the line under it; a scheduled phase shows the opening in UTC for
// the page without JavaScript (the script rewrites it in the visitor's zone).
func TestWaitPage_EveryPhaseInEveryLanguage(t *testing.T) {
	set, err := Parse("", funcs)
	if err != nil {
		t.Fatal(err)
	}
	const utcClock = `<time class="local-time" datetime="2026-12-01T17:00:00Z">2026-12-01 17:00 UTC</time>`
	phases := []struct {
		name  string
		page  waitPage
		keys  []string // strings of the language that must appear
		phase string   // the key said under the heading, if any
		html  []string // markup that must appear
	}{
		{"not_open", waitPage{Phase: "not_open", OpensAt: "2026-12-01T17:00:00Z", OpensClock: "2026-12-01 17:00 UTC", OpensIn: 3600, JoinsIn: 600, RefreshSeconds: 60, PollMs: 30000},
			[]string{"wait.notopen.title", "wait.notopen.lead", "wait.opens", "wait.opens_in"}, "wait.notopen.title",
			[]string{utcClock, `data-joins-in="600" data-poll="30000"`}},
		{"prequeue shuffled", waitPage{Phase: "prequeue", Joined: true, Shuffle: true, OpensAt: "2026-12-01T17:00:00Z", OpensClock: "2026-12-01 17:00 UTC", OpensIn: 90},
			[]string{"wait.prequeue.title", "wait.prequeue.lead", "wait.prequeue.shuffle", "wait.opens_in"}, "wait.prequeue.title", []string{utcClock}},
		{"prequeue in order", waitPage{Phase: "prequeue", Joined: true, OpensAt: "2026-12-01T17:00:00Z", OpensClock: "2026-12-01 17:00 UTC", OpensIn: 90},
			[]string{"wait.prequeue.fifo"}, "wait.prequeue.title", []string{utcClock}},
		{"waiting", waitPage{Phase: "waiting", Joined: true, Position: 7, Ahead: 6, ETASeconds: 300},
			[]string{"wait.lead", "wait.your_number"}, "", nil},
		{"paused", waitPage{Phase: "waiting", Joined: true, Paused: true, Position: 7, Ahead: 6, ETASeconds: -1},
			[]string{"wait.js.paused", "wait.your_number", "wait.js.eta_unknown"}, "", nil},
		{"random", waitPage{Phase: "waiting", Joined: true, Random: true, Ahead: 99, ETASeconds: 600},
			[]string{"wait.random_lead", "wait.random_ahead"}, "", nil},
		{"sold_out", waitPage{Phase: "sold_out", Joined: true},
			[]string{"soldout.title", "wait.soldout.lead", "wait.soldout.check"}, "soldout.title", nil},
		{"join", waitPage{Phase: "join", Check: widget{Snippet: `<div class="cf-turnstile" data-sitekey="k"></div>`, Script: "https://c.example/api.js"}},
			[]string{"wait.join_lead", "wait.join"}, "", nil},
	}
	for _, lang := range Languages {
		for _, p := range phases {
			p.page.base = base{Lang: lang, Text: For(lang), Brand: "Shop"}
			p.page.Title, p.page.Self = "Drop", "/_edgeq/wait/drop?return=%2F"
			var b strings.Builder
			if err := set.Render(&b, "wait.html", p.page); err != nil {
				t.Fatalf("%s %s: %v", lang, p.name, err)
			}
			out := b.String()
			if strings.Count(out, "<h1") != 1 || !strings.Contains(out, "<h1>Drop</h1>") {
				t.Errorf("%s %s: the heading is not the drop's title: %s", lang, p.name, out)
			}
			if p.phase != "" {
				if !catalogHas(lang, p.phase) {
					t.Errorf("%s lacks key %s", lang, p.phase)
				}
				if want := `<h1>Drop</h1><p class="phase">` + template.HTMLEscapeString(For(lang).T(p.phase)) + `</p></hgroup>`; !strings.Contains(out, want) {
					t.Errorf("%s %s: the phase is not said under the heading (%q): %s", lang, p.name, want, out)
				}
			} else if strings.Contains(out, `class="phase"`) {
				t.Errorf("%s %s: a phase line where none belongs: %s", lang, p.name, out)
			}
			for _, want := range p.html {
				if !strings.Contains(out, want) {
					t.Errorf("%s %s: page lacks %s", lang, p.name, want)
				}
			}
			for _, key := range p.keys {
				if !catalogHas(lang, key) {
					t.Errorf("%s lacks key %s", lang, key)
				}
				want := template.HTMLEscapeString(For(lang).T(key))
				if !strings.Contains(out, want) {
					t.Errorf("%s %s: page lacks %s (%q)", lang, p.name, key, want)
				}
			}
			if p.page.Phase != "join" && (p.page.Phase == "sold_out") == strings.Contains(out, "wait.js") {
				t.Errorf("%s %s: the sold-out page must not poll, the others must: %s", lang, p.name, out)
			}
		}
		// The newcomer's sold-out page and the expired page name the drop too.
		for _, c := range []struct {
			page, phase string
			data        any
		}{
			{"soldout.html", "soldout.title", refusalPage{errorPage: errorPage{base: base{Lang: lang, Text: For(lang), Brand: "Shop"}, Status: 410, Code: "SOLD_OUT"},
				Fields: map[string]any{"queue_title": "Drop"}}},
			{"expired.html", "expired.title", expiredPage{base: base{Lang: lang, Text: For(lang), Brand: "Shop"}, Title: "Drop"}},
		} {
			var b strings.Builder
			if err := set.Render(&b, c.page, c.data); err != nil {
				t.Fatalf("%s %s: %v", lang, c.page, err)
			}
			if want := `<hgroup><h1>Drop</h1><p class="phase">` + template.HTMLEscapeString(For(lang).T(c.phase)) + `</p></hgroup>`; !strings.Contains(b.String(), want) {
				t.Errorf("%s %s lacks %q: %s", lang, c.page, want, b.String())
			}
		}
	}
}

func catalogHas(lang, key string) bool {
	_, ok := catalog[lang][key]
	return ok
}

// Without the highest amount or a page to go back to, the bid page still renders, and leads home.
func TestBidTooLow_WithoutFields(t *testing.T) {
	set, err := Parse("", funcs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := set.Render(&b, "bidtoolow.html", refusalPage{errorPage: errorPage{base: base{Lang: "zh-TW", Text: For("zh-TW")}, Status: 409, Code: "BID_TOO_LOW"}}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, `id="highest"`) || !strings.Contains(out, `<a class="button" href="/">回到拍賣</a>`) {
		t.Fatalf("page:\n%s", out)
	}
}

// The built-in texts keep the words of the pages that existed before the files (a sample).
func TestText_KnownStrings(t *testing.T) {
	tw := For("zh-TW")
	if tw.T("wait.title") != "等候室" || tw.Duration(600) != "約 10 分鐘" || For("xx").Lang() != "en" {
		t.Errorf("zh-TW texts: %q %q", tw.T("wait.title"), tw.Duration(600))
	}
	if got := For("pl").Duration(7200); got != "Około 2 godz." {
		t.Errorf("pl 2 hours: %q", got)
	}
	if For("en").T("no.such.key") != "no.such.key" || !For("ja").Has("wait.title") || For("ja").Has("no.such.key") {
		t.Error("T or Has of a missing key")
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
	if err := set.Render(&b, "error.html", errorPage{base: en(), Code: "X"}); err != nil {
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
	if err := set.Render(&b, "error.html", errorPage{base: en()}); err == nil {
		t.Fatal("want an execution error")
	}
	if b.Len() != 0 {
		t.Fatalf("half a page was written: %q", b.String())
	}
}
