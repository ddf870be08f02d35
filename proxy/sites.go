package proxy

// Several sites behind one edgeq (docs/reference.md "Several sites"): a route scoped to a host with
// routes[].host, and the 421 for a host that no route names when every route names one.

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// site is the host a route applies to (routes[].host): name, a canonical host name; or, for
// "*.example.com", suffix ".example.com", which any single label before it matches ("a.example.com",
// not "a.b.example.com" nor "example.com" itself, as Caddy and nginx read a leading "*."). The zero
// site applies to every host.
type site struct {
	name, suffix string
}

// routeSite compiles a route's host, refusing one set both in host and in the match pattern (the two
// could disagree; configuration validation refuses it too).
func routeSite(route config.Route, pattern string) (site, error) {
	if route.Host == "" {
		return site{}, nil
	}
	if in := config.PatternHost(pattern); in != "" {
		return site{}, fmt.Errorf("%q, and match %q names a host too", route.Host, route.Match)
	}
	host := canonicalHost(route.Host)
	if suffix, ok := strings.CutPrefix(host, "*"); ok {
		if !strings.HasPrefix(suffix, ".") || len(suffix) < 2 {
			return site{}, errors.New("a wildcard host is \"*.\" followed by a host name")
		}
		return site{suffix: suffix}, nil
	}
	return site{name: host}, nil
}

// matches reports whether a request's Host, canonical as lookup makes it (canonicalHost), is the
// site's. It compares the name without the port: the port says which listener took the request, not
// which site it is for (and ServeMux drops it too before matching a pattern's host). Small enough to
// be inlined: a gated request tries it on every route whose path it matches.
func (s site) matches(host string) bool {
	return s.name == "" && s.suffix == "" || s.matchesName(host)
}

func (s site) matchesName(host string) bool {
	name, _ := vocab.SplitHost(host)
	if s.name != "" {
		return name == s.name
	}
	label, ok := strings.CutSuffix(name, s.suffix)
	return ok && label != "" && strings.IndexByte(label, '.') < 0
}

// siteSet is every host a table's routes name, when each route names one.
type siteSet struct {
	names map[string]bool
	wild  []site
}

// namedSites collects the hosts the routes name (routes[].host or the host of the match pattern); nil
// when some route names none, or there are no routes: then every host is served.
func namedSites(routes []config.Route) *siteSet {
	if len(routes) == 0 {
		return nil
	}
	set := &siteSet{names: map[string]bool{}}
	for _, route := range routes {
		pattern := canonicalPattern(route.Match)
		s, err := routeSite(route, pattern)
		switch {
		case err != nil:
			return nil // Compile refuses the table
		case s.suffix != "":
			set.wild = append(set.wild, s)
		case s.name != "":
			set.names[s.name] = true
		case config.PatternHost(pattern) != "":
			name, _ := vocab.SplitHost(config.PatternHost(pattern)) // canonical: canonicalPattern
			set.names[name] = true
		default:
			return nil
		}
	}
	return set
}

// misdirected reports whether a request for host names a site none of the table's routes is for,
// while every route is for a site.
func (t *Table) misdirected(host string) bool {
	if t.sites == nil {
		return false
	}
	host = canonicalHost(host)
	if name, _ := vocab.SplitHost(host); t.sites.names[name] {
		return false
	}
	for _, s := range t.sites.wild {
		if s.matches(host) {
			return false
		}
	}
	return true
}

// passThrough sends a request that matched no route to the origin, unless every route names a host
// and none names this one: then edgeq fronts sites it knows and this is not one of them, so it answers
// 421 rather than hand the request to a shop that may not expect it (a wrong DNS entry, a scanner
// trying names, a connection reused for another name). It returns the route label and the latency
// histogram the request counts under.
func (p *Proxy) passThrough(w http.ResponseWriter, r *http.Request, t *Table) (string, prometheus.Observer) {
	if t.misdirected(r.Host) {
		p.responder.Error(w, r, web.ErrMisdirected.Because(fmt.Errorf("no route names the host %q", web.ClipLog(r.Host))))
		return metrics.RouteEdgeq, p.edgeqDuration
	}
	p.forward(w, r)
	return metrics.RoutePassThrough, p.passDuration
}
