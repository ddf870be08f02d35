// Package edgetest is edgeq's admission in front of a counting origin, for the admission pipeline's
// tests and its kinds' tests: the admission service (built by the caller, so that this package
// imports neither admission nor a kind), the proxy with the routes of Routes, the public and the admin
// listeners, and an origin that counts what reaches it and can be told to fail.
package edgetest

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

	"github.com/edgeq/edgeq/admission/bid/auctions"
	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/admin"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/visitor"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// AdminKey is the admin listener's bearer key.
const AdminKey = "test-admin-key"

// The headers that carry an admission's id and a bid's id to the origin (docs/reference.md).
const (
	AdmissionHeader = "Edgeq-Admission-Id"
	BidHeader       = "Edgeq-Bid-Id"
)

// Service is what the stack needs of an admission service.
type Service interface {
	proxy.Step
	Register(mux *http.ServeMux)
	RegisterAdmin(mux *http.ServeMux)
	UseIdentities(routes []config.Route) error
	Apply(ctx context.Context, next, previous *config.Config) error
	Run(ctx context.Context)
}

// Deps are what the stack hands the service it builds: the node id of the replica (each has its own
// admission and bid ids), the store, and the responder, logger and metrics registry of the replica.
type Deps struct {
	Node      int64
	Store     *store.Store
	Responder *web.Responder
	Logger    *slog.Logger
	Registry  *prometheus.Registry
}

// Options say how to build a stack.
type Options struct {
	// Build makes the admission service of one replica.
	Build func(d Deps) Service
	// OriginTimeout is the proxy's origin timeout (30 s when 0).
	OriginTimeout time.Duration
	// ReleaseOn, when set, is every admission route's release_on (Routes' otherwise).
	ReleaseOn []string
	// Products are seeded as the configuration file does.
	Products []products.Product
}

// Stack is edgeq with admission in front of a counting origin.
type Stack struct {
	T       *testing.T
	Store   *store.Store
	Svc     Service
	Public  *httptest.Server
	Admin   *httptest.Server
	Origin  *httptest.Server
	Hits    atomic.Int64 // requests that reached the origin
	Status  atomic.Int64 // status the origin answers with (200 by default)
	Delay   atomic.Int64 // nanoseconds the origin waits before answering
	IDs     sync.Map     // admission ids the origin received -> true
	Bids    sync.Map     // bid ids the origin received -> amount (form value)
	BidHits atomic.Int64 // bid requests that reached the origin
	Fault   atomic.Value // string: "" (answer), "hang", "reset" (close the connection) or "garbage" (not HTTP)
	Hold    atomic.Value // chan struct{}: the origin sends its headers, then the body once it is closed
	Reg     *prometheus.Registry
	Workers sync.WaitGroup
	// Visitors signs the visitor ids of the proxy (routes with user: visitor).
	Visitors *visitor.IDs

	o Options
}

// Routes are the stack's routes: checkout by form, a JSON cart, a query-string purchase and bid forms.
func Routes() []config.Route {
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
		route("checkout", "POST /checkout/{product}", config.Admission{Own: map[string]string{"product": "path:product", "quantity": "form:quantity"}, User: "header:X-User"}),
		route("cart", "POST /api/cart", config.Admission{Own: map[string]string{"product": "json:items.0.sku", "quantity": "json:items.0.qty"}, User: "cookie:session"}),
		route("buy", "GET /buy", config.Admission{Own: map[string]string{"product": "query:p"}, User: "header:X-User"}),
		open("open-checkout", route("open-checkout", "POST /open-checkout/{product}", config.Admission{Own: map[string]string{"product": "path:product"}, User: "header:X-User"})),
		{Name: "bid", Match: "POST /auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Own: map[string]string{"auction": "path:id", "amount": "form:amount"}, User: "header:X-User", ReleaseOn: []string{"5xx", "error"}}},
		// A shop's own session cookie as the buyer and the bidder, and a JSON body with top-level keys.
		route("json-checkout", "POST /json-checkout/{product}", config.Admission{Own: map[string]string{"product": "path:product", "quantity": "json:quantity"}, User: "cookie:shop_session"}),
		{Name: "cookie-bid", Match: "POST /cookie/auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Own: map[string]string{"auction": "path:id", "amount": "form:amount"}, User: "cookie:shop_session", ReleaseOn: []string{"5xx", "error"}}},
		// A cart: one add-to-cart URL for every product, the SKU and a guest's e-mail in the JSON body;
		// only the products edgeq knows are guarded.
		func() config.Route {
			r := route("cart-add", "POST /carts/{cart}/items", config.Admission{Own: map[string]string{"product": "json:sku", "quantity": "json:quantity"}, User: "json:email"})
			r.Admission.UnknownOwner = config.UnknownPass
			// The shop's cart script reads error.message.
			r.Refusal.JSON = `{"error": {"message": "{{.Message}}", "code": "{{.Code}}", "left": "{{index .Fields "remaining_stock"}}"}}`
			return r
		}(),
		{Name: "open-bid", Match: "POST /open/auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Own: map[string]string{"auction": "path:id", "amount": "form:amount"}, User: "header:X-User", ReleaseOn: []string{"5xx", "error"},
			UnknownOwner: config.UnknownPass}},
		// As config.example.yaml's bid route: a bid the shop refuses with a 4xx is withdrawn.
		{Name: "strict-bid", Match: "POST /strict/auctions/{id}/bid", OnStoreError: "closed", Admission: config.Admission{
			Type: "bid", Own: map[string]string{"auction": "path:id", "amount": "form:amount"}, User: "header:X-User", ReleaseOn: []string{"4xx", "5xx", "error"}}},
		// One buyer per browser: the visitor id edgeq gives it.
		route("visitor-checkout", "POST /visitor/checkout/{product}", config.Admission{Own: map[string]string{"product": "path:product"}, User: config.UserVisitor}),
	}
}

