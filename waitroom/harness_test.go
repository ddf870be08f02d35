package waitroom

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/admin"
	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/turnstiletest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const adminKey = "test-admin-key"

// replica is one edgeq instance in front of an origin: public listener, admin listener, and the room.
type replica struct {
	room   *Room
	public *httptest.Server
	admin  *httptest.Server
	cancel context.CancelFunc
}

// harness is a small deployment: an origin that counts what reaches it, one shared store, and one
// or more replicas sharing a signing key.
type harness struct {
	t        *testing.T
	store    *store.Store
	keys     *token.Keyring
	origin   *httptest.Server
	hits     atomic.Int64
	replicas []*replica
	queues   []config.Queue
	routes   []config.Route
	command  atomic.Value // Edgeq-Command the origin answers with
	seen     atomic.Value // http.Header: the headers of the last request that reached the origin
	status   atomic.Int64 // status the origin answers with (0: 200)
	bodies   chan string  // request bodies the origin received, when not nil

	// Turnstile, when the harness was built withTurnstile: the stand-in siteverify and its server.
	fake   *turnstiletest.Server
	fakeTS *httptest.Server
	onErr  string

	// Set before addReplica: the replicas' per-IP limits (default: off) and the peers whose
	// X-Forwarded-For they believe (default: none), to let a test speak from several networks.
	limits  config.Limits
	trusted []netip.Prefix
	// tick is the replicas' tick (default 20ms). A test that sets a long one drives the ticks itself
	// (room.tickAll): its snapshots stay as they are between, as a replica's do within one tick.
	tick time.Duration
}

// withTurnstile makes the harness's replicas check Turnstile against a stand-in siteverify, with
// turnstile.on_error set to onError.
func (h *harness) withTurnstile(onError string) *harness {
	h.fake = turnstiletest.New()
	h.fakeTS = httptest.NewServer(h.fake)
	h.t.Cleanup(h.fakeTS.Close)
	h.onErr = onError
	return h
}

func newHarness(t *testing.T, s *store.Store, queues []config.Queue, routes []config.Route) *harness {
	t.Helper()
	h := buildHarness(t, s, queues, routes)
	h.addReplica()
	return h
}

// newTurnstileHarness is newHarness with Turnstile checks (see withTurnstile).
func newTurnstileHarness(t *testing.T, s *store.Store, onError string, queues []config.Queue, routes []config.Route) *harness {
	t.Helper()
	h := buildHarness(t, s, queues, routes).withTurnstile(onError)
	h.addReplica()
	return h
}

func buildHarness(t *testing.T, s *store.Store, queues []config.Queue, routes []config.Route) *harness {
	t.Helper()
	key, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: s, keys: token.NewKeyring(key), queues: queues, routes: routes}
	h.command.Store("")
	h.origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		h.seen.Store(r.Header.Clone())
		if cmd := h.command.Load().(string); cmd != "" {
			w.Header().Set("Edgeq-Command", cmd)
		}
		if h.bodies != nil {
			body, _ := io.ReadAll(r.Body)
			h.bodies <- string(body)
		}
		if st := h.status.Load(); st != 0 {
			w.WriteHeader(int(st))
		}
		fmt.Fprintf(w, "origin %s queue=%s request=%s", r.URL.Path, r.Header.Get(HeaderQueueID), r.Header.Get(HeaderRequestID))
	}))
	t.Cleanup(h.origin.Close)
	return h
}

func testQueue(id string, capacity int) config.Queue {
	q := config.DefaultQueue()
	q.ID, q.Title, q.Capacity = id, "Queue "+id, capacity
	return q
}

// addReplica starts another edgeq instance on the same store and keys.
func (h *harness) addReplica() *replica { return h.addReplicaOn(h.store) }

