package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/wait"
)

// instance is edgeq running in-process on loopback ports chosen by the kernel.
type instance struct {
	public, admin string // base URLs
	tls           string // the TLS listener's base URL, when the configuration has one (tls_test.go)
	configPath    string
	logs          *lockedBuffer
	reload        chan struct{}
	cancel        context.CancelFunc
	done          chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func configText(originURL, routes string) string {
	return fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 10s
admin:
  listen: "127.0.0.1:0"
  api_key: "test-key"
origin:
  url: %q
log:
  level: info
routes:
%s
`, originURL, routes)
}

func start(t testing.TB, text string) *instance {
	t.Helper()
	return startWith(t, text, nil)
}

// startWith is start with Run's options changed by opts (nil: none).
func startWith(t testing.TB, text string, opts func(*Options)) *instance {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "edgeq.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{configPath: path, logs: &lockedBuffer{}, reload: make(chan struct{}, 1), cancel: cancel, done: make(chan error, 1)}
	started := make(chan struct{})
	o := Options{ConfigPath: path, LogOutput: in.logs, Reload: in.reload, Started: func(public, admin net.Addr) {
		in.public, in.admin = "http://"+public.String(), "http://"+admin.String()
		close(started)
	}, StartedTLS: func(tls net.Addr) { in.tls = "https://" + tls.String() }}
	if opts != nil {
		opts(&o)
	}
	go func() { in.done <- Run(ctx, o) }()
	select {
	case <-started:
	case err := <-in.done:
		t.Fatalf("Run: %v\nlogs:\n%s", err, in.logs)
	}
	t.Cleanup(func() {
		cancel()
		<-in.done
	})
	return in
}

func (in *instance) rewrite(t *testing.T, text string) {
	t.Helper()
	// Write a new file and rename it over the old one, as editors and deploy tools do.
	tmp := in.configPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, in.configPath); err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of one sample line of /metrics, 0 if absent.
func (in *instance) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get(in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if value, ok := strings.CutPrefix(s.Text(), series+" "); ok {
			v, _ := strconv.ParseFloat(value, 64)
			return v
		}
	}
	return 0
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, 15*time.Second, what, cond)
}

func newOrigin(t *testing.T) *httptest.Server {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "origin ", r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	return origin
}

const routeA = `  - { name: route_a, match: "GET /a" }`
const routeB = `  - { name: route_b, match: "GET /b" }`

// A configuration without routes works (a plain proxy) but says so at start.
func TestStart_WarnsWithoutRoutes(t *testing.T) {
	origin := newOrigin(t)
	in := start(t, strings.Replace(configText(origin.URL, ""), "routes:\n", "", 1))
	if !strings.Contains(in.logs.String(), "no routes: every request goes to the origin ungated") {
		t.Fatalf("no warning about the missing routes:\n%s", in.logs)
	}
	if code := get(t, in.public+"/anything"); code != 200 {
		t.Fatalf("ungated request: %d", code)
	}
	with := start(t, configText(origin.URL, routeA))
	if strings.Contains(with.logs.String(), "no routes") {
		t.Fatalf("warned with a route configured:\n%s", with.logs)
	}
}

// Without a signing key file edgeq warns, queues in the file or not (the admin API can add them).
func TestStart_WarnsAboutAnEphemeralSigningKey(t *testing.T) {
	origin := newOrigin(t)
	const warning = "tokens.signing_key_file is empty: an ephemeral signing key is used"
	without := start(t, configText(origin.URL, routeA))
	if !strings.Contains(without.logs.String(), warning) {
		t.Fatalf("no warning about the ephemeral key:\n%s", without.logs)
	}
	key := writeKey(t, t.TempDir(), "signing.pem")
	with := start(t, configText(origin.URL, routeA)+"tokens: {signing_key_file: "+strconv.Quote(key)+"}\n")
	if strings.Contains(with.logs.String(), "ephemeral") {
		t.Fatalf("warned with a key file:\n%s", with.logs)
	}
}

// With turnstile.hostnames empty, a Turnstile response is held to the request's own Host, which the
// client chooses: a response solved on evil.example passes with Host: evil.example. Start-up warns when
// a queue or route of the file uses Turnstile so, and only then.
func TestStart_WarnsWhenTurnstileHostnamesAreEmpty(t *testing.T) {
	origin := newOrigin(t)
	const warning = "turnstile.hostnames is empty"
	keys := "turnstile: {site_key: \"0x4AAAAAAAsite\", secret_key: \"0x4AAAAAAAsecret\"%s}\n"
	route := `  - { name: account, match: "GET /account/", turnstile: true }`
	for _, c := range []struct {
		name, routes, hostnames, queues string
		warns                           bool
	}{
		{"a Turnstile route", route, "", "", true},
		{"a Turnstile queue", routeA, "", "queues: [{id: club, capacity: 1, turnstile: true}]\n", true},
		{"hostnames listed", route, `, hostnames: ["shop.example"]`, "", false},
		{"Turnstile unused", routeA, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := configText(origin.URL, c.routes) + fmt.Sprintf(keys, c.hostnames) + c.queues
			logs := start(t, text).logs.String()
			if strings.Contains(logs, warning) != c.warns {
				t.Fatalf("warned %v, want %v:\n%s", !c.warns, c.warns, logs)
			}
			path := filepath.Join(t.TempDir(), "edgeq.yaml")
			os.WriteFile(path, []byte(text), 0o600)
			problems, warnings, err := Check(path)
			if err != nil || len(problems) > 0 || strings.Contains(strings.Join(warnings, "\n"), warning) != c.warns {
				t.Fatalf("Check: %v %v %q", err, problems, warnings)
			}
		})
	}
}

func TestReload_NewRouteAppearsWithoutRestart(t *testing.T) {
	origin := newOrigin(t)
	in := start(t, configText(origin.URL, routeA))
	get(t, in.public+"/b")
	if v := in.metric(t, `edgeq_http_requests_total{code="200",route="_passthrough"}`); v != 1 {
		t.Fatalf("/b before the reload: passthrough count %v", v)
	}
	in.rewrite(t, configText(origin.URL, routeA+"\n"+routeB))
	eventually(t, "reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == 1 })
	if status := get(t, in.public+"/b"); status != 200 {
		t.Fatalf("/b after the reload: %d", status)
	}
	if v := in.metric(t, `edgeq_http_requests_total{code="200",route="route_b"}`); v != 1 {
		t.Fatalf("/b after the reload is not served by route_b: %v\n%s", v, in.logs)
	}
	if !strings.Contains(in.logs.String(), `"routes":"route_a,route_b"`) {
		t.Fatalf("reload not logged:\n%s", in.logs)
	}
}

func TestReload_BrokenFileIsRefusedAndOldRoutesKeepWorking(t *testing.T) {
	origin := newOrigin(t)
	in := start(t, configText(origin.URL, routeA))
	in.rewrite(t, configText(origin.URL, routeA+"\n  - { name: broken, match: \"GET /b/{x\" }"))
	eventually(t, "refused reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="error"}`) == 1 })
	if status := get(t, in.public+"/a"); status != 200 {
		t.Fatalf("/a after a refused reload: %d", status)
	}
	if v := in.metric(t, `edgeq_http_requests_total{code="200",route="route_a"}`); v != 1 {
		t.Fatalf("route_a stopped serving after a refused reload: %v", v)
	}
	logs := in.logs.String()
	if !strings.Contains(logs, "configuration reload refused") || !strings.Contains(logs, "routes[1].match") {
		t.Fatalf("refusal not logged with the field:\n%s", logs)
	}
	if in.metric(t, `edgeq_config_reload_total{result="ok"}`) != 0 {
		t.Fatal("a broken file counted as a good reload")
	}
	// Fixing the file is picked up.
	in.rewrite(t, configText(origin.URL, routeA+"\n"+routeB))
	eventually(t, "reload after the fix", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == 1 })
}

