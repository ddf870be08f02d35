package config

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestLoad_GoodFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	files = append(files, "../../config.example.yaml")
	if len(files) < 5 {
		t.Fatalf("expected the good files and config.example.yaml, found %v", files)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cfg, err := Load(file)
			if err != nil {
				t.Fatalf("Load(%s):\n%v", file, err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate after Load: %v", err)
			}
		})
	}
}

// Each bad file lists the problems it must produce in "# want:" comment lines; every one must be
// reported (as a prefix of a problem line), and nothing else may be.
func TestLoad_BadFilesReportEveryProblem(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 6 {
		t.Fatalf("expected the bad files, found %v", files)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want := wantLines(t, file)
			_, err := Load(file)
			if err == nil {
				t.Fatalf("Load(%s) succeeded, want problems:\n%s", file, strings.Join(want, "\n"))
			}
			got := strings.Split(err.Error(), "\n")
			for _, w := range want {
				if !slices.ContainsFunc(got, func(line string) bool { return strings.HasPrefix(line, w) }) {
					t.Errorf("missing problem %q\ngot:\n%s", w, err)
				}
			}
			if len(got) != len(want) {
				t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), err)
			}
		})
	}
}

// A bad ledger URL is refused without repeating it (it may hold a password), for each way it can be wrong.
func TestLedgerURL(t *testing.T) {
	for raw, want := range map[string]string{
		"": "",
		"postgres://edgeq:pw@db.internal:5432/edgeq?sslmode=require": "",
		"postgresql://db.internal/edgeq":                             "",
		"postgres:///edgeq?host=/run/postgresql":                     "",
		"mysql://edgeq:pw@db/edgeq":                                  "must start with postgres:// or postgresql://",
		"postgres://edgeq:pw@db.internal":                            "names no database",
		"postgres:///edgeq":                                          "names no host",
		"postgres://edgeq:pw@db\x7f:5432/x":                          "is not a URL",
	} {
		cfg := Default()
		cfg.Ledger.PostgresURL = raw
		c := &check{}
		cfg.checkLedger(c)
		got := ""
		for _, p := range c.problems {
			got += p.Error()
		}
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("%q: %q, want %q", raw, got, want)
		}
		if strings.Contains(got, "pw") {
			t.Errorf("%q: the problem repeats the password: %s", raw, got)
		}
	}
}

func wantLines(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if w, ok := strings.CutPrefix(s.Text(), "# want: "); ok {
			want = append(want, w)
		}
	}
	if len(want) == 0 {
		t.Fatalf("%s has no # want: lines", file)
	}
	return want
}

func TestLoad_DefaultsForEveryKey(t *testing.T) {
	cfg, err := Load("testdata/good/empty.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Fatalf("an empty file must give Default():\n got %+v\nwant %+v", cfg, Default())
	}
	if cfg.Server.Listen != ":8080" || cfg.Server.Prefix != "/_edgeq" || cfg.Admin.Listen != "127.0.0.1:9090" ||
		cfg.Origin.Timeout != 30*time.Second || cfg.Redis.KeyPrefix != "edgeq" || !cfg.Redis.Embedded() ||
		cfg.Tokens.Leeway != 5*time.Second || cfg.Turnstile.ClearanceTTL != 30*time.Minute ||
		cfg.Limits.StatusPerIPPerMinute != 120 || cfg.StoreHealth.SuccessesToRecover != 5 || cfg.Log.Format != "json" {
		t.Fatalf("defaults differ from the documented ones (config.example.yaml): %+v", cfg)
	}
}