// addReplicaOn starts another edgeq instance on the same keys with a store client of its own (as a
// separate process has: its own connections, its own view of the master).
func (h *harness) addReplicaOn(st *store.Store) *replica {
	t := h.t
	assets := static.New("/_edgeq/static/")
	pages, err := templates.Parse("", template.FuncMap{"static": assets.URL})
	if err != nil {
		t.Fatal(err)
	}
	responder := &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"}
	logger := slog.New(slog.DiscardHandler)
	endpoints := http.NewServeMux()
	var ts *botcheck.Check
	var tsGate *botcheck.Gate
	if h.fake != nil {
		cfg := config.Default().Turnstile
		cfg.SiteKey, cfg.SecretKey, cfg.OnError = turnstiletest.SiteKey, turnstiletest.Secret, h.onErr
		cfg.VerifyURL, cfg.ScriptURL = h.fakeTS.URL+"/turnstile/v0/siteverify", h.fakeTS.URL+"/turnstile/v0/api.js"
		cfg.Hostnames = []string{"shop.example"}
		cfg.Timeout = 500 * time.Millisecond
		full := config.Default()
		full.Turnstile = cfg
		if ts, err = botcheck.New(botcheck.Env{Config: full, Store: st}, prometheus.NewRegistry()); err != nil {
			t.Fatal(err)
		}
	}
	room := New(Options{
		Store: st, Keyring: h.keys, Verifier: token.NewVerifier(h.keys, "edgeq", 5*time.Second), Issuer: "edgeq",
		IDKey: h.keys.DeriveKey("edgeq request ids v1"), Prefix: "/_edgeq", Cookies: web.Cookies{Secure: "auto"},
		Responder: responder, Logger: logger, Tick: cmp.Or(h.tick, 20*time.Millisecond), Check: ts, Limits: h.limits,
	})
	if ts != nil {
		tsGate = botcheck.NewGate(botcheck.GateOptions{
			Check: ts, Store: st, ClearanceTTL: 30 * time.Minute, Key: h.keys.DeriveKey("edgeq turnstile clearance v1"),
			Prefix: "/_edgeq", MaxBodyBytes: 1 << 20, Cookies: web.Cookies{Secure: "auto"}, Responder: responder,
			PerIPPerMinute: h.limits.TurnstilePerIPPerMinute, RateLimited: room.RateLimited("turnstile"),
		})
		tsGate.Register(endpoints)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := room.Apply(ctx, h.queues, nil); err != nil {
		t.Fatal(err)
	}
	room.Register(endpoints)
	steps := []proxy.Step{room.Gate()}
	if tsGate != nil {
		steps = append(steps, tsGate)
	}
	originURL, _ := url.Parse(h.origin.URL)
	reg := prometheus.NewRegistry()
	p := proxy.New(proxy.Options{
		Origin: originURL, OriginTimeout: 5 * time.Second, Prefix: "/_edgeq", Endpoints: web.Routes(endpoints, responder),
		Steps: steps, Responder: responder, Metrics: metrics.New(reg), Logger: logger, TrustedProxies: h.trusted,
	})
	table, err := p.Compile(h.routes)
	if err != nil {
		t.Fatal(err)
	}
	p.Use(table)
	rp := &replica{room: room, cancel: cancel}
	rp.public = httptest.NewServer(p)
	rp.admin = httptest.NewServer(admin.Handler(admin.Options{
		APIKey: adminKey, Gatherer: reg, Responder: responder, Logger: logger,
		Ready: func(context.Context) map[string]error { return nil },
		API:   []func(*http.ServeMux){room.RegisterAdmin},
	}))
	done := make(chan struct{})
	started := time.Now()
	go func() { room.Run(ctx); close(done) }()
	if h.tick > time.Second {
		// Run ticks once as it starts: past that, only the test's ticks change the snapshots.
		eventually(t, 5*time.Second, "the replica's first tick", func() bool {
			for _, q := range h.queues {
				if s := room.tracked(q.ID).snap.Load(); s == nil || !s.Taken.After(started) {
					return false
				}
			}
			return true
		})
	}
	t.Cleanup(func() {
		rp.public.Close()
		rp.admin.Close()
		cancel()
		<-done
	})
	h.replicas = append(h.replicas, rp)
	return rp
}

// visitor is one browser: its own cookie jar, no redirects followed unless asked.
type visitor struct {
	h      *harness
	client *http.Client
	base   string
}

func (h *harness) visitor(rp *replica) *visitor {
	jar, _ := cookiejar.New(nil)
	return &visitor{h: h, base: rp.public.URL, client: &http.Client{
		Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type answer struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func (v *visitor) do(method, path string, form url.Values, header http.Header) answer {
	v.h.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, v.base+path, body)
	if err != nil {
		v.h.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vals := range header {
		if k == "Host" {
			req.Host = vals[0]
			continue
		}
		req.Header[k] = vals
	}
	resp, err := v.client.Do(req)
	if err != nil {
		v.h.t.Fatal(err)
	}
	return readAnswer(resp)
}

func readAnswer(resp *http.Response) answer {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	json.Unmarshal(raw, &a.json)
	return a
}

func (v *visitor) assign(queue string) answer {
	return v.do("POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {queue}}, nil)
}

func (v *visitor) generate(queue, requestID string) answer {
	return v.do("POST", "/_edgeq/generate_token", url.Values{"queue_id": {queue}, "request_id": {requestID}}, nil)
}

// adminForm posts a form (application/x-www-form-urlencoded) to the admin API of rp.
func (h *harness) adminForm(rp *replica, path string, form url.Values) answer {
	h.t.Helper()
	req, _ := http.NewRequest("POST", rp.admin.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return h.adminDo(req)
}

func (h *harness) adminJSON(rp *replica, method, path, body string) answer {
	h.t.Helper()
	req, _ := http.NewRequest(method, rp.admin.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return h.adminDo(req)
}

func (h *harness) adminDo(req *http.Request) answer {
	h.t.Helper()
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return readAnswer(resp)
}

// eventually polls cond; the deadline only bounds a broken test.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, within, what, cond)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}
