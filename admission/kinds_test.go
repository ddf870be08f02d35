package admission

// One pipeline for every kind: the shared behaviour (refuse an unknown owner, admit, refuse by the
// kind's own rule without reaching the origin, commit on the shop's acceptance, give back on its
// refusal, the worker consuming every event, metrics, the ledger and reconcile) run against stock,
// bid and a small test-only kind defined in this file, which runs the script of the raffle, the
// test-only kind of its own package (raffle/raffle.lua; raffle_test.go there runs that kind through a
// whole edgeq).

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"
	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/luascript"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// The entry kind: a raffle entry, one per user per drawing while the drawing exists. It keeps no
// cached reads, has no pages, no views, nothing to discover and no ledger table: only what every kind
// must do.
type entryKind struct {
	About
	s     *Service
	table *AdminTable // its admin records (records.go), under each drawing's tag as every kind's
}

func newEntryKind(s *Service) *entryKind {
	k := &entryKind{s: s, About: About{Type: "entry", OwnerNoun: "drawing", IDHeader: "Edgeq-Entry-Id", Dead: "drawing.",
		Unknown: errDrawingNotFound, Codes: []*web.Error{errAlreadyEntered, errDrawingNotFound}}}
	day := func(d int64) string { return strconv.FormatInt(d, 10) }
	g := s.keys.Global
	k.table = &AdminTable{Owners: k.OwnersKey(),
		Records:     func(o string, d int64) string { return k.key(o, "rec@"+day(d)) },
		IDs:         func(o string, d int64) string { return k.key(o, "ids@"+day(d)) },
		Users:       func(o string) string { return k.key(o, "users") },
		UserPattern: `"user":"([^"]*)"`, UserOf: JSONField("user"), TimeOf: func(string) int64 { return 0 },
		Old: &OldTable{Records: g("adm", "entries"), ByTime: g("adm", "entries_by_time"), ByUser: g("adm", "entries_by_user"),
			UserField:    "user",
			LegacyRecord: func(id string) string { return g("adm", "e:"+id) }, LegacyUser: func(u string) string { return g("adm", "eu:"+u) }}}
	return k
}

// The entry kind's one touch point in the configuration: a drawing is named by the route's product
// field, and an entry has no value.
func init() {
	config.AdmissionKinds = append(config.AdmissionKinds, config.AdmissionKind{Type: "entry", Owner: "product"})
}

// entryScript is the raffle's, built as a kind's package builds its scripts (Script: the clock and
// lib.lua, then the operation).
var entryScript = Script("raffle.lua", luascript.From(os.DirFS("."), "raffle").Read("raffle.lua"))

var (
	errAlreadyEntered  = &web.Error{Status: http.StatusConflict, Code: "ALREADY_ENTERED", Message: "You have entered this drawing already."}
	errDrawingNotFound = &web.Error{Status: http.StatusNotFound, Code: "DRAWING_NOT_FOUND", Message: "There is no such drawing."}
)

func (*entryKind) Value(string, bool) (int64, *web.Error) { return 1, nil }

func (k *entryKind) key(drawing, part string) string { return k.s.keys.Global("e:"+drawing, part) }

func (k *entryKind) keys(c Claim) []string {
	return []string{k.key(c.Owner, "drawing"), k.key(c.Owner, "entrants"), k.Record(c), k.Stream(c.Owner)}
}

func (k *entryKind) Reserve(ctx context.Context, c Claim) (*web.Error, error) {
	code, err := entryScript.Run(ctx, k.s.client, k.keys(c), "enter", c.ID, c.User).Int64()
	switch {
	case err != nil:
		return nil, err
	case code == 0:
		return nil, nil
	case code == 1:
		return errDrawingNotFound, nil
	case code == 2:
		return errAlreadyEntered, nil
	}
	return web.ErrStoreUnavailable.Because(fmt.Errorf("entry answered %d", code)), nil
}

func (k *entryKind) Release(ctx context.Context, c Claim) (int64, error) {
	return entryScript.Run(ctx, k.s.client, k.keys(c), "release", c.ID).Int64()
}