func TestReload_SignalForcesAReload(t *testing.T) {
	origin := newOrigin(t)
	in := start(t, configText(origin.URL, routeA))
	in.reload <- struct{}{}
	eventually(t, "forced reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == 1 })
}

func TestReload_LogLevelIsHotAndRestartKeysAreIgnored(t *testing.T) {
	origin := newOrigin(t)
	in := start(t, configText(origin.URL, routeA))
	oldPublic := in.public
	next := strings.Replace(configText(origin.URL, routeA), "level: info", "level: warn", 1)
	next = strings.Replace(next, `listen: "127.0.0.1:0"
  shutdown_timeout`, `listen: "127.0.0.1:1"
  shutdown_timeout`, 1)
	next = strings.Replace(next, `api_key: "test-key"`, `api_key: "other-key"`, 1)
	in.rewrite(t, next)
	eventually(t, "reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == 1 })
	logs := in.logs.String()
	if !strings.Contains(logs, "only take effect after a restart") || !strings.Contains(logs, `"keys":"server.listen,admin.api_key"`) {
		t.Fatalf("restart keys not reported:\n%s", logs)
	}
	// Info lines stop: a request no longer writes an access line.
	before := strings.Count(in.logs.String(), `"msg":"request"`)
	get(t, oldPublic+"/a")
	if after := strings.Count(in.logs.String(), `"msg":"request"`); after != before {
		t.Fatalf("access line logged at level warn (%d -> %d)", before, after)
	}
	// The old admin key still works: listeners and keys change only with a restart.
	req, _ := http.NewRequest("GET", in.admin+"/api/none", nil)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("old key after reload: %d, want 404 (authorised, no such endpoint)", resp.StatusCode)
	}
}

func TestShutdown_InFlightRequestCompletes(t *testing.T) {
	arrived := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		time.Sleep(300 * time.Millisecond)
		fmt.Fprint(w, "finished")
	}))
	defer origin.Close()
	in := start(t, configText(origin.URL, routeA))
	result := make(chan string, 1)
	go func() {
		resp, err := http.Get(in.public + "/slow")
		if err != nil {
			result <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- string(body)
	}()
	<-arrived
	in.cancel()
	if err := <-in.done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if got := <-result; got != "finished" {
		t.Fatalf("in-flight request got %q", got)
	}
	in.done <- nil // for the cleanup
	if _, err := http.Get(in.public + "/a"); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

func TestStartupErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := map[string]struct{ path, want string }{
		"invalid file": {write("bad.yaml", "server: {listen: nope}\n"), `configuration: server.listen: "nope" is not host:port`},
		"port in use":  {write("busy.yaml", fmt.Sprintf("server: {listen: %q}\nadmin: {listen: \"127.0.0.1:0\"}\n", busy.Addr())), "server.listen: listen tcp"},
		"bad key file": {write("key.yaml", "tokens: {signing_key_file: "+filepath.Join(dir, "missing.pem")+"}\n"), "tokens.signing_key_file: open"},
		"bad template": {write("tpl.yaml", "pages: {templates_dir: "+dir+"}\n"), "pages: template error.html: "},
		"missing file": {filepath.Join(dir, "nope.yaml"), "nope.yaml"},
	}
	os.WriteFile(filepath.Join(dir, "error.html"), []byte(`{{define "main"}}{{.Nope`), 0o644)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := Run(context.Background(), Options{ConfigPath: c.path, LogOutput: io.Discard})
			var startup *StartupError
			if !errors.As(err, &startup) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want a one-line start-up error containing %q", err, c.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	problems, _, err := Check("../config.example.yaml")
	if err != nil || len(problems) != 0 {
		t.Fatalf("config.example.yaml: %v %v", problems, err)
	}
	problems, _, err = Check("../internal/config/testdata/bad/everything.yaml")
	if err != nil || len(problems) != 6 {
		t.Fatalf("everything.yaml: %v %v", problems, err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "error.html"), []byte(`{{define "main"}}{{if}}{{end}}`), 0o644)
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("pages: {templates_dir: "+dir+"}\ntokens: {signing_key_file: /nonexistent.pem}\n"), 0o644)
	problems, _, err = Check(path)
	if err != nil || len(problems) != 2 || problems[0].Path != "tokens.signing_key_file" || problems[1].Path != "pages.templates_dir" {
		t.Fatalf("preflight problems = %v, %v", problems, err)
	}
	// Each line names its field once.
	for _, p := range problems {
		if line := p.Error(); strings.Count(line, p.Path) != 1 || !strings.HasPrefix(line, p.Path+": ") {
			t.Errorf("problem line %q names its field %d times", line, strings.Count(line, p.Path))
		}
	}
	if _, _, err := Check(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("a missing file must be an error")
	}
}

