package raffle_test

// The raffle through a whole edgeq (server.Run, in process) on a real redis-server and a private
// PostgreSQL: its route field, the origin's answers, its refusals in every language, its admin
// views, a user's own listing, its ledger table, `edgeq reconcile` and its report series. Nothing
// outside this package knows the kind: linking the package is all it takes.

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission/raffle"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
	"github.com/edgeq/edgeq/server"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// edge is edgeq running in process.
type edge struct {
	public, admin, config string
}

func start(t *testing.T, text string) *edge {
	t.Helper()
	return startReloading(t, text, nil)
}

// startReloading is start with a value of reload forcing a reload, as SIGHUP does.
func startReloading(t *testing.T, text string, reload <-chan struct{}) *edge {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &edge{config: path}
	ctx, cancel := context.WithCancel(context.Background())
	started, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{ConfigPath: path, LogOutput: io.Discard, Reload: reload, Started: func(public, admin net.Addr) {
			e.public, e.admin = "http://"+public.String(), "http://"+admin.String()
			close(started)
		}})
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

// call sends a request and returns the status and body.
func call(t *testing.T, method, url string, header http.Header) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func admin(t *testing.T, e *edge, method, path string) (int, string) {
	t.Helper()
	status, body, _ := call(t, method, e.admin+path, http.Header{"Authorization": {"Bearer test-key"}})
	return status, body
}

func enter(t *testing.T, e *edge, drawing, user string) (int, string) {
	t.Helper()
	status, body, _ := call(t, "POST", e.public+"/enter/"+drawing, http.Header{"X-User": {user}})
	return status, body
}

func TestRaffle_AKindOfItsOwnPackageThroughTheWholeEdge(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // entry id -> user, as the shop saw them
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get(raffle.Header)] = r.Header.Get("X-User")
		mu.Unlock()
		if r.Header.Get("X-User") == "bob" {
			http.Error(w, "the shop failed", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "entered")
	}))
	defer origin.Close()
	ledgerURL := ledgertest.Database(t)
	prefix := storetest.UniquePrefix()
	e := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q, key_prefix: %q}
ledger: {postgres_url: %q}
log: {level: warn}
identity: {secret: "the-raffle's-identity-secret-0123456789abcdef"}
queues:
  - {id: drop, capacity: 20}
routes:
  - name: enter
    match: "POST /enter/{id}"
    admission: {type: raffle, drawing: "path:id", user: "header:X-User"}
