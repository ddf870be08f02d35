package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"text/template"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/graphql"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// Table is a compiled route table. It is immutable: a reload compiles a new one and swaps it in.
type Table struct {
	routes []compiledRoute
	// hostRoutes: some route is scoped to a host, so a request without a Host is refused (checkHost).
	hostRoutes bool
	// sites: every route is scoped to a host, and these are the hosts; nil while some route applies to
	// any host. A request for another host is misdirected (sites.go).
	sites *siteSet
	// visitors: some route identifies users by visitor id, so clients are given one (visitor.go).
	visitors bool
	// Missing lists, per route, requirements no step of this build enforces. Such a route is closed:
	// it answers 503 GATE_UNAVAILABLE rather than letting the request through unchecked.
	Missing map[string][]string
	// maxBody bounds the body a graphql: route reads to see the operation (server.max_body_bytes);
	// seen is the replica's memory of persisted query documents.
	maxBody int64
	seen    *graphql.Seen
	// pools are the pools of shop servers its routes send requests to (pool.go).
	pools *poolSet
}

type compiledRoute struct {
	name string
	// One ServeMux per route gives first-match-wins over ServeMux patterns (a single mux would pick
	// the most specific pattern instead), with ServeMux's own matching and {wildcards}.
	mux *http.ServeMux
	// method and literal reject most non-matching requests before the mux is asked: the pattern's
	// method ("" for any) and the literal start of its path up to the first wildcard, without a
	// trailing slash.
	method  string
	literal string
	// duration is this route's latency histogram, resolved once instead of per request.
	duration prometheus.Observer
	// open: on_store_error is open, so while the store is unavailable the route skips its gates.
	open bool
	// bypass is edgeq_store_bypass_total{route}, typed as web.StorePolicy holds it (no conversion
	// per request).
	bypass interface{ Inc() }
	// refusal is the route's refusal.json template, nil for the standard error body; refusalStatus its
	// refusal.status (0: each refusal's own).
	refusal       *template.Template
	refusalStatus int
	// gql, on a graphql: route, decides whether the route applies to a request on its path.
	gql *graphql.Route
	// site is routes[].host: the route applies to requests for that host only (sites.go).
	site site
	// forward sends the route's requests to its pool (routes[].origin).
	forward http.HandlerFunc
}

// CompileWith builds the route table: each route's handler is the gate chain of steps, then the
// route's in-flight stage (max_in_flight), then the proxy to the route's pool, one of origin:'s and
// origins (pool.go).
func (p *Proxy) CompileWith(routes []config.Route, origins []config.Pool) (*Table, error) {
	pools, err := p.newPoolSet(origins)
	if err != nil {
		return nil, err
	}
	t := &Table{Missing: map[string][]string{}, maxBody: p.maxBodyBytes, seen: p.seen, pools: pools}
	for i, route := range routes {
		forward, err := pools.routeForward(p, route)
		if err != nil {
			return nil, fmt.Errorf("routes[%d].origin: %w", i, err)
		}
		handler := p.limitInFlight(route, forward)
		for j := len(p.steps) - 1; j >= 0; j-- {
			var err error
			if handler, err = p.steps[j].Wrap(route, handler); err != nil {
				return nil, fmt.Errorf("routes[%d] (%s): %w", i, route.Name, err)
			}
		}
		var missing []string
		for _, req := range requirements(route) {
			if !slices.ContainsFunc(p.steps, func(s Step) bool { return s.Requirement() == req }) {
				missing = append(missing, req)
			}
		}
		if route.MaxInFlight > 0 && p.inflight == nil {
			missing = append(missing, requireInFlight)
		}
		if len(missing) > 0 {
			t.Missing[route.Name] = missing
			handler = p.closedRoute(missing)
		}
		mux := http.NewServeMux()
		pattern := canonicalPattern(route.Match)
		if err := register(mux, pattern, handler); err != nil {
			return nil, fmt.Errorf("routes[%d].match: %w", i, err)
		}
		refusal, err := config.CompileRefusal(route.Refusal.JSON)
		if err != nil {
			return nil, fmt.Errorf("routes[%d].refusal.json: %w", i, err)
		}
		gql, err := graphql.Compile(route.GraphQL, p.seen)
		if err != nil {
			return nil, fmt.Errorf("routes[%d].%w", i, err)
		}
		method, literal := patternPrefilter(pattern)
		s, err := routeSite(route, pattern)
		if err != nil {
			return nil, fmt.Errorf("routes[%d].host: %w", i, err)
		}
		t.hostRoutes = t.hostRoutes || config.PatternHost(pattern) != "" || route.Host != ""
		t.visitors = t.visitors || route.UsesVisitor()
		t.routes = append(t.routes, compiledRoute{
			name: route.Name, mux: mux, method: method, literal: literal,
			duration: p.metrics.HTTPDuration.WithLabelValues(route.Name),
			open:     route.OnStoreError == config.OnStoreErrorOpen,
			bypass:   p.metrics.StoreBypass.WithLabelValues(route.Name),
			refusal:  refusal, refusalStatus: route.Refusal.Status,
			gql: gql, site: s, forward: forward,
		})
	}
	t.sites = namedSites(routes)
	return t, nil
}

