package server

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
)

// postForm posts a form the way a page of the shop would (same-origin).
func postForm(t *testing.T, target string, form url.Values, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// A fourth bot-check provider (riddle, riddle_test.go) is one file and one registration: with
// challenge.provider: riddle, the join of a checked queue, the waiting page's join form, a checked
// route, the challenge page and its clearance, the counter and `edgeq check` all use it, and no file
// of the waiting room, the gate or the pages names it.
func TestProviders_AFourthProviderIsOneFile(t *testing.T) {
	if !slices.Contains(botcheck.Names(), "riddle") || !slices.Contains(config.ChallengeProviders(), "riddle") {
		t.Fatalf("riddle is not registered: %v %v", botcheck.Names(), config.ChallengeProviders())
	}
	origin := newOrigin(t)
	text := configText(origin.URL, `  - { name: account, match: "GET /account/", turnstile: true }`) + `
challenge: {provider: riddle, riddle: {answer: "42"}}
queues: [{id: club, capacity: 5, turnstile: true}]
limits: {join_per_ip_per_minute: 0}
`
	in := start(t, text)
	html := http.Header{"Accept": {"text/html"}}
	jsonAccept := http.Header{"Accept": {"application/json"}}

	// The waiting page's join form shows the provider's snippet.
	page, err := send("GET", in.public+"/_edgeq/wait/club", html)
	if err != nil || page.status != 200 || !strings.Contains(page.body, `name="riddle_answer"`) || !strings.Contains(page.body, "What is six times seven?") {
		t.Fatalf("join form: %v %d\n%s", err, page.status, page.body)
	}
	// A join: a wrong answer takes no place; the right one does.
	join := in.public + "/_edgeq/assign_queue_pos"
	if r := postForm(t, join, url.Values{"queue_id": {"club"}, "riddle_answer": {"41"}}, jsonAccept); r.status != 403 || !strings.Contains(r.body, "INVALID_TURNSTILE_TOKEN") {
		t.Fatalf("wrong answer: %d %s", r.status, r.body)
	}
	if r := postForm(t, join, url.Values{"queue_id": {"club"}}, jsonAccept); r.status != 403 {
		t.Fatalf("no answer: %d %s", r.status, r.body)
	}
	if r := postForm(t, join, url.Values{"queue_id": {"club"}, "riddle_answer": {"42"}}, jsonAccept); r.status != 200 || !strings.Contains(r.body, "request_id") {
		t.Fatalf("right answer: %d %s", r.status, r.body)
	}

	// A checked route: an API client without an answer is refused, with one (in the provider's header)
	// passes and gets a clearance that lets it pass again without one.
	if r, _ := send("GET", in.public+"/account/", jsonAccept); r.status != 403 || !strings.Contains(r.body, "TURNSTILE_REQUIRED") {
		t.Fatalf("route without an answer: %d %s", r.status, r.body)
	}
	r, _ := send("GET", in.public+"/account/", http.Header{"Accept": {"application/json"}, "Riddle-Answer": {"42"}})
	if r.status != 200 || r.body != "origin /account/" {
		t.Fatalf("route with the answer: %d %s", r.status, r.body)
	}
	var clearance string
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "edgeq_clearance" {
			clearance = c.Name + "=" + c.Value
		}
	}
	if clearance == "" {
		t.Fatalf("no clearance cookie: %v", r.header)
	}
	if r, _ := send("GET", in.public+"/account/", http.Header{"Accept": {"application/json"}, "Cookie": {clearance}}); r.status != 200 {
		t.Fatalf("route with the clearance: %d %s", r.status, r.body)
	}

	// A browser is sent to the challenge page, which shows the snippet and, answered, returns it.
	nav, _ := send("GET", in.public+"/account/", html)
	if nav.status != 200 || !strings.Contains(nav.body, `name="riddle_answer"`) {
		t.Fatalf("browser on the checked route: %d %s", nav.status, nav.body)
	}
	answered := postForm(t, in.public+"/_edgeq/challenge?return=%2Faccount%2F", url.Values{"riddle_answer": {"42"}}, html)
	if answered.status != http.StatusSeeOther || answered.header.Get("Location") != "/account/" {
		t.Fatalf("challenge page answered: %d %v %s", answered.status, answered.header, answered.body)
	}
	if wrong := postForm(t, in.public+"/_edgeq/challenge?return=%2Faccount%2F", url.Values{"riddle_answer": {"7"}}, html); wrong.status != 403 {
		t.Fatalf("challenge page, wrong answer: %d", wrong.status)
	}

	// Counted under its own name and results.
	if n := in.metric(t, `edgeq_challenge_verifications_total{provider="riddle",result="solved"}`); n != 3 {
		t.Errorf("solved: %v", n)
	}
	if n := in.metric(t, `edgeq_challenge_verifications_total{provider="riddle",result="wrong"}`); n != 2 {
		t.Errorf("wrong: %v", n)
	}

	// `edgeq check` knows its settings: required while it is in use, and it names the providers.
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(strings.Replace(text, `riddle: {answer: "42"}`, `riddle: {question: "?"}`, 1)), 0o600)
	problems, _, err := Check(path)
	if err != nil || len(problems) != 1 || problems[0].Path != "challenge.riddle.answer" {
		t.Fatalf("Check without the answer: %v %v", err, problems)
	}
	os.WriteFile(path, []byte(strings.Replace(text, "provider: riddle", "provider: sphinx", 1)), 0o600)
	problems, _, _ = Check(path)
	if len(problems) != 1 || problems[0].Path != "challenge.provider" || !strings.Contains(problems[0].Reason, "hcaptcha, pow, riddle, turnstile") {
		t.Fatalf("Check of an unknown provider: %v", problems)
	}
}