func TestLoad_ListItemDefaults(t *testing.T) {
	cfg, err := Load("testdata/good/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	room := cfg.QueueByID("auction_room")
	if room.Title != "auction_room" || room.Turnstile || room.TokenTTL != 20*time.Minute || room.PositionExpiry != 0 {
		t.Errorf("auction_room = %+v", room)
	}
	drop := cfg.QueueByID("drop")
	if drop.Capacity != 0 || drop.TokenTTL != 10*time.Minute || drop.PositionExpiry != 5*time.Minute {
		t.Errorf("drop: explicit capacity 0 must stay 0 and unset keys take defaults: %+v", drop)
	}
	checkout := cfg.Routes[0]
	if checkout.OnStoreError != "closed" || checkout.Admission.User != "token" ||
		!slices.Equal(checkout.Admission.ReleaseOn, []string{"5xx", "429", "error"}) {
		t.Errorf("checkout = %+v", checkout)
	}
	if cfg.Routes[3].Admission.Type != "" || !slices.Equal(cfg.Routes[3].Admission.ReleaseOn, []string{"5xx", "error"}) {
		t.Errorf("browse = %+v", cfg.Routes[3])
	}
}

func TestLoad_EnvironmentOverridesNestedKeys(t *testing.T) {
	t.Setenv("EDGEQ_REDIS_ADDR", "10.1.1.1:6380")
	t.Setenv("EDGEQ_ADMIN_API_KEY", "from-env")
	t.Setenv("EDGEQ_ORIGIN_URL", "http://origin.internal:8081")
	t.Setenv("EDGEQ_SERVER_TRUSTED_PROXIES", "10.0.0.0/8, 172.16.0.0/12")
	t.Setenv("EDGEQ_STORE_HEALTH_COOLDOWN", "45s")
	t.Setenv("EDGEQ_QUEUES", `[{"id": "drop", "capacity": 7}]`)
	cfg, err := Load("testdata/good/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Addr != "10.1.1.1:6380" {
		t.Errorf("redis.addr = %q", cfg.Redis.Addr)
	}
	if cfg.Admin.APIKey != "from-env" {
		t.Errorf("admin.api_key = %q", cfg.Admin.APIKey)
	}
	if cfg.Origin.URL != "http://origin.internal:8081" {
		t.Errorf("origin.url = %q", cfg.Origin.URL)
	}
	if !slices.Equal(cfg.Server.TrustedProxies, []string{"10.0.0.0/8", "172.16.0.0/12"}) {
		t.Errorf("server.trusted_proxies = %q", cfg.Server.TrustedProxies)
	}
	if cfg.StoreHealth.Cooldown != 45*time.Second {
		t.Errorf("store_health.cooldown = %s", cfg.StoreHealth.Cooldown)
	}
	if len(cfg.Queues) != 1 || cfg.Queues[0].Capacity != 7 || cfg.Queues[0].TokenTTL != 10*time.Minute {
		t.Errorf("queues = %+v", cfg.Queues)
	}
	// Keys the environment does not set keep the file's values.
	if cfg.Server.Prefix != "/queue" || cfg.Origin.Timeout != 10*time.Second {
		t.Errorf("file values lost: prefix %q timeout %s", cfg.Server.Prefix, cfg.Origin.Timeout)
	}
}

func TestLoad_EnvironmentWithoutFile(t *testing.T) {
	t.Setenv("EDGEQ_ORIGIN_URL", "http://10.0.0.5:80")
	t.Setenv("EDGEQ_LOG_LEVEL", "warn")
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Origin.URL != "http://10.0.0.5:80" || cfg.Log.Level != "warn" {
		t.Fatalf("got origin %q level %q", cfg.Origin.URL, cfg.Log.Level)
	}
}

func TestLoad_BadEnvironmentValueIsReportedWithItsKey(t *testing.T) {
	t.Setenv("EDGEQ_LIMITS_JOIN_PER_IP_PER_MINUTE", "lots")
	t.Setenv("EDGEQ_ROUTES", "[not: [closed")
	_, err := Load("testdata/good/minimal.yaml")
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{`limits.join_per_ip_per_minute: must be an integer, not "lots"`, "routes: must be a YAML or JSON list"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestLoad_MissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if err == nil || !strings.Contains(err.Error(), "does-not-exist.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"redis.addr":             "EDGEQ_REDIS_ADDR",
		"admin.api_key":          "EDGEQ_ADMIN_API_KEY",
		"turnstile.secret_key":   "EDGEQ_TURNSTILE_SECRET_KEY",
		"store_health.cooldown":  "EDGEQ_STORE_HEALTH_COOLDOWN",
		"server.trusted_proxies": "EDGEQ_SERVER_TRUSTED_PROXIES",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestRestartKeys(t *testing.T) {
	old := Default()
	next := Default()
	next.Log.Level = "debug"
	next.Queues = []Queue{{ID: "q", Capacity: 5}}
	next.Routes = []Route{{Name: "r", Match: "/r"}}
	if got := RestartKeys(old, next); len(got) != 0 {
		t.Fatalf("hot keys reported as needing a restart: %v", got)
	}
	next.Server.Listen = ":9999"
	next.Redis.Addr = "127.0.0.1:6379"
	next.Tokens.SigningKeyFile = "/etc/edgeq/key.pem"
	next.Log.Format = "text"
	want := []string{"log.format", "redis.addr", "server.listen", "tokens.signing_key_file"}
	got := RestartKeys(old, next)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("RestartKeys = %v, want %v", got, want)
	}
}

func TestFieldSources(t *testing.T) {
	good := map[string]FieldSource{
		"path:product":        {"path", "product"},
		"json:items.0.sku":    {"json", "items.0.sku"},
		"header:X-Customer":   {"header", "X-Customer"},
		"cookie:shop_session": {"cookie", "shop_session"},
		"form:amount":         {"form", "amount"},
		"query:id":            {"query", "id"},
	}
	for text, want := range good {
		got, err := ParseFieldSource(text)
		if err != nil || got != want {
			t.Errorf("ParseFieldSource(%q) = %v, %v", text, got, err)
		}
	}
	for _, text := range []string{"", "product", "body:x", "path:", "path:a-b", "json:a..b", "header:X Y", "cookie:"} {
		if _, err := ParseFieldSource(text); err == nil {
			t.Errorf("ParseFieldSource(%q) succeeded", text)
		}
	}
}

func TestUserSources(t *testing.T) {
	good := map[string]UserSource{
		"token":          {FromToken: true},
		"visitor":        {FromVisitor: true},
		"cookie:session": {Field: FieldSource{"cookie", "session"}},
		"header:X-User":  {Field: FieldSource{"header", "X-User"}},
		"json:email":     {Field: FieldSource{"json", "email"}},
	}
	for text, want := range good {
		got, err := ParseUserSource(text)
		if err != nil || got != want {
			t.Errorf("ParseUserSource(%q) = %+v, %v", text, got, err)
		}
	}
	for _, text := range []string{"", "Visitor", "visitors", "ip", "path:user", "visitor:id"} {
		if _, err := ParseUserSource(text); err == nil {
			t.Errorf("ParseUserSource(%q) succeeded", text)
		}
	}
	// Routes of either admission kind may count their users by visitor id, without a queue (a visitor
	// id is not a place in line); only such routes use one.
	file := filepath.Join(t.TempDir(), "visitor.yaml")
	os.WriteFile(file, []byte(`origin: {url: "http://127.0.0.1:9"}
routes:
  - {name: buy, match: "POST /buy/{p}", admission: {type: stock, product: "path:p", user: visitor}}
  - {name: bid, match: "POST /bid/{a}", admission: {type: bid, auction: "path:a", amount: "form:amount", user: visitor}}
  - {name: page, match: "GET /p/{p}"}
`), 0o600)
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		if got := cfg.Routes[i].UsesVisitor(); got != want {
			t.Errorf("routes[%d].UsesVisitor() = %v", i, got)
		}
	}
}

func TestReleaseOutcomes(t *testing.T) {
	cases := []struct {
		text    string
		status  int
		failure Failure
		want    bool
	}{
		{"5xx", 503, Answered, true},
		{"5xx", 404, Answered, false},
		{"5xx", 0, NotSent, false},
		{"5xx", 0, NoAnswer, false},
		{"429", 429, Answered, true},
		{"429", 428, Answered, false},
		{"error", 0, NotSent, true},
		{"error", 0, NoAnswer, false}, // the shop may have acted on it: timeout, not error
		{"error", 500, Answered, false},
		{"timeout", 0, NoAnswer, true},
		{"timeout", 0, NotSent, false},
		{"timeout", 504, Answered, false},
	}
	for _, c := range cases {
		o, err := ParseReleaseOutcome(c.text)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Matches(c.status, c.failure); got != c.want {
			t.Errorf("%s.Matches(%d, %v) = %v", c.text, c.status, c.failure, got)
		}
	}
	for _, text := range []string{"6xx", "0xx", "99", "600", "5XX", "err", "", "answer:", "answer:!", "answer:!a..b"} {
		if _, err := ParseReleaseOutcome(text); err == nil {
			t.Errorf("ParseReleaseOutcome(%q) succeeded", text)
		}
	}
	// answer: and answer:! read the shop's answer (web.Outcome.Matches), never the status alone.
	for text, want := range map[string]ReleaseOutcome{
		"answer:data.$field.errorCode": {Answer: []string{"data", "$field", "errorCode"}},
		"answer:!data.$field":          {Answer: []string{"data", "$field"}, Absent: true},
	} {
		o, err := ParseReleaseOutcome(text)
		if err != nil || !slices.Equal(o.Answer, want.Answer) || o.Absent != want.Absent {
			t.Errorf("ParseReleaseOutcome(%q) = %+v, %v; want %+v", text, o, err, want)
		}
		if o.Matches(500, Answered) || o.Matches(0, NotSent) || o.Matches(0, NoAnswer) {
			t.Errorf("%s matched a status", text)
		}
	}
}

func TestProblemsAndOneLine(t *testing.T) {
	_, err := Load("testdata/bad/missing_origin.yaml")
	p := Problems(err)
	if len(p) != 1 || p[0].Path != "origin.url" {
		t.Fatalf("Problems = %+v", p)
	}
	_, err = Load("testdata/bad/everything.yaml")
	if line := OneLine(err); strings.Contains(line, "\n") || !strings.Contains(line, "; server.listne: unknown key") {
		t.Fatalf("OneLine = %q", line)
	}
}

// config.example.yaml is the reference of every key: each key of Config and of the registered
// sections (including the keys of list items) must appear in it.
func TestExampleListsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(t reflect.Type, node any, path string)
	walk = func(typ reflect.Type, node any, path string) {
		switch typ.Kind() {
		case reflect.Struct:
			if typ == durationType || typ == timeType {
				return
			}
			m, _ := node.(map[string]any)
			if typ == challengeType {
				// The providers' sections (challenge_test.go links the providers in).
				for name, settings := range defaultChallenge().Settings {
					if child, ok := m[name]; ok {
						walk(reflect.TypeOf(settings).Elem(), child, join(path, name))
					} else {
						missing = append(missing, join(path, name))
					}
				}
			}
			for i := range typ.NumField() {
				key := keyOf(typ.Field(i))
				if key == "" {
					continue
				}
				child, ok := m[key]
				if !ok {
					missing = append(missing, join(path, key))
					continue
				}
				walk(typ.Field(i).Type, child, join(path, key))
			}
		case reflect.Slice:
			if typ.Elem().Kind() != reflect.Struct {
				return
			}
			items, _ := node.([]any)
			if len(items) == 0 {
				missing = append(missing, path+"[0]")
				return
			}
			// Every field must appear in at least one item (routes show stock and bid fields apart).
			merged := map[string]any{}
			for _, item := range items {
				m, _ := item.(map[string]any)
				for k, v := range m {
					if old, ok := merged[k].(map[string]any); ok {
						if nm, ok := v.(map[string]any); ok {
							for kk, vv := range nm {
								old[kk] = vv
							}
							continue
						}
					}
					merged[k] = v
				}
			}
			walk(typ.Elem(), merged, path+"[]")
		}
	}
	walk(reflect.TypeFor[Config](), tree, "")
	// The registered sections (kinds_test.go links the kinds in).
	for _, s := range sectionSpecs() {
		if child, ok := tree[s.Name]; ok {
			walk(reflect.TypeOf(s.New()).Elem(), child, s.Name)
		} else {
			missing = append(missing, s.Name)
		}
	}
	if len(sectionSpecs()) == 0 {
		t.Fatal("no section is registered: the kinds are not linked into this test")
	}
	if len(missing) > 0 {
		t.Fatalf("config.example.yaml lacks keys: %v", missing)
	}
}

// TestAdmissionKinds_RoutesAreCheckedByTheKindsDeclaredFields: route validation knows a kind only by
// its config.AdmissionKinds entry, so a kind added there (a raffle entry naming its drawing with the
// product field, with no value) is checked like stock and bid.
func TestAdmissionKinds_RoutesAreCheckedByTheKindsDeclaredFields(t *testing.T) {
	saved := AdmissionKinds
	t.Cleanup(func() { AdmissionKinds = saved })
	AdmissionKinds = append(slices.Clip(AdmissionKinds), AdmissionKind{Type: "entry", Owner: "product"})
	file := filepath.Join(t.TempDir(), "entry.yaml")
	write := func(admission string) error {
		t.Helper()
		yaml := "origin:\n  url: http://127.0.0.1:9\nroutes:\n  - name: enter\n    match: POST /draw/{id}\n    admission:\n" + admission
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(file)
		return err
	}
	if err := write("      type: entry\n      product: path:id\n      user: header:X-User\n"); err != nil {
		t.Fatalf("a route of the added kind with its fields: %v", err)
	}
	for admission, want := range map[string]string{
		"      type: entry\n      user: header:X-User\n":                                                 `routes[0].admission.product: required for entry admission`,
		"      type: entry\n      product: path:id\n      amount: form:a\n      user: header:X-User\n":   `routes[0].admission.amount: not used by "entry" admission`,
		"      type: entry\n      product: path:nope\n      user: header:X-User\n":                       `routes[0].admission.product: "path:nope": the pattern "POST /draw/{id}" has no wildcard {nope}`,
		"      type: entry\n      product: path:id\n      orphans: release\n      user: header:X-User\n": `routes[0].admission.orphans: release applies to stock admissions`,
		"      type: raffle\n      product: path:id\n":                                                   `routes[0].admission.type: "raffle" is not one of stock, bid, entry`,
	} {
		err := write(admission)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %s", admission, err, want)
		}
	}
}