func (k *entryKind) Commit(ctx context.Context, c Claim) error {
	return entryScript.Run(ctx, k.s.client, k.keys(c), "commit", c.ID).Err()
}

func (k *entryKind) Record(c Claim) string        { return k.key(c.Owner, "entry:"+c.ID) }
func (*entryKind) Commits() bool                  { return true }
func (k *entryKind) OwnersKey() string            { return k.s.keys.Global("entry", "drawings") }
func (k *entryKind) SpellingsKey() string         { return k.s.keys.Global("entry", "spellings") }
func (k *entryKind) Stream(drawing string) string { return k.key(drawing, "events") }

// Parse makes the admin record of an entry (admitted, then released); a committed event (commits.lua,
// with the ledger on) is for a ledger this kind does not have.
func (k *entryKind) Parse(drawing string, msg redis.XMessage) ([]Application, error) {
	e := Entry(msg)
	typ, id := e.Str("type"), e.Str("entry")
	if typ == "committed" {
		return nil, nil
	}
	if (typ != "admitted" && typ != "released") || id == "" {
		return nil, fmt.Errorf("malformed entry event %s", msg.ID)
	}
	body, err := json.Marshal(map[string]string{"id": id, "drawing": drawing, "user": e.Str("user"), "state": typ})
	if err != nil {
		return nil, err
	}
	return []Application{{Table: k.table, Owner: drawing, ID: id, User: e.Str("user"), Body: body, Overwrite: typ == "released"}}, nil
}

