package admission

import (
	"context"
	"encoding/json"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/admin"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
	"github.com/edgeq/edgeq/internal/visitor"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const adminKey = "test-admin-key"

// stack is edgeq with stock admission in front of a counting origin.
type stack struct {
	t       *testing.T
	store   *store.Store
	svc     *Service
	public  *httptest.Server
	admin   *httptest.Server
	origin  *httptest.Server
	hits    atomic.Int64 // requests that reached the origin
	status  atomic.Int64 // status the origin answers with (200 by default)
	delay   atomic.Int64 // nanoseconds the origin waits before answering
	ids     sync.Map     // admission ids the origin received -> true
	bids    sync.Map     // bid ids the origin received -> amount (form value)
	bidHits atomic.Int64 // bid requests that reached the origin
	fault   atomic.Value // string: "" (answer), "hang", "reset" (close the connection) or "garbage" (not HTTP)
	hold    atomic.Value // chan struct{}: the origin sends its headers, then the body once it is closed
	reg     *prometheus.Registry
	workers sync.WaitGroup
	// visitors signs the visitor ids of the proxy (routes with user: visitor).
	visitors *visitor.IDs

	originTimeout time.Duration
	// releaseOn, when set, is every admission route's release_on (testRoutes otherwise).
	releaseOn []string
}

// routes: checkout by form, a JSON cart, a query-string purchase and a bid form.
func testRoutes() []config.Route {
	route := func(name, match string, a config.Admission) config.Route {
		r := config.Route{Name: name, Match: match, OnStoreError: "closed", Admission: a}
		r.Admission.Type = "stock"
		if r.Admission.ReleaseOn == nil {
			r.Admission.ReleaseOn = []string{"5xx", "error"}
		}
		return r
	}
	open := func(name string, r config.Route) config.Route {
		r.OnStoreError = config.OnStoreErrorOpen
		return r
	}
	return []config.Route{
		route("checkout", "POST /checkout/{product}", config.Admission{Product: "path:product", User: "header:X-User", Quantity: "form:quantity"}),
		route("cart", "POST /api/cart", config.Admission{Product: "json:items.0.sku", User: "cookie:session", Quantity: "json:items.0.qty"}),
		route("buy", "GET /buy", config.Admission{Product: "query:p", User: "header:X-User"}),
		open("open-checkout", route("open-checkout", "POST /open-checkout/{product}", config.Admission{Product: "path:product", User: "header:X-User"})),
		{Name: "bid", Match: "POST /auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Auction: "path:id", Amount: "form:amount", User: "header:X-User", ReleaseOn: []string{"5xx", "error"}}},
		// A shop's own session cookie as the buyer and the bidder, and a JSON body with top-level keys.
		route("json-checkout", "POST /json-checkout/{product}", config.Admission{Product: "path:product", User: "cookie:shop_session", Quantity: "json:quantity"}),
		{Name: "cookie-bid", Match: "POST /cookie/auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Auction: "path:id", Amount: "form:amount", User: "cookie:shop_session", ReleaseOn: []string{"5xx", "error"}}},
		// A cart: one add-to-cart URL for every product, the SKU and a guest's e-mail in the JSON body;
		// only the products edgeq knows are guarded.
		func() config.Route {
			r := route("cart-add", "POST /carts/{cart}/items", config.Admission{Product: "json:sku", User: "json:email", Quantity: "json:quantity"})
			r.Admission.UnknownOwner = config.UnknownPass
			// The shop's cart script reads error.message.
			r.Refusal.JSON = `{"error": {"message": "{{.Message}}", "code": "{{.Code}}", "left": "{{index .Fields "remaining_stock"}}"}}`
			return r
		}(),
		{Name: "open-bid", Match: "POST /open/auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Auction: "path:id", Amount: "form:amount", User: "header:X-User", ReleaseOn: []string{"5xx", "error"},
			UnknownOwner: config.UnknownPass}},
		// As config.example.yaml's bid route: a bid the shop refuses with a 4xx is withdrawn.
		{Name: "strict-bid", Match: "POST /strict/auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Auction: "path:id", Amount: "form:amount", User: "header:X-User", ReleaseOn: []string{"4xx", "5xx", "error"}}},
		// One buyer per browser: the visitor id edgeq gives it.
		route("visitor-checkout", "POST /visitor/checkout/{product}", config.Admission{Product: "path:product", User: config.UserVisitor}),
	}
}

func newStack(t *testing.T, s *store.Store, products ...config.Product) *stack {
	t.Helper()
	return newStackTimeout(t, s, 30*time.Second, products...)
}

// newStackTimeout is newStack with the proxy's origin timeout set.
func newStackTimeout(t *testing.T, s *store.Store, originTimeout time.Duration, products ...config.Product) *stack {
	t.Helper()
	return newStackReleasing(t, s, originTimeout, nil, products...)
}

// newStackReleasing is newStackTimeout with every admission route's release_on set (nil: testRoutes').
func newStackReleasing(t *testing.T, s *store.Store, originTimeout time.Duration, releaseOn []string, products ...config.Product) *stack {
	t.Helper()
	st := &stack{t: t, store: s, originTimeout: originTimeout, releaseOn: releaseOn}
	st.status.Store(200)
	st.origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.hits.Add(1)
		if id := r.Header.Get(HeaderAdmissionID); id != "" {
			if _, dup := st.ids.LoadOrStore(id, true); dup {
				t.Errorf("admission %s reached the origin twice", id)
			}
		}
		body, _ := io.ReadAll(r.Body)
		if f, _ := st.fault.Load().(string); f != "" {
			switch f {
			case "hang":
				<-r.Context().Done()
			case "reset", "garbage":
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				if f == "garbage" {
					buf.WriteString("SURPRISE\r\n\x00\x01 not http at all\r\n\r\n")
					buf.Flush()
				}
				if tcp, ok := conn.(*net.TCPConn); ok {
					tcp.SetLinger(0) // a reset, not a clean close
				}
				conn.Close()
			}
			return
		}
		if id := r.Header.Get(HeaderBidID); id != "" {
			w.Header().Set("X-Bid-Id", id) // so that a bidder learns which id its bid got
			st.bidHits.Add(1)
			form, _ := url.ParseQuery(string(body))
			if _, dup := st.bids.LoadOrStore(id, form.Get("amount")); dup {
				t.Errorf("bid %s reached the origin twice", id)
			}
		}
		if d := time.Duration(st.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("X-Body", url.QueryEscape(string(body)))
		w.WriteHeader(int(st.status.Load()))
		if hold, _ := st.hold.Load().(chan struct{}); hold != nil {
			w.(http.Flusher).Flush()
			<-hold
		}
		io.WriteString(w, "origin took admission "+r.Header.Get(HeaderAdmissionID))
	}))
	t.Cleanup(st.origin.Close)
	st.edge(1, products)
	return st
}

// replica is another edgeq replica in front of st's origin, on st's store, as a second process would
// be: its own node id (so its own admission and bid ids), service, proxy, listeners and metrics. What
// reaches the origin is counted on st.
func (st *stack) replica(node int64, products ...config.Product) *stack {
	st.t.Helper()
	r := &stack{t: st.t, store: st.store, origin: st.origin, originTimeout: st.originTimeout, releaseOn: st.releaseOn}
	r.edge(node, products)
	return r
}

// edge builds edgeq in front of st.origin: the admission service with ids of node, seeded with
// products, its proxy and public listener, and its admin listener.
func (st *stack) edge(node int64, products []config.Product) {
	t := st.t
	t.Helper()
	st.reg = prometheus.NewRegistry()
	assets := static.New("/_edgeq/static/")
	pages, err := templates.Parse("", template.FuncMap{"static": assets.URL})
	if err != nil {
		t.Fatal(err)
	}
	responder := &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"}
	logger := slog.New(slog.DiscardHandler)
	st.svc = New(Options{
		Store: st.store, IDs: ids.New(node), IdentityKey: []byte("identity"), MaxBodyBytes: 4096, ClaimTTL: time.Minute,
		Prefix: "/_edgeq", Responder: responder, Logger: logger, Registry: st.reg,
		Backoff:   []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond},
		ClaimIdle: 300 * time.Millisecond,
		// auctions_source's breaker: the default 5 failures, a cool-down short enough to wait for.
		SourceCooldown: sourceCooldown,
	})
	routes := testRoutes()
	for i := range routes {
		if st.releaseOn != nil && routes[i].Admission.Type != "" {
			routes[i].Admission.ReleaseOn = st.releaseOn
		}
	}
	if err := st.svc.UseIdentities(routes); err != nil {
		t.Fatal(err)
	}
	if err := st.svc.Apply(context.Background(), &config.Config{Products: products}, nil); err != nil {
		t.Fatal(err)
	}
	originURL, _ := url.Parse(st.origin.URL)
	endpoints := http.NewServeMux()
	st.svc.Register(endpoints)
	st.visitors = visitor.New([]byte("visitors"))
	p := proxy.New(proxy.Options{
		Origin: originURL, OriginTimeout: st.originTimeout, Prefix: "/_edgeq",
		Endpoints: web.Routes(endpoints, responder), Steps: []proxy.Step{st.svc}, Responder: responder,
		Metrics: metrics.New(prometheus.NewRegistry()), Logger: logger,
		Visitors: &proxy.Visitors{IDs: st.visitors, Cookies: web.Cookies{Secure: "auto"}},
	})
	table, err := p.Compile(routes)
	if err != nil {
		t.Fatal(err)
	}
	p.Use(table)
	st.public = httptest.NewServer(p)
	t.Cleanup(st.public.Close)
	st.admin = httptest.NewServer(admin.Handler(admin.Options{
		APIKey: adminKey, Gatherer: st.reg, Responder: responder, Logger: logger,
		Ready: func(context.Context) map[string]error { return nil },
		API:   []func(*http.ServeMux){st.svc.RegisterAdmin},
	}))
	t.Cleanup(st.admin.Close)
	t.Cleanup(st.workers.Wait)
}