// Pools take their defaults item by item, and a route without an origin uses origin:.
func TestLoad_PoolDefaults(t *testing.T) {
	cfg, err := Load("testdata/good/origins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	catalogue, checkout := cfg.PoolByName("catalogue"), cfg.PoolByName("checkout")
	if catalogue == nil || checkout == nil {
		t.Fatalf("pools: %+v", cfg.Origins)
	}
	want := PoolHealth{Path: "/healthz?deep=0", Interval: 2 * time.Second, Timeout: 500 * time.Millisecond, UnhealthyAfter: 3, HealthyAfter: 2}
	if catalogue.Health != want || catalogue.Passive != (PoolPassive{FailAfter: 3, DownFor: 30 * time.Second}) {
		t.Errorf("catalogue: %+v", *catalogue)
	}
	if checkout.LB != LBFirst || checkout.Passive.FailAfter != 0 || checkout.Health.Interval != 5*time.Second {
		t.Errorf("checkout: %+v", *checkout)
	}
	if cfg.Routes[3].Origin != "" || cfg.PoolByName(DefaultPool) != nil {
		t.Errorf("routes[3].origin = %q", cfg.Routes[3].Origin)
	}
}

// Pools are reloaded with the routes that name them: neither is a restart key.
func TestRestartKeys_PoolsAreHot(t *testing.T) {
	old, next := Default(), Default()
	next.Origins = []Pool{{Name: "shop", URLs: []string{"http://10.0.0.2:3000"}, LB: LBFirst}}
	next.Routes = []Route{{Name: "r", Match: "/r", Origin: "shop"}}
	if got := RestartKeys(old, next); len(got) != 0 {
		t.Fatalf("RestartKeys = %v", got)
	}
	if got := WithHot(old, next); len(got.Origins) != 1 || got.Routes[0].Origin != "shop" {
		t.Fatalf("WithHot: %+v %+v", got.Origins, got.Routes)
	}
}

// TestRegisterAdmissionKind_OwnFields: a kind that names a route field of its own (a raffle's drawing)
// has it decoded into Admission.Own and checked like the shared fields; other kinds' routes may not
// set it, and a key no kind reads stays unknown.
func TestRegisterAdmissionKind_OwnFields(t *testing.T) {
	saved := AdmissionKinds
	t.Cleanup(func() { AdmissionKinds = saved })
	AdmissionKinds = slices.Clip(AdmissionKinds)
	RegisterAdmissionKind(AdmissionKind{Type: "draw", Owner: "drawing", Fields: []string{"drawing"}})
	file := filepath.Join(t.TempDir(), "draw.yaml")
	load := func(admission string) (*Config, error) {
		t.Helper()
		yaml := "origin:\n  url: http://127.0.0.1:9\nroutes:\n  - name: enter\n    match: POST /draw/{id}\n    admission:\n" + admission
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(file)
	}
	cfg, err := load("      type: draw\n      drawing: path:id\n      user: header:X-User\n")
	if err != nil {
		t.Fatalf("a route of the registered kind with its own field: %v", err)
	}
	if got := cfg.Routes[0].Admission.Own["drawing"]; got != "path:id" {
		t.Fatalf("admission.drawing decoded as %q, want path:id", got)
	}
	if owner, value := cfg.Routes[0].Admission.Sources(); owner != "path:id" || value != "" {
		t.Fatalf("sources %q, %q", owner, value)
	}
	for admission, want := range map[string]string{
		"      type: draw\n      user: header:X-User\n":                                                  `routes[0].admission.drawing: required for draw admission`,
		"      type: draw\n      drawing: path:nope\n      user: header:X-User\n":                        `routes[0].admission.drawing: "path:nope": the pattern "POST /draw/{id}" has no wildcard {nope}`,
		"      type: stock\n      product: path:id\n      drawing: path:id\n      user: header:X-User\n": `routes[0].admission.drawing: not used by "stock" admission`,
		"      type: draw\n      drawing: path:id\n      raffle: path:id\n      user: header:X-User\n":   `routes[0].admission.raffle: unknown key`,
	} {
		_, err := load(admission)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %s", admission, err, want)
		}
	}
	for _, k := range []AdmissionKind{{Type: "draw", Owner: "x"}, {Type: "other", Owner: "product", Fields: []string{"product"}}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterAdmissionKind(%+v) did not panic", k)
				}
			}()
			RegisterAdmissionKind(k)
		}()
	}
}