// Raising capacity in the file serves more visitors, no restart.
func TestReload_RaisingCapacityServesMoreVisitors(t *testing.T) {
	origin := newOrigin(t)
	withQueue := func(capacity int) string {
		return configText(origin.URL, routeA) + fmt.Sprintf("queues:\n  - { id: drop, capacity: %d }\n", capacity)
	}
	in := start(t, withQueue(1))
	post := func(path string, form url.Values) (int, map[string]any) {
		resp, err := http.PostForm(in.public+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	var ids []string
	for range 3 {
		status, body := post("/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}})
		if status != 200 {
			t.Fatalf("assign: %d %v", status, body)
		}
		ids = append(ids, body["request_id"].(string))
	}
	token := func(i int) int {
		status, _ := post("/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {ids[i]}})
		return status
	}
	if token(0) != 200 || token(1) != http.StatusAccepted {
		t.Fatal("capacity 1 should serve exactly the first visitor")
	}
	if c := in.metric(t, `edgeq_queue_capacity{queue="drop"}`); c != 1 {
		t.Fatalf("edgeq_queue_capacity %v, want 1", c)
	}
	in.rewrite(t, withQueue(3))
	eventually(t, "edgeq_queue_capacity follows the file", func() bool {
		return in.metric(t, `edgeq_queue_capacity{queue="drop"}`) == 3
	})
	eventually(t, "second and third visitors served after raising capacity", func() bool { return token(1) == 200 && token(2) == 200 })
	eventually(t, "edgeq_queue_active_tokens reaches 3", func() bool {
		return in.metric(t, `edgeq_queue_active_tokens{queue="drop"}`) == 3
	})
}

// An operator's template replaces the built-in waiting page; a broken one stops check and start-up.
func TestTemplateOverride_WaitingPage(t *testing.T) {
	origin := newOrigin(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wait.html"), []byte(
		`{{define "title"}}{{.Title}}{{end}}{{define "main"}}<p id="custom">Our own queue page: you are number {{.Position}}</p>{{end}}`), 0o644)
	in := start(t, configText(origin.URL, routeA)+"queues:\n  - { id: drop, capacity: 0 }\npages:\n  templates_dir: "+dir+"\n")
	req, _ := http.NewRequest("GET", in.public+"/_edgeq/wait/drop?return=%2F", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `<p id="custom">Our own queue page: you are number 1</p>`) {
		t.Fatalf("override not used: %d\n%s", resp.StatusCode, body)
	}

	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "wait.html"), []byte(`{{define "main"}}{{.Position`), 0o644)
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte("pages:\n  templates_dir: "+broken+"\n"), 0o644)
	problems, _, err := Check(path)
	if err != nil || len(problems) != 1 || problems[0].Path != "pages.templates_dir" || !strings.Contains(problems[0].Reason, "wait.html") {
		t.Fatalf("check: %v %v", problems, err)
	}
	var startup *StartupError
	if err := Run(context.Background(), Options{ConfigPath: path, LogOutput: io.Discard}); !errors.As(err, &startup) ||
		!strings.Contains(err.Error(), "wait.html") {
		t.Fatalf("start-up with a broken override: %v", err)
	}
}