// startWorker runs an event worker until the test ends.
func (st *stack) startWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	st.t.Cleanup(cancel)
	st.workers.Go(func() { st.svc.Run(ctx) })
}

// buyTogether admits purchases of one product in one reserve.lua call, as the reserver groups
// requests that arrive together, and commits them, as a replica does once the shop accepted each: one
// entry of the product's admits stream names them all. It returns their admission ids.
func (st *stack) buyTogether(product string, users []string, qtys []int64) []string {
	st.t.Helper()
	ctx := context.Background()
	claims := make([]Claim, len(users))
	commits := make([]pendingCommit, len(users))
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i] = st.svc.o.IDs.NextString()
		claims[i] = Claim{Owner: product, User: st.svc.pseudonyms.of(u), ID: ids[i], Value: qtys[i]}
		commits[i] = pendingCommit{kind: st.svc.stock(), c: claims[i], st: &settling{done: make(chan struct{})}}
	}
	res, err := st.svc.reserveNow(ctx, product, claims)
	if err != nil {
		st.t.Fatal(err)
	}
	for i, r := range res {
		if r.code != 0 {
			st.t.Fatalf("purchase %d of %v refused: code %d", i, users, r.code)
		}
	}
	st.svc.applyCommits(ctx, commits)
	return ids
}

