package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgeq/edgeq/internal/testutil/testcert"
	"github.com/edgeq/edgeq/server"
)

// exported is what a running edgeq's /metrics shows: the type of each family and, for each sample
// name (a histogram's _bucket, _sum and _count apart), the label names its samples carry.
type exported struct {
	types   map[string]string          // family -> counter | gauge | histogram | summary | untyped
	samples map[string]map[string]bool // sample name -> label names
}

// family returns the family a sample name belongs to and its type.
func (e exported) family(sample string) (string, string) {
	if typ, ok := e.types[sample]; ok {
		return sample, typ
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(sample, suffix); ok {
			if typ := e.types[base]; typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
				return base, typ
			}
		}
	}
	return "", ""
}

var (
	typeLine   = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+\S+`)
	labelName  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
)

func parseExposition(t *testing.T, r io.Reader) exported {
	t.Helper()
	e := exported{types: map[string]string{}, samples: map[string]map[string]bool{}}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if m := typeLine.FindStringSubmatch(line); m != nil {
			e.types[m[1]] = m[2]
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unparsable /metrics line %q", line)
		}
		labels := e.samples[m[1]]
		if labels == nil {
			labels = map[string]bool{}
			e.samples[m[1]] = labels
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return e
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

// runningEdgeqMetrics runs the real edgeq (server.Run) in this process with a queue, a product, a
// stock-admission route and Turnstile configured, makes the requests that give every vector family
// its first series (a proxied request, a join, a token, an admission), and returns its /metrics.
// Families that exist before any event (gauges, pre-initialised labels) need nothing.
func runningEdgeqMetrics(t *testing.T) exported {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "origin ", r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	// A TLS listener, for the certificates' expiry.
	certFile, keyFile := testcert.NewCA(t).Issue(t, testcert.Options{}).Files(t, t.TempDir(), "edge")
	cfg := fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 5s
  tls: {listen: "127.0.0.1:0", certificates: [{cert_file: %[2]q, key_file: %[3]q}]}
admin: {listen: "127.0.0.1:0", api_key: "deploy-test-key"}
origin: {url: %[1]q, timeout: 5s}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
# Configured, so its counter is registered; nothing here asks for a check, so it is never called.
turnstile: {site_key: "deploy-test-site", secret_key: "deploy-test-secret", verify_url: "%[1]s/siteverify"}
queues:
  - {id: sale, capacity: 10, token_ttl: 10m}
products:
  - {id: "1", stock: 5, per_user_limit: 1, name: "Sneaker"}
routes:
  - {name: product_pages, match: "GET /products/{id}", queue: sale}
  - name: checkout
    match: "POST /checkout/{product}"
    queue: sale
    admission: {type: stock, product: "path:product", user: token}
  - {name: news, match: "GET /news", on_store_error: open}
`, origin.URL, certFile, keyFile)
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addrs := make(chan [2]string, 1)
	go func() {
		done <- server.Run(ctx, server.Options{ConfigPath: path, LogOutput: logs, Started: func(public, admin net.Addr) {
			addrs <- [2]string{"http://" + public.String(), "http://" + admin.String()}
		}})
	}()
	var public, admin string
	select {
	case a := <-addrs:
		public, admin = a[0], a[1]
	case err := <-done:
		cancel()
		t.Fatalf("edgeq did not start: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edgeq stopped with %v", err)
		}
	})
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(method, target string, body url.Values, header http.Header) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, target, strings.NewReader(body.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		data, _ := io.ReadAll(resp.Body)
		json.Unmarshal(data, &out)
		return resp.StatusCode, out
	}

	if status, _ := call("GET", public+"/news", nil, nil); status != http.StatusOK {
		t.Fatalf("GET /news: %d", status)
	}
	status, joined := call("POST", public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {"sale"}}, nil)
	requestID, _ := joined["request_id"].(string)
	if status != http.StatusOK || requestID == "" {
		t.Fatalf("assign_queue_pos: %d %v\n%s", status, joined, logs)
	}
	var accessToken string
	deadline := time.Now().Add(15 * time.Second)
	for accessToken == "" {
		status, issued := call("POST", public+"/_edgeq/generate_token", url.Values{"queue_id": {"sale"}, "request_id": {requestID}}, nil)
		switch {
		case status == http.StatusOK:
			accessToken, _ = issued["access_token"].(string)
		case status != http.StatusAccepted || time.Now().After(deadline):
			t.Fatalf("generate_token: %d %v", status, issued)
		default:
			time.Sleep(50 * time.Millisecond) // not served yet: the inlet ticks every 250 ms
		}
	}
	if status, body := call("POST", public+"/checkout/1", url.Values{}, http.Header{"Authorization": {"Bearer " + accessToken}}); status != http.StatusOK {
		t.Fatalf("checkout with a token: %d %v\n%s", status, body, logs)
	}

	// The queue gauges appear once this replica's snapshot of the queue is loaded.
	for {
		resp, err := client.Get(admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		e := parseExposition(t, resp.Body)
		resp.Body.Close()
		if e.samples["edgeq_queue_waiting"] != nil {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("edgeq_queue_waiting never appeared on /metrics")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reference is one PromQL expression of the dashboard or the alert rules, with where it is.
type reference struct {
	where  string
	expr   string
	legend string // a panel's legendFormat or an alert's annotations: {{label}} / $labels.label uses
}

type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Datasource map[string]any  `json:"datasource"`
			Query      json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		Datasource   map[string]any `json:"datasource"`
		Expr         string         `json:"expr"`
		LegendFormat string         `json:"legendFormat"`
		RefID        string         `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("grafana/edgeq-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana/edgeq-dashboard.json: %v", err)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// variableQuery returns the query of a Grafana query variable, stored either as a string or as
// {"query": "..."}.
func variableQuery(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	json.Unmarshal(raw, &o)
	return o.Query
}

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadAlerts(t *testing.T) alertRules {
	t.Helper()
	data, err := os.ReadFile("prometheus/edgeq-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true) // a misspelt key (anotations:) would otherwise vanish silently
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("prometheus/edgeq-alerts.yaml: %v", err)
	}
	return rules
}

// references gathers every PromQL expression of the dashboard (panels and variables) and the alerts.
func references(t *testing.T) []reference {
	t.Helper()
	var refs []reference
	d := loadDashboard(t)
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			refs = append(refs, reference{where: fmt.Sprintf("dashboard panel %q target %s", p.Title, tg.RefID), expr: tg.Expr, legend: tg.LegendFormat})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			refs = append(refs, reference{where: fmt.Sprintf("dashboard variable %s", v.Name), expr: variableQuery(v.Query)})
		}
	}
	for _, g := range loadAlerts(t).Groups {
		for _, r := range g.Rules {
			var text []string
			for _, a := range r.Annotations {
				text = append(text, a)
			}
			refs = append(refs, reference{where: fmt.Sprintf("alert %s", r.Alert+r.Record), expr: r.Expr, legend: strings.Join(text, "\n")})
		}
	}
	return refs
}

var (
	// Names of edgeq's own registry: its edgeq_ families and the Go and process collectors it adds.
	metricName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_:.$])((?:edgeq|go|process)_[A-Za-z0-9_:]*)(\s*\{[^}]*\})?`)
	// PromQL string literals, removed before names are looked for (a label value is not a metric).
	stringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matcherLabel  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping      = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	labelValues   = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
	counterFunc   = regexp.MustCompile(`\b(rate|irate|increase)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	gaugeFunc     = regexp.MustCompile(`\b(deriv|delta|idelta|changes|predict_linear)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	legendLabel   = regexp.MustCompile(`\{\{\s*\$?labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}|\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}|\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// targetLabels are the labels Prometheus attaches to every scraped series: instance and job, and
// whatever the scrape job in prometheus/scrape-config.yaml relabels into target labels.
func targetLabels(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("prometheus/scrape-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName        string `yaml:"job_name"`
			RelabelConfigs []struct {
				TargetLabel string `yaml:"target_label"`
			} `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{"instance": true, "job": true}
	for _, sc := range cfg.ScrapeConfigs {
		for _, rc := range sc.RelabelConfigs {
			if rc.TargetLabel != "" && !strings.HasPrefix(rc.TargetLabel, "__") {
				labels[rc.TargetLabel] = true
			}
		}
	}
	return labels
}

func TestDashboardAndAlerts_UseOnlyMetricsARunningEdgeqExports(t *testing.T) {
	refs := references(t)
	if len(refs) == 0 {
		t.Fatal("no expressions found in the dashboard and the alerts")
	}
	e := runningEdgeqMetrics(t)
	scrapeLabels := targetLabels(t)
	used := map[string]bool{}

	for _, ref := range refs {
		stripped := stringLiteral.ReplaceAllString(ref.expr, `""`)
		// Every name and the labels its matchers use.
		allowed := maps.Clone(scrapeLabels)
		for _, m := range metricName.FindAllStringSubmatch(stripped, -1) {
			name := m[1]
			labels, ok := e.samples[name]
			if !ok {
				if typ := e.types[name]; typ == "histogram" || typ == "summary" {
					t.Errorf("%s: %s is a %s, not a series; use %s_bucket, _sum or _count", ref.where, name, typ, name)
				} else {
					t.Errorf("%s: %s is not exported by a running edgeq (or this test does not make the event that creates its first series)", ref.where, name)
				}
				continue
			}
			family, _ := e.family(name)
			used[family] = true
			for l := range labels {
				allowed[l] = true
			}
			for _, l := range matcherLabel.FindAllStringSubmatch(m[2], -1) {
				if !labels[l[1]] && !scrapeLabels[l[1]] {
					t.Errorf("%s: %s has no label %q (it has %s)", ref.where, name, l[1], keys(labels))
				}
			}
		}
		// Functions for counters on counters, for gauges on gauges.
		for _, m := range counterFunc.FindAllStringSubmatch(stripped, -1) {
			if _, typ := e.family(m[2]); typ != "" && typ != "counter" && typ != "histogram" && typ != "summary" {
				t.Errorf("%s: %s() on %s, a %s", ref.where, m[1], m[2], typ)
			}
		}
		for _, m := range gaugeFunc.FindAllStringSubmatch(stripped, -1) {
			if _, typ := e.family(m[2]); typ != "" && typ != "gauge" {
				t.Errorf("%s: %s() on %s, a %s (meant for gauges)", ref.where, m[1], m[2], typ)
			}
		}
		// by (...) and without (...) name labels the series have.
		var grouped []string
		for _, g := range grouping.FindAllStringSubmatch(stripped, -1) {
			for l := range strings.SplitSeq(g[1], ",") {
				l = strings.TrimSpace(l)
				if l == "" {
					continue
				}
				grouped = append(grouped, l)
				if !allowed[l] {
					t.Errorf("%s: groups by %q, which none of its series has (%s)", ref.where, l, keys(allowed))
				}
			}
		}
		// A legend or an alert text can only show labels that survive the aggregation.
		for _, m := range legendLabel.FindAllStringSubmatch(ref.legend, -1) {
			l := m[1] + m[2] + m[3]
			if (len(grouped) > 0 && !slices.Contains(grouped, l)) || (len(grouped) == 0 && !allowed[l]) {
				t.Errorf("%s: shows label %q, which the expression's result does not have", ref.where, l)
			}
		}
		for _, m := range labelValues.FindAllStringSubmatch(ref.expr, -1) {
			if labels, ok := e.samples[m[1]]; !ok || !labels[m[2]] {
				t.Errorf("%s: label_values(%s, %s): no such series and label", ref.where, m[1], m[2])
			}
		}
	}

	var unused []string
	for family := range e.types {
		if strings.HasPrefix(family, "edgeq_") && !used[family] {
			unused = append(unused, family)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Logf("edgeq families neither the dashboard nor the alerts use: %s", strings.Join(unused, ", "))
	}
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// balanced reports whether brackets, braces and parentheses nest properly outside string literals.
func balanced(expr string) bool {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for _, r := range stringLiteral.ReplaceAllString(expr, `""`) {
		switch r {
		case '(', '[', '{':
			stack = append(stack, r)
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0
}

var (
	grafanaVariable = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)
	promDuration    = regexp.MustCompile(`^(\d+[smhdwy])+$`)
	runbook         = regexp.MustCompile(`^docs/operations\.md#([a-z0-9-]+)$`)
	heading         = regexp.MustCompile(`(?m)^(#{1,6})\s+(.+?)\s*$`)
)

// anchor is the id GitHub gives a Markdown heading.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGrafana_DashboardIsImportable(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: datasource variables in panels need 36 or later", d.SchemaVersion)
	}
	variables := map[string]string{}
	for _, v := range d.Templating.List {
		variables[v.Name] = v.Type
	}
	dsVariable := ""
	for name, typ := range variables {
		if typ == "datasource" {
			dsVariable = name
		}
	}
	if dsVariable == "" {
		t.Fatal("no datasource variable: the dashboard would be tied to one Prometheus")
	}
	for _, want := range []string{"queue", "route"} {
		if variables[want] != "query" {
			t.Errorf("no %s query variable", want)
		}
	}
	wantUID := "${" + dsVariable + "}"
	for _, v := range d.Templating.List {
		if uid, _ := v.Datasource["uid"].(string); v.Type == "query" && uid != wantUID {
			t.Errorf("variable %s: datasource uid %q, want %s", v.Name, uid, wantUID)
		}
	}
	ids := map[int]string{}
	for _, p := range allPanels(d.Panels) {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if uid, _ := p.Datasource["uid"].(string); uid != wantUID {
			t.Errorf("panel %q: datasource uid %q, want %s", p.Title, uid, wantUID)
		}
		for _, tg := range p.Targets {
			if uid, _ := tg.Datasource["uid"].(string); tg.Datasource != nil && uid != wantUID {
				t.Errorf("panel %q target %s: datasource uid %q, want %s", p.Title, tg.RefID, uid, wantUID)
			}
			if strings.TrimSpace(tg.Expr) == "" || !balanced(tg.Expr) {
				t.Errorf("panel %q target %s: empty or unbalanced expression %q", p.Title, tg.RefID, tg.Expr)
			}
			for _, m := range grafanaVariable.FindAllStringSubmatch(tg.Expr, -1) {
				if _, ok := variables[m[1]]; !ok && !strings.HasPrefix(m[1], "__") {
					t.Errorf("panel %q: uses $%s, which the dashboard does not define", p.Title, m[1])
				}
			}
		}
	}
}

func TestAlerts_EveryRuleIsCompleteAndHasARunbookSection(t *testing.T) {
	rules := loadAlerts(t)
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	runbookHeadings := map[string]bool{} // "### EdgeqSomething" headings: the runbook's alert sections
	for _, m := range heading.FindAllStringSubmatch(string(ops), -1) {
		anchors[anchor(m[2])] = true
		if strings.HasPrefix(m[2], "Edgeq") && !strings.Contains(m[2], " ") {
			runbookHeadings[m[2]] = true
		}
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue // a recording rule
			}
			if alerts[r.Alert] {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			alerts[r.Alert] = true
			if strings.TrimSpace(r.Expr) == "" || !balanced(r.Expr) {
				t.Errorf("alert %s: empty or unbalanced expr", r.Alert)
			}
			if r.For != "" && !promDuration.MatchString(r.For) {
				t.Errorf("alert %s: for %q is not a Prometheus duration", r.Alert, r.For)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
			m := runbook.FindStringSubmatch(r.Annotations["runbook_url"])
			if m == nil {
				t.Errorf("alert %s: runbook_url %q does not point into docs/operations.md", r.Alert, r.Annotations["runbook_url"])
			} else if !anchors[m[1]] {
				t.Errorf("alert %s: docs/operations.md has no section #%s", r.Alert, m[1])
			}
		}
	}
	for h := range runbookHeadings {
		if !alerts[h] {
			t.Errorf("docs/operations.md has a runbook section %s for an alert the rules do not define", h)
		}
	}
}