// openDrawing makes a drawing exist and indexes it, as a kind's admin API or seeding would.
func (k *entryKind) openDrawing(t *testing.T, drawing string) {
	t.Helper()
	ctx := context.Background()
	if err := k.s.client.HSet(ctx, k.key(drawing, "drawing"), "entries", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := k.s.IndexOwner(ctx, k, drawing); err != nil {
		t.Fatal(err)
	}
}

// kindCase drives one kind through the shared tests.
type kindCase struct {
	typ   string
	route config.Admission // Type and the user are set by the test
	// open makes the owner exist; form is the i-th admissible request's form (each by user u<i>);
	// refused is a request the kind refuses by its own rule once request 0 is committed, and its code.
	open        func(t *testing.T, svc *Service, owner string)
	form        func(i int) url.Values
	refused     url.Values
	refusedUser string
	refusedCode string
	given       string // the state of an admission given back
	// held is what the owner holds now: units taken, the highest bid in cents, entries.
	held func(t *testing.T, svc *Service, owner string) int64
}

func kindCases() []kindCase {
	hget := func(t *testing.T, c redis.UniversalClient, key, field string) int64 {
		t.Helper()
		v, err := c.HGet(context.Background(), key, field).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return []kindCase{{
		typ:   products.Kind,
		route: config.Admission{Own: map[string]string{"product": "path:owner", "quantity": "form:quantity"}},
		open: func(t *testing.T, svc *Service, owner string) {
			t.Helper()
			if err := svc.Apply(context.Background(), products.With(&config.Config{}, product(owner, 10, 1)), nil); err != nil {
				t.Fatal(err)
			}
		},
		form:    func(int) url.Values { return url.Values{"quantity": {"1"}} },
		refused: url.Values{"quantity": {"1"}}, refusedUser: "u0", refusedCode: "ALREADY_PURCHASED", given: "released",
		held: func(t *testing.T, svc *Service, owner string) int64 {
			t.Helper()
			left, err := svc.client.Get(context.Background(), stockKey(svc.keys, owner)).Int64()
			if err != nil {
				t.Fatal(err)
			}
			return 10 - left
		},
	}, {
		typ:   auctions.Kind,
		route: config.Admission{Own: map[string]string{"auction": "path:owner", "amount": "form:amount"}},
		open: func(t *testing.T, svc *Service, owner string) {
			t.Helper()
			a := auctions.Auction{ID: owner, StartingPrice: "1.00", MinIncrement: "1.00", EndsAt: time.Now().Add(time.Hour)}
			if err := svc.Apply(context.Background(), auctions.With(&config.Config{}, a), nil); err != nil {
				t.Fatal(err)
			}
		},
		form:    func(i int) url.Values { return url.Values{"amount": {strconv.Itoa(10*(i+1)) + ".00"}} },
		refused: url.Values{"amount": {"10.00"}}, refusedUser: "late", refusedCode: "BID_TOO_LOW", given: "withdrawn",
		held: func(t *testing.T, svc *Service, owner string) int64 {
			return hget(t, svc.client, svc.keys.Entity("a", owner, "highest"), "amount")
		},
	}, {
		typ:   "entry",
		route: config.Admission{Own: map[string]string{"product": "path:owner"}},
		open: func(t *testing.T, svc *Service, owner string) {
			svc.kindOf("entry").(*entryKind).openDrawing(t, owner)
		},
		form:    func(int) url.Values { return url.Values{} },
		refused: url.Values{}, refusedUser: "u0", refusedCode: errAlreadyEntered.Code, given: "released",
		held: func(t *testing.T, svc *Service, owner string) int64 {
			k := svc.kindOf("entry").(*entryKind)
			return hget(t, svc.client, k.key(owner, "drawing"), "entries")
		},
	}}
}

// kindStack is edgeq with every kind (the entry kind registered too) in front of a recording origin,
// one route per kind: POST /<type>/{owner}.
type kindStack struct {
	svc    *Service
	reg    *prometheus.Registry
	public *httptest.Server
	status atomic.Int64 // what the origin answers
	seen   sync.Map     // header value (an admission id) -> true, for every kind's header
	hits   atomic.Int64
}

func newKindStack(t *testing.T, s *store.Store, l *ledger.Ledger) *kindStack {
	t.Helper()
	ks := &kindStack{reg: prometheus.NewRegistry()}
	ks.status.Store(http.StatusOK)
	assets := static.New("/_edgeq/static/")
	pages, err := templates.Parse("", template.FuncMap{"static": assets.URL})
	if err != nil {
		t.Fatal(err)
	}
	responder := &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"}
	logger := slog.New(slog.DiscardHandler)
	ks.svc = New(Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("identity"), MaxBodyBytes: 4096,
		Prefix: "/_edgeq", Responder: responder, Logger: logger, Registry: ks.reg, Ledger: l,
		Backoff: []time.Duration{10 * time.Millisecond}, ClaimIdle: 300 * time.Millisecond})
	ks.svc.register(newEntryKind(ks.svc))
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.hits.Add(1)
		for _, k := range ks.svc.kinds {
			if id := r.Header.Get(k.Header()); id != "" {
				ks.seen.Store(k.Name()+":"+id, true)
				w.Header().Set("X-Id", id)
			}
		}
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(int(ks.status.Load()))
	}))
	t.Cleanup(origin.Close)
	var routes []config.Route
	for _, c := range kindCases() {
		a := c.route
		a.Type, a.User, a.ReleaseOn, a.UnknownOwner = c.typ, "header:X-User", []string{"5xx", "error"}, config.UnknownRefuse
		routes = append(routes, config.Route{Name: c.typ, Match: "POST /" + c.typ + "/{owner}", OnStoreError: "closed", Admission: a})
	}
	originURL, _ := url.Parse(origin.URL)
	p := proxy.New(proxy.Options{Origin: originURL, OriginTimeout: 10 * time.Second, Prefix: "/_edgeq",
		Steps: []proxy.Step{ks.svc}, Responder: responder, Metrics: metrics.New(prometheus.NewRegistry()), Logger: logger})
	table, err := p.Compile(routes)
	if err != nil {
		t.Fatal(err)
	}
	p.Use(table)
	ks.public = httptest.NewServer(p)
	t.Cleanup(ks.public.Close)
	return ks
}