`, origin.URL, storetest.RedisAddr(t), prefix, ledgerURL))

	// The admin view opens a drawing; entries are admitted once per user and forwarded with their id.
	if status, body := admin(t, e, "PUT", "/api/drawings/d1"); status != http.StatusCreated {
		t.Fatalf("open the drawing: %d %s", status, body)
	}
	for _, user := range []string{"alice", "carol"} {
		if status, body := enter(t, e, "d1", user); status != http.StatusOK || body != "entered" {
			t.Fatalf("%s enters: %d %s", user, status, body)
		}
	}
	if status, _ := enter(t, e, "d1", "bob"); status != http.StatusInternalServerError {
		t.Fatalf("bob's entry, which the shop failed: %d", status)
	}
	mu.Lock()
	if _, anonymous := seen[""]; len(seen) != 3 || anonymous {
		t.Fatalf("the shop saw %v: want three entries, each with its id", seen)
	}
	mu.Unlock()

	// Its own refusals, without reaching the shop, in JSON and in every language's page.
	if status, body := enter(t, e, "d1", "alice"); status != http.StatusConflict || !strings.Contains(body, `"ALREADY_ENTERED"`) {
		t.Fatalf("alice again: %d %s", status, body)
	}
	if status, body := enter(t, e, "nope", "alice"); status != http.StatusNotFound || !strings.Contains(body, `"DRAWING_NOT_FOUND"`) {
		t.Fatalf("a drawing that is not open: %d %s", status, body)
	}
	texts, err := fs.Glob(os.DirFS("texts"), "*.json")
	if err != nil || len(texts) < 18 {
		t.Fatalf("texts: %v %v", texts, err)
	}
	for _, file := range texts {
		tag := strings.TrimSuffix(file, ".json")
		raw, err := os.ReadFile(filepath.Join("texts", file))
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		status, body, _ := call(t, "POST", e.public+"/enter/d1", http.Header{"X-User": {"alice"},
			"Accept": {"text/html"}, "Sec-Fetch-Mode": {"navigate"}, "Accept-Language": {tag}})
		if status != http.StatusConflict || !strings.Contains(body, html.EscapeString(want["msg.ALREADY_ENTERED"])) ||
			!strings.Contains(body, html.EscapeString(want["head.ALREADY_ENTERED"])) {
			t.Errorf("%s: the page of ALREADY_ENTERED (%d) lacks %q:\n%s", tag, status, want["msg.ALREADY_ENTERED"], body)
		}
	}
	mu.Lock()
	if len(seen) != 3 {
		t.Fatalf("a refused entry reached the shop: %v", seen)
	}
	mu.Unlock()

	// The admin view: the drawing holds alice's and carol's entries; the worker's records list all three.
	if status, body := admin(t, e, "GET", "/api/drawings/d1"); status != http.StatusOK || !strings.Contains(body, `"entries":2`) {
		t.Fatalf("the drawing: %d %s", status, body)
	}
	var records struct {
		Items []raffle.Entry `json:"items"`
		Total int64          `json:"total_count"`
	}
	states := map[string]int{}
	wait.Until(t, 10*time.Second, "the worker's records: two entries admitted, bob's released", func() bool {
		_, body := admin(t, e, "GET", "/api/entries")
		clear(states)
		if json.Unmarshal([]byte(body), &records) != nil || records.Total != 3 {
			return false
		}
		for _, r := range records.Items {
			states[r.State]++
		}
		return states["admitted"] == 2 && states["released"] == 1
	})
	for _, r := range records.Items {
		if r.Drawing != "d1" || r.User == "" || r.User == "alice" || r.User == "bob" {
			t.Errorf("record %+v: want drawing d1 and a pseudonym, never the user id", r)
		}
	}
	if status, body := admin(t, e, "GET", "/api/entries/"+records.Items[0].ID); status != http.StatusOK || !strings.Contains(body, records.Items[0].ID) {
		t.Fatalf("one entry: %d %s", status, body)
	}

	// The ledger: one row per entry in the kind's own table, states as the shop's answers left them.
	conn, err := pgx.Connect(context.Background(), ledgerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rowStates := func() map[string]int {
		out := map[string]int{}
		rows, err := conn.Query(context.Background(), `SELECT state FROM edgeq_raffle_entries WHERE drawing_id = 'd1'`)
		if err != nil {
			return out
		}
		for rows.Next() {
			var s string
			if rows.Scan(&s) == nil {
				out[s]++
			}
		}
		return out
	}
	wait.Until(t, 10*time.Second, "the ledger's rows: 2 committed, 1 released", func() bool {
		s := rowStates()
		return s["committed"] == 2 && s["released"] == 1 && len(s) == 2
	})

	// "mine": alice's own entries, from the ledger, without her pseudonym.
	status, body, header := call(t, "GET", e.public+"/_edgeq/drawings/mine", http.Header{"X-User": {"alice"}})
	var mine struct {
		Items []raffle.Entry `json:"items"`
		Total int64          `json:"total_count"`
	}
	if err := json.Unmarshal([]byte(body), &mine); status != http.StatusOK || err != nil || mine.Total != 1 ||
		mine.Items[0].State != "committed" || mine.Items[0].User != "" || header.Get("Edgeq-Source") != "ledger" {
		t.Fatalf("alice's entries: %d %s %v", status, body, header)
	}
	if status, _, _ := call(t, "GET", e.public+"/_edgeq/drawings/mine", nil); status != http.StatusBadRequest {
		t.Fatalf("mine without a user: %d, want 400", status)
	}

	// reconcile: the store and the ledger agree, then a drawing's count changed behind edgeq's back shows.
	quiet := slog.New(slog.DiscardHandler)
	r, err := server.Reconcile(context.Background(), e.config, 10*time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Differences) != 0 || !strings.Contains(r.Compared(), "1 drawings") || !strings.Contains(r.Compared(), "3 entrys") {
		t.Fatalf("reconcile: compared %s, differences %v", r.Compared(), r.Differences)
	}

	// The report: the drawing's series, in the scope the kind registered.
	var rep struct {
		Scopes map[string][]struct {
			ID      string           `json:"id"`
			Counts  map[string]int64 `json:"counts"`
			Refused map[string]int64 `json:"refused"`
		} `json:"scopes"`
	}
	wait.Until(t, 10*time.Second, "the report's drawings", func() bool {
		_, body := admin(t, e, "GET", "/api/report?queue=drop")
		if json.Unmarshal([]byte(body), &rep) != nil || len(rep.Scopes["drawings"]) != 1 {
			return false
		}
		d := rep.Scopes["drawings"][0]
		return d.ID == "d1" && d.Counts["admitted"] == 3 && d.Counts["committed"] == 2 && d.Counts["released"] == 1 &&
			d.Refused["ALREADY_ENTERED"] == int64(1+len(texts))
	})
	if status, page := admin(t, e, "GET", "/report?queue=drop"); status != http.StatusOK ||
		!strings.Contains(page, `<h2 id="scope-drawings-h">Drawings</h2>`) || !strings.Contains(page, `<th scope="row">d1</th>`) {
		t.Fatalf("the report page (%d) has no table of the drawings with d1:\n%s", status, page)
	}

	rdb := redis.NewClient(&redis.Options{Addr: storetest.RedisAddr(t)})
	defer rdb.Close()
	if err := rdb.HIncrBy(context.Background(), prefix+":{r:d1}:drawing", "entries", 1).Err(); err != nil {
		t.Fatal(err)
	}
	r, err = server.Reconcile(context.Background(), e.config, 10*time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Differences) != 1 || r.Differences[0].String() != "drawing d1: entries held: store 3, ledger 2" {
		t.Fatalf("reconcile after the count changed: %v", r.Differences)
	}
}

// The kind's own section of the file, drawings:, opens its drawings at start and on a reload, and is
// checked with the file: nothing outside this package knows it either.
func TestRaffle_TheFileOpensItsDrawings(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "entered") }))
	defer origin.Close()
	prefix := storetest.UniquePrefix()
	file := func(drawings string) string {
		return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q, key_prefix: %q}
log: {level: warn}
identity: {secret: "the-raffle's-identity-secret-0123456789abcdef"}
routes:
  - name: enter
    match: "POST /enter/{id}"
    admission: {type: raffle, drawing: "path:id", user: "header:X-User"}
drawings: %s
`, origin.URL, storetest.RedisAddr(t), prefix, drawings)
	}

	// A file whose drawings are wrong does not start, and says where.
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte(file(`[{id: "not an id"}, {id: d0}, {id: d0}, {idd: d1}]`)), 0o600); err != nil {
		t.Fatal(err)
	}
	err := server.Run(context.Background(), server.Options{ConfigPath: path, LogOutput: io.Discard})
	for _, want := range []string{`drawings[0].id: "not an id" must be 1-64 characters`, `drawings[2].id: "d0" is already the id of drawings[1]`,
		"drawings[3].idd: unknown key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a file with bad drawings: %v, want %q", err, want)
		}
	}

	// The drawings it lists are open from the start; another is not.
	reload := make(chan struct{})
	e := startReloading(t, file(`[{id: d0}]`), reload)
	if status, body := admin(t, e, "GET", "/api/drawings/d0"); status != http.StatusOK || !strings.Contains(body, `"entries":0`) {
		t.Fatalf("d0, listed in the file: %d %s", status, body)
	}
	if status, body := enter(t, e, "d0", "alice"); status != http.StatusOK || body != "entered" {
		t.Fatalf("alice enters d0: %d %s", status, body)
	}
	if status, body := enter(t, e, "d2", "alice"); status != http.StatusNotFound || !strings.Contains(body, `"DRAWING_NOT_FOUND"`) {
		t.Fatalf("d2, not listed yet: %d %s", status, body)
	}

	// Listed on a reload, d2 opens; d0 keeps its entry.
	if err := os.WriteFile(e.config, []byte(file(`[{id: d0}, {id: d2}]`)), 0o600); err != nil {
		t.Fatal(err)
	}
	reload <- struct{}{}
	wait.Until(t, 10*time.Second, "d2 open after the reload", func() bool {
		status, _ := admin(t, e, "GET", "/api/drawings/d2")
		return status == http.StatusOK
	})
	if status, body := enter(t, e, "d2", "alice"); status != http.StatusOK || body != "entered" {
		t.Fatalf("alice enters d2 after the reload: %d %s", status, body)
	}
	if status, body := admin(t, e, "GET", "/api/drawings/d0"); status != http.StatusOK || !strings.Contains(body, `"entries":1`) {
		t.Fatalf("d0 after the reload: %d %s", status, body)
	}
}