func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// patternPrefilter extracts the method and the literal path start of a ServeMux pattern.
func patternPrefilter(pattern string) (method, literal string) {
	method, literal = config.PatternMethod(pattern), config.PatternPath(pattern)
	if i := strings.IndexByte(literal, '{'); i >= 0 {
		literal = literal[:i]
	}
	return method, strings.TrimSuffix(literal, "/")
}

// lookup finds the first route for r, in the table's order: a route with a host (routes[].host, or a
// host in its pattern) is skipped for other hosts, but is not preferred to a host-less route above it,
// as a single ServeMux would. Matching works on the canonical host (lower case, no trailing
// dot: "SHOP.example.com." is the site "shop.example.com") and the canonical form of the path, the one
// an origin's router is likely to act on: percent-decoded, cleaned of "//", "." and ".." segments, and, if
// nothing matches, without a trailing slash. So "/checkout%2F1", "/x/../checkout/1" and
// "/checkout/1/" cannot slip past a "POST /checkout/{product}" route.
//
// It returns the route and the request to serve it with (carrying the canonical path, which is what
// the gate checked and what the origin receives), or, for an unclean path of a route, the clean path
// to redirect to. No route: all zero, and the request passes through untouched. A graphql: route
// applies only to the operations it guards (internal/graphql): refused names the route and the refusal
// when edgeq cannot tell what the shop would execute.
func (t *Table) lookup(r *http.Request) (route *compiledRoute, req *http.Request, redirect string, refused *web.Error) {
	if len(t.routes) == 0 {
		return nil, nil, "", nil
	}
	orig := r
	if host := canonicalHost(r.Host); host != r.Host {
		r = r.WithContext(r.Context()) // a shallow copy, matched (and forwarded) with the canonical host
		r.Host = host
	}
	decoded := r.URL.Path
	clean := cleanPath(decoded)
	req = r
	if clean != decoded || r.URL.RawPath != "" {
		req = withPath(r, clean)
	}
	var gq graphqlRead // read once, by the first graphql: route the path matches
	route, req, refused = t.first(req, clean, &gq)
	if route == nil && len(clean) > 1 && clean[len(clean)-1] == '/' {
		stripped := clean[:len(clean)-1]
		req = withPath(r, stripped)
		gq.restore(req)
		route, req, refused = t.first(req, stripped, &gq)
	}
	// Reading the request as GraphQL took its body and put an identical one back on the copy it read:
	// whichever copy goes on (the original when no route applies) carries it.
	gq.restore(orig)
	gq.restore(req)
	if route == nil {
		return nil, nil, "", nil
	}
	if refused != nil {
		return route, req, "", refused
	}
	if clean != decoded {
		return route, nil, (&url.URL{Path: clean, RawQuery: r.URL.RawQuery}).String(), nil
	}
	return route, req, "", nil
}