// New starts a stack on s: its origin, and the first replica in front of it (node 1).
func New(t *testing.T, s *store.Store, o Options) *Stack {
	t.Helper()
	if o.OriginTimeout == 0 {
		o.OriginTimeout = 30 * time.Second
	}
	st := &Stack{T: t, Store: s, o: o}
	st.Status.Store(200)
	st.Origin = httptest.NewServer(http.HandlerFunc(st.serveOrigin))
	t.Cleanup(st.Origin.Close)
	st.edge(1, o.Products)
	return st
}

// serveOrigin is the origin: it counts what reaches it, fails as st.Fault says, waits st.Delay and
// answers st.Status.
func (st *Stack) serveOrigin(w http.ResponseWriter, r *http.Request) {
	t := st.T
	st.Hits.Add(1)
	if id := r.Header.Get(AdmissionHeader); id != "" {
		if _, dup := st.IDs.LoadOrStore(id, true); dup {
			t.Errorf("admission %s reached the origin twice", id)
		}
	}
	body, _ := io.ReadAll(r.Body)
	if f, _ := st.Fault.Load().(string); f != "" {
		fail(t, w, r, f)
		return
	}
	if id := r.Header.Get(BidHeader); id != "" {
		w.Header().Set("X-Bid-Id", id) // so that a bidder learns which id its bid got
		st.BidHits.Add(1)
		form, _ := url.ParseQuery(string(body))
		if _, dup := st.Bids.LoadOrStore(id, form.Get("amount")); dup {
			t.Errorf("bid %s reached the origin twice", id)
		}
	}
	if d := time.Duration(st.Delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("X-Body", url.QueryEscape(string(body)))
	w.WriteHeader(int(st.Status.Load()))
	if hold, _ := st.Hold.Load().(chan struct{}); hold != nil {
		w.(http.Flusher).Flush()
		<-hold
	}
	_, _ = io.WriteString(w, "origin took admission "+r.Header.Get(AdmissionHeader))
}

// fail answers as a broken origin does: "hang" never answers, "reset" closes the connection with a
// reset, "garbage" writes something that is not HTTP first.
func fail(t *testing.T, w http.ResponseWriter, r *http.Request, f string) {
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
			_, _ = buf.WriteString("SURPRISE\r\n\x00\x01 not http at all\r\n\r\n")
			_ = buf.Flush()
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // a reset, not a clean close
		}
		_ = conn.Close()
	}
}

// Replica is another edgeq replica in front of st's origin, on st's store, as a second process would
// be: its own node id (so its own admission and bid ids), service, proxy, listeners and metrics. What
// reaches the origin is counted on st.
func (st *Stack) Replica(node int64, ps ...products.Product) *Stack {
	st.T.Helper()
	r := &Stack{T: st.T, Store: st.Store, Origin: st.Origin, o: st.o}
	r.edge(node, ps)
	return r
}

// edge builds edgeq in front of st.Origin: the admission service with ids of node, seeded with
// products, its proxy and public listener, and its admin listener.
func (st *Stack) edge(node int64, ps []products.Product) {
	t := st.T
	t.Helper()
	st.Reg = prometheus.NewRegistry()
	assets := static.New("/_edgeq/static/")
	pages, err := templates.Parse("", template.FuncMap{"static": assets.URL})
	if err != nil {
		t.Fatal(err)
	}
	responder := &web.Responder{Pages: pages, Brand: "edgeq", Lang: "en"}
	logger := slog.New(slog.DiscardHandler)
	st.Svc = st.o.Build(Deps{Node: node, Store: st.Store, Responder: responder, Logger: logger, Registry: st.Reg})
	routes := Routes()
	for i := range routes {
		if st.o.ReleaseOn != nil && routes[i].Admission.Type != "" {
			routes[i].Admission.ReleaseOn = st.o.ReleaseOn
		}
	}
	if err := st.Svc.UseIdentities(routes); err != nil {
		t.Fatal(err)
	}
	if err := st.Svc.Apply(context.Background(), products.With(&config.Config{}, ps...), nil); err != nil {
		t.Fatal(err)
	}
	originURL, _ := url.Parse(st.Origin.URL)
	endpoints := http.NewServeMux()
	st.Svc.Register(endpoints)
	st.Visitors = visitor.New([]byte("visitors"))
	p := proxy.New(proxy.Options{
		Origin: originURL, OriginTimeout: st.o.OriginTimeout, Prefix: "/_edgeq",
		Endpoints: web.Routes(endpoints, responder), Steps: []proxy.Step{st.Svc}, Responder: responder,
		Metrics: metrics.New(prometheus.NewRegistry()), Logger: logger,
		Visitors: &proxy.Visitors{IDs: st.Visitors, Cookies: web.Cookies{Secure: "auto"}},
	})
	table, err := p.Compile(routes)
	if err != nil {
		t.Fatal(err)
	}
	p.Use(table)
	st.Public = httptest.NewServer(p)
	t.Cleanup(st.Public.Close)
	st.Admin = httptest.NewServer(admin.Handler(admin.Options{
		APIKey: AdminKey, Gatherer: st.Reg, Responder: responder, Logger: logger,
		Ready: func(context.Context) map[string]error { return nil },
		API:   []func(*http.ServeMux){st.Svc.RegisterAdmin},
	}))
	t.Cleanup(st.Admin.Close)
	t.Cleanup(st.Workers.Wait)
}

