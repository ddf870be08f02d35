package proxy

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/web"
)

// Table is a compiled route table. It is immutable: a reload compiles a new one and swaps it in.
type Table struct {
	routes []compiledRoute
	// Missing lists, per route, requirements no step of this build enforces. Such a route is closed:
	// it answers 503 GATE_UNAVAILABLE rather than letting the request through unchecked.
	Missing map[string][]string
}

type compiledRoute struct {
	name string
	// One ServeMux per route gives first-match-wins over ServeMux patterns (a single mux would pick
	// the most specific pattern instead), with ServeMux's own matching, path cleaning and {wildcards}.
	mux *http.ServeMux
}

// Compile builds the route table: each route's handler is the gate chain of steps ending in the proxy.
func (p *Proxy) Compile(routes []config.Route) (*Table, error) {
	t := &Table{Missing: map[string][]string{}}
	for i, route := range routes {
		var handler http.Handler = http.HandlerFunc(p.forward)
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
		if len(missing) > 0 {
			t.Missing[route.Name] = missing
			handler = p.closedRoute(missing)
		}
		mux := http.NewServeMux()
		if err := register(mux, route.Match, handler); err != nil {
			return nil, fmt.Errorf("routes[%d].match: %w", i, err)
		}
		t.routes = append(t.routes, compiledRoute{name: route.Name, mux: mux})
	}
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

// match returns the first route whose pattern matches r, or nil.
func (t *Table) match(r *http.Request) *compiledRoute {
	for i := range t.routes {
		if _, pattern := t.routes[i].mux.Handler(r); pattern != "" {
			return &t.routes[i]
		}
	}
	return nil
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