// post sends one request of a kind's route and returns the status, the error code of a refusal and
// the id the origin was given.
func (ks *kindStack) post(t *testing.T, typ, owner, user string, form url.Values) (status int, code, id string) {
	t.Helper()
	req, _ := http.NewRequest("POST", ks.public.URL+"/"+typ+"/"+owner, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 && resp.Header.Get("X-Id") == "" {
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("a refusal that is not JSON: %d %q", resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, body.Error, resp.Header.Get("X-Id")
}

func TestKinds_EveryKindRunsTheOnePipeline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ks := newKindStack(t, s, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var worker sync.WaitGroup
		worker.Go(func() { ks.svc.Run(ctx) })
		t.Cleanup(func() { cancel(); worker.Wait() })
		for _, c := range kindCases() {
			t.Run(c.typ, func(t *testing.T) {
				k := ks.svc.kindOf(c.typ)
				hits := ks.hits.Load()
				// An owner the store does not know: the kind's not-found refusal, nothing reaches the shop.
				if status, code, _ := ks.post(t, c.typ, "nowhere", "u0", c.form(0)); status != k.NotFound().Status || code != k.NotFound().Code {
					t.Fatalf("unknown owner: %d %s, want %d %s", status, code, k.NotFound().Status, k.NotFound().Code)
				}
				owner := "o-" + c.typ
				c.open(t, ks.svc, owner)
				// Admitted and accepted by the shop: the id reached the origin in the kind's header,
				// the owner holds it, and the record is committed (by the committer, in a batch) when
				// the kind commits.
				status, code, id := ks.post(t, c.typ, owner, "u0", c.form(0))
				if status != http.StatusOK || id == "" {
					t.Fatalf("request 0: %d %s, id %q", status, code, id)
				}
				if _, ok := ks.seen.Load(c.typ + ":" + id); !ok {
					t.Fatalf("the origin did not get id %s in %s", id, k.Header())
				}
				held := c.held(t, ks.svc, owner)
				if held <= 0 {
					t.Fatalf("after an admission the owner holds %d", held)
				}
				state := func(id string) string {
					if g, ok := k.(GroupedKind); ok { // a stock admission is committed by leaving its unsettled set
						unsettled := s.Client.ZScore(context.Background(), g.UnsettledSet(owner), id).Err() == nil
						return admissionState(storedRecord(t, s, owner, id).state, unsettled)
					}
					v, err := s.Client.HGet(context.Background(), k.Record(Claim{Owner: owner, ID: id}), "state").Result()
					if err != nil && err != redis.Nil {
						t.Fatal(err)
					}
					return v
				}
				if k.Commits() {
					wait.Until(t, 10*time.Second, "admission "+id+" committed", func() bool { return state(id) == "committed" })
				} else if got := state(id); got != "accepted" { // a bid with the ledger off: nothing to commit
					t.Fatalf("admission %s is %q, want accepted", id, got)
				}
				// Refused by the kind's own rule: its code, nothing reaches the shop, nothing taken.
				before := ks.hits.Load()
				if status, code, _ := ks.post(t, c.typ, owner, c.refusedUser, c.refused); code != c.refusedCode || status < 400 {
					t.Fatalf("refusal: %d %s, want %s", status, code, c.refusedCode)
				}
				if ks.hits.Load() != before || c.held(t, ks.svc, owner) != held {
					t.Fatalf("a refused request reached the shop or changed what the owner holds")
				}
				// Refused by the shop (5xx): given back.
				ks.status.Store(http.StatusInternalServerError)
				status, _, id1 := ks.post(t, c.typ, owner, "u1", c.form(1))
				ks.status.Store(http.StatusOK)
				if status != http.StatusInternalServerError || id1 == "" {
					t.Fatalf("request 1: %d, id %q", status, id1)
				}
				if got := state(id1); got != c.given {
					t.Fatalf("admission %s refused by the shop is %q, want %s", id1, got, c.given)
				}
				if got := c.held(t, ks.svc, owner); got != held {
					t.Fatalf("after a give-back the owner holds %d, want %d", got, held)
				}
				if ks.hits.Load() != hits+2 {
					t.Fatalf("the shop saw %d requests, want 2", ks.hits.Load()-hits)
				}
				// Metrics: one of each outcome under the kind's type.
				for result, want := range map[string]float64{"admitted": 2, "released": 1, strings.ToLower(c.refusedCode): 1,
					strings.ToLower(k.NotFound().Code): 1} {
					if got := testutil.ToFloat64(ks.svc.metrics.admissions.WithLabelValues(c.typ, result)); got != want {
						t.Errorf("edgeq_admissions_total{type=%s,result=%s} = %v, want %v", c.typ, result, got, want)
					}
				}
				// The worker consumed every event of the owner's streams: nothing pending, nothing
				// dead-lettered.
				wait.Until(t, 10*time.Second, "the worker read every event of "+owner, func() bool {
					ctx := context.Background()
					last, err := s.Client.XRevRangeN(ctx, k.Stream(owner), "+", "-", 1).Result()
					if err != nil || len(last) == 0 {
						return false
					}
					groups, err := s.Client.XInfoGroups(ctx, k.Stream(owner)).Result()
					if err != nil {
						return false
					}
					for _, g := range groups {
						if g.Name == groupName {
							return g.LastDeliveredID == last[0].ID && g.Pending == 0
						}
					}
					return false
				})
				if n, err := s.Client.ZCard(context.Background(), deadByTimeKey(s.Keys)).Result(); err != nil || n != 0 {
					t.Fatalf("dead letters: %d %v", n, err)
				}
			})
		}
	})
}

// TestKinds_TheLedgerAndReconcileLoopOverTheKinds: with the ledger on and a kind that keeps none
// (entry), the ledger worker writes stock and bid events, leaves the entry streams alone (no ledger
// group, no backlog), and reconcile compares what the ledgered kinds hold and finds no difference.
func TestKinds_TheLedgerAndReconcileLoopOverTheKinds(t *testing.T) {
	func(t *testing.T, s *store.Store) {
		l, err := ledger.Open(context.Background(), ledgertest.Database(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		ks := newKindStack(t, s, l)
		ctx, cancel := context.WithCancel(context.Background())
		var worker sync.WaitGroup
		worker.Go(func() { ks.svc.Run(ctx) })
		t.Cleanup(func() { cancel(); worker.Wait() })
		for _, c := range kindCases() {
			owner := "o-" + c.typ
			c.open(t, ks.svc, owner)
			for i := range 3 {
				if i == 2 {
					ks.status.Store(http.StatusServiceUnavailable)
				}
				if status, code, _ := ks.post(t, c.typ, owner, "u"+strconv.Itoa(i), c.form(i)); status >= 400 && status != http.StatusServiceUnavailable {
					t.Fatalf("%s request %d: %d %s", c.typ, i, status, code)
				}
				ks.status.Store(http.StatusOK)
			}
		}
		wait.Until(t, 20*time.Second, "the ledger caught up", func() bool {
			n, err := ks.svc.LedgerBacklog(context.Background())
			return err == nil && n == 0
		})
		entries := ks.svc.kindOf("entry").Stream("o-entry")
		groups, err := s.Client.XInfoGroups(context.Background(), entries).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if g.Name == ledgerGroup {
				t.Fatalf("the entry kind keeps no ledger, yet its stream has the ledger's group")
			}
		}
		wait.Until(t, 20*time.Second, "every settlement in the ledger", func() bool {
			r, err := ks.svc.Reconcile(context.Background())
			return err == nil && len(r.Differences) == 0
		})
		r, err := ks.svc.Reconcile(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.Compared(), "1 products, 1 auctions, 3 admissions and 3 bids"; got != want {
			t.Fatalf("reconcile compared %q, want %q", got, want)
		}
		var admissions int
		if err := l.QueryRow(context.Background(), "SELECT count(*) FROM edgeq_admissions").Scan(&admissions); err != nil || admissions != 3 {
			t.Fatalf("ledger admissions: %d %v", admissions, err)
		}
	}(t, storetest.Redis(t))
}