// first finds the first route for r. For a graphql: route it reads the request as GraphQL (once,
// into *gq) and returns r carrying the match, or a refusal; a graphql: route that does not apply is
// skipped.
func (t *Table) first(r *http.Request, cleanPath string, gq *graphqlRead) (*compiledRoute, *http.Request, *web.Error) {
	for i := range t.routes {
		cr := &t.routes[i]
		if cr.method != "" && r.Method != cr.method && (cr.method != http.MethodGet || r.Method != http.MethodHead) {
			continue
		}
		if !strings.HasPrefix(cleanPath, cr.literal) || !cr.site.matches(r.Host) {
			continue
		}
		if _, pattern := cr.mux.Handler(r); pattern == "" {
			continue
		}
		if cr.gql == nil {
			return cr, r, nil
		}
		if gq.req == nil {
			read, e := graphql.Read(r, t.maxBody, t.seen)
			gq.read, gq.body, gq.getBody = true, r.Body, r.GetBody
			if e != nil {
				return cr, r, e
			}
			gq.req = read
		}
		m, e := cr.gql.Match(gq.req)
		if e != nil {
			return cr, r, e
		}
		if m != nil {
			return cr, graphql.WithMatch(r, m), nil
		}
	}
	return nil, r, nil
}

// graphqlRead is a request read as GraphQL during one lookup, and the body put back by the reading.
type graphqlRead struct {
	req     *graphql.Request
	read    bool
	body    io.ReadCloser
	getBody func() (io.ReadCloser, error)
}

// restore gives r the body the reading put back (nothing when nothing was read).
func (g *graphqlRead) restore(r *http.Request) {
	if g.read && r != nil {
		r.Body, r.GetBody = g.body, g.getBody
	}
}

// canonicalHost returns a Host header as route matching sees it: its name as sites are told apart
// (vocab.HostName: lower case, without the trailing dot of a fully qualified name), in its brackets
// again for an IP literal, and the port kept when it is one (digits after a single colon, or after
// "]" for IPv6; vocab.SplitHost, vocab.ValidPort): ServeMux matches a pattern's host against the
// whole Host. Host names are case-insensitive, and a host pattern must not be skipped by spelling the
// same site differently; a malformed port ("shop.example:80:", which nginx reads as shop.example but
// ServeMux could not split) is dropped. It does not allocate when host is already canonical.
func canonicalHost(host string) string {
	name, port := vocab.SplitHost(host)
	if !vocab.ValidPort(port) {
		port = ""
	}
	if len(name)+len(port) == len(host) && plainName(name) {
		return host // the usual Host, already canonical: no second look
	}
	canonical, written := vocab.CanonicalName(name), name
	bracketed := len(name) >= 2 && name[0] == '[' && name[len(name)-1] == ']'
	if bracketed {
		written = name[1 : len(name)-1]
	}
	if canonical == written && len(name)+len(port) == len(host) {
		return host
	}
	if bracketed {
		return "[" + canonical + "]" + port
	}
	return canonical + port
}

// plainName reports whether name is already vocab.CanonicalName's: no upper case, no trailing dot,
// no brackets.
func plainName(name string) bool {
	if name == "" || name[0] == '[' || name[len(name)-1] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' || c >= 0x80 {
			return false
		}
	}
	return true
}

// canonicalPattern writes the method of a ServeMux pattern ("[METHOD ][HOST]/PATH") in upper case, as
// canonicalizeMethod does with requests, and its host as canonicalHost would, so "post
// Shop.Example./up" matches the requests those turn into "POST" and "shop.example".
func canonicalPattern(pattern string) string {
	pattern = strings.TrimSpace(pattern)
	method, rest := "", pattern
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		method, rest = strings.ToUpper(pattern[:i+1]), strings.TrimLeft(pattern[i+1:], " \t")
	}
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return method + rest
	}
	return method + canonicalHost(rest[:slash]) + rest[slash:]
}

// withPath returns a shallow copy of r whose URL has the given decoded path.
func withPath(r *http.Request, p string) *http.Request {
	u := *r.URL
	u.Path, u.RawPath = p, ""
	r2 := r.WithContext(r.Context()) // a shallow copy
	r2.URL = &u
	return r2
}

// cleanPath is ServeMux's canonical path: rooted, with "//", "." and ".." resolved and a trailing slash
// kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		np += "/"
	}
	return np
}

// Routes returns the names of the compiled routes in order.
func (t *Table) Routes() []string {
	names := make([]string, len(t.routes))
	for i, r := range t.routes {
		names[i] = r.name
	}
	return names
}

func (p *Proxy) closedRoute(missing []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.responder.Error(w, r, web.ErrGateUnavailable.Because(fmt.Errorf("this build of edgeq does not enforce %v", missing)))
	})
}