type answer struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	json.Unmarshal(raw, &a.json)
	return a
}

// checkout posts the checkout form as user.
func (st *stack) checkout(product, user string, form url.Values) answer {
	st.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	req, _ := http.NewRequest("POST", st.public.URL+"/checkout/"+product, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	return do(st.t, req)
}

func (st *stack) adminGet(path string) answer {
	st.t.Helper()
	req, _ := http.NewRequest("GET", st.admin.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	return do(st.t, req)
}

func (st *stack) adminSend(method, path, contentType, body string) answer {
	st.t.Helper()
	req, _ := http.NewRequest(method, st.admin.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return do(st.t, req)
}

func (st *stack) remaining(product string) int64 {
	st.t.Helper()
	n, err := st.store.Client.Get(context.Background(), stockKey(st.store.Keys, product)).Int64()
	if err != nil {
		st.t.Fatal(err)
	}
	return n
}

// bid posts the bid form as user; an empty amount leaves the field out.
func (st *stack) bid(auction, user, amount string) answer {
	st.t.Helper()
	return st.bidOn("/auctions/", auction, user, amount)
}

// bidOn places a bid through the route under prefix ("/auctions/" or "/strict/auctions/").
func (st *stack) bidOn(prefix, auction, user, amount string) answer {
	st.t.Helper()
	form := url.Values{}
	if amount != "" {
		form.Set("amount", amount)
	}
	req, _ := http.NewRequest("POST", st.public.URL+prefix+auction+"/bid", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	return do(st.t, req)
}

// get fetches a public path as JSON.
func (st *stack) get(path string) answer {
	st.t.Helper()
	req, _ := http.NewRequest("GET", st.public.URL+path, nil)
	req.Header.Set("Accept", "application/json")
	return do(st.t, req)
}

// addAuctions seeds auctions as the configuration file does.
func (st *stack) addAuctions(auctions ...config.Auction) {
	st.t.Helper()
	if err := st.svc.Apply(context.Background(), &config.Config{Auctions: auctions}, nil); err != nil {
		st.t.Fatal(err)
	}
}

func auction(id, start, inc string, endsIn time.Duration) config.Auction {
	return config.Auction{ID: id, StartingPrice: start, MinIncrement: inc, EndsAt: time.Now().Add(endsIn).UTC().Truncate(time.Second)}
}

func product(id string, stock int64, perUser int) config.Product {
	return config.Product{ID: id, Stock: stock, PerUserLimit: perUser, Name: "Product " + id, Price: 100}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, within, what, cond)
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// storedRecord reads an admission's record as the stock scripts keep it (stockrecords.go): the zero
// record when there is none.
func storedRecord(t *testing.T, s *store.Store, product, id string) storeRecord {
	t.Helper()
	v, err := s.Client.HGet(context.Background(), recordsKey(s.Keys, product, id), id).Result()
	if err != nil {
		return storeRecord{}
	}
	return parseStoreRecord(v)
}

// orphanMark is the orphan sweep's mark on an admission's record ("held", "released" or "").
func orphanMark(s *store.Store, product, id string) string {
	return s.Client.HGet(context.Background(), recordsKey(s.Keys, product, id), id+":orphan").Val()
}

// indexedIDs is every id an owner's admin lists (records.go) hold, of the days within the retention.
func indexedIDs(t testing.TB, svc *Service, table *AdminTable, owner string) []string {
	t.Helper()
	var out []string
	for _, day := range svc.recordDays(time.Now()) {
		ids, err := svc.client.LRange(context.Background(), table.IDs(owner, day), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids...)
	}
	return out
}

// usersIndexed is the ids an owner's users hash holds, all users together.
func usersIndexed(t testing.TB, svc *Service, table *AdminTable, owner string) map[string][]string {
	t.Helper()
	lists, err := svc.client.HGetAll(context.Background(), table.Users(owner)).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for user, list := range lists {
		out[user] = strings.Fields(list)
	}
	return out
}

// indexedCount is how many ids every product's admin lists hold.
func indexedCount(t testing.TB, svc *Service) int64 {
	t.Helper()
	products, err := svc.client.SMembers(context.Background(), productIndexKey(svc.keys)).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range products {
		n += len(indexedIDs(t, svc, svc.stock().table, p))
	}
	return int64(n)
}