// StartWorker runs an event worker until the test ends.
func (st *Stack) StartWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	st.T.Cleanup(cancel)
	st.Workers.Go(func() { st.Svc.Run(ctx) })
}

// Answer is a response, read whole; JSON is its body decoded, when it is a JSON object.
type Answer struct {
	Status int
	Header http.Header
	Body   string
	JSON   map[string]any
}

// Do sends req and reads its answer.
func Do(t *testing.T, req *http.Request) Answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	a := Answer{Status: resp.StatusCode, Header: resp.Header, Body: string(raw)}
	_ = json.Unmarshal(raw, &a.JSON) // a body that is no JSON object leaves JSON nil
	return a
}

// AdminGet reads an admin path with the bearer key.
func (st *Stack) AdminGet(path string) Answer {
	st.T.Helper()
	req, _ := http.NewRequest("GET", st.Admin.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+AdminKey)
	return Do(st.T, req)
}

// AdminSend sends body to an admin path with the bearer key.
func (st *Stack) AdminSend(method, path, contentType, body string) Answer {
	st.T.Helper()
	req, _ := http.NewRequest(method, st.Admin.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+AdminKey)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return Do(st.T, req)
}

// Bid posts the bid form as user; an empty amount leaves the field out.
func (st *Stack) Bid(auction, user, amount string) Answer {
	st.T.Helper()
	return st.BidOn("/auctions/", auction, user, amount)
}

// BidOn places a bid through the route under prefix ("/auctions/" or "/strict/auctions/").
func (st *Stack) BidOn(prefix, auction, user, amount string) Answer {
	st.T.Helper()
	form := url.Values{}
	if amount != "" {
		form.Set("amount", amount)
	}
	return st.PostForm(prefix+auction+"/bid", user, form)
}

// Checkout posts the checkout form of product as user.
func (st *Stack) Checkout(product, user string, form url.Values) Answer {
	st.T.Helper()
	return st.PostForm("/checkout/"+product, user, form)
}

// PostForm posts form to path of the public listener as a JSON client, as user (the X-User header;
// "": none).
func (st *Stack) PostForm(path, user string, form url.Values) Answer {
	st.T.Helper()
	req, _ := http.NewRequest("POST", st.Public.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	return Do(st.T, req)
}

// Get fetches a public path as JSON.
func (st *Stack) Get(path string) Answer {
	st.T.Helper()
	req, _ := http.NewRequest("GET", st.Public.URL+path, nil)
	req.Header.Set("Accept", "application/json")
	return Do(st.T, req)
}

// AddAuctions seeds auctions as the configuration file does.
func (st *Stack) AddAuctions(list ...auctions.Auction) {
	st.T.Helper()
	if err := st.Svc.Apply(context.Background(), auctions.With(&config.Config{}, list...), nil); err != nil {
		st.T.Fatal(err)
	}
}

// Auction is an auction of the configuration file that ends endsIn from now.
func Auction(id, start, inc string, endsIn time.Duration) auctions.Auction {
	return auctions.Auction{ID: id, StartingPrice: start, MinIncrement: inc, EndsAt: time.Now().Add(endsIn).UTC().Truncate(time.Second)}
}

// Product is a product of the configuration file.
func Product(id string, stock int64, perUser int) products.Product {
	return products.Product{ID: id, Stock: stock, PerUserLimit: perUser, Name: "Product " + id, Price: 100}
}

// Num is a JSON number as an integer (0 when v is not a number).
func Num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// Admissions is the replica's edgeq_admissions_total of one kind and result (0 when it has none).
func (st *Stack) Admissions(kind, result string) float64 {
	st.T.Helper()
	families, err := st.Reg.Gather()
	if err != nil {
		st.T.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "edgeq_admissions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["type"] == kind && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
