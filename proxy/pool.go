package proxy

// Pools of shop servers (docs/reference.md "Pools of shop servers"): origin: is the pool "default",
// one server that every unrouted request goes to the way it always has; origins[] are named pools
// that routes send their requests to. A pool request is given a server here (forwardTo), the
// transport moves it to another only when the one it was given refused the connection (retry.go),
// and the health of each server is kept in health.go.

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
)

// server is one shop server of a pool and what this replica knows of it. A reload that keeps a pool's
// server keeps this state (newPoolSet).
type server struct {
	url *url.URL
	raw string // as configured: the url label of its metrics

	// checkedDown: the active health check took it out (only while its pool has a health path).
	checkedDown atomic.Bool
	// downUntil: the passive check took it out until then (unix nanoseconds).
	downUntil atomic.Int64
	// fails counts its requests in a row that got no answer (passive check).
	fails atomic.Int32
	// inFlight is this replica's requests at it (least_conn).
	inFlight atomic.Int64
	// okRun and failRun are the active check's results in a row; only its checker touches them.
	okRun, failRun int

	requests [len(answerClasses)]atomic.Uint64 // edgeq_origin_requests_total by class
}

// answerClasses are the class label values of edgeq_origin_requests_total: the status class of the
// server's answer, or "error" when it gave none.
var answerClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx", "error"}

const classError = len(answerClasses) - 1

// count adds a request answered with status (0: no answer) to the server's counts.
func (s *server) count(status int) {
	class := classError
	if status >= 100 && status < 600 {
		class = status/100 - 1
	}
	s.requests[class].Add(1)
}

// pool is one pool of servers and how it spreads requests over them.
type pool struct {
	name    string
	servers []*server
	lb      selector
	health  config.PoolHealth
	passive config.PoolPassive
	cursor  atomic.Uint64 // round_robin's position, and least_conn's start among equals
	log     *slog.Logger
}

func (pl *pool) logger() *slog.Logger {
	if pl.log == nil {
		return slog.Default()
	}
	return pl.log
}

// usable reports whether s takes requests at now (unix nanoseconds): neither check has it out.
func (pl *pool) usable(s *server, now int64) bool {
	return (pl.health.Path == "" || !s.checkedDown.Load()) && s.downUntil.Load() <= now
}

// A selector is a load-balancing policy (origins[].lb): the index of a usable server of pl not in
// tried (a bit per index), or -1 when there is none.
type selector interface {
	choose(pl *pool, tried uint64, now int64) int
}

// selectors are the policies by their name in the configuration.
var selectors = map[string]selector{
	config.LBRoundRobin: roundRobin{},
	config.LBLeastConn:  leastConn{},
	config.LBFirst:      firstUp{},
}

// roundRobin takes the servers in turn, skipping those that are out.
type roundRobin struct{}

func (roundRobin) choose(pl *pool, tried uint64, now int64) int {
	n := uint64(len(pl.servers))
	start := pl.cursor.Add(1) - 1
	for i := range n {
		j := int((start + i) % n) //nolint:gosec // below n, the number of servers
		if tried&(1<<j) == 0 && pl.usable(pl.servers[j], now) {
			return j
		}
	}
	return -1
}

// leastConn takes the server with the fewest of this replica's requests in flight; among equals, in
// turn, so that an idle pool is not all sent to its first server.
type leastConn struct{}

func (leastConn) choose(pl *pool, tried uint64, now int64) int {
	n := uint64(len(pl.servers))
	start := pl.cursor.Add(1) - 1
	best, fewest := -1, int64(0)
	for i := range n {
		j := int((start + i) % n) //nolint:gosec // below n, the number of servers
		s := pl.servers[j]
		if tried&(1<<j) != 0 || !pl.usable(s, now) {
			continue
		}
		if load := s.inFlight.Load(); best < 0 || load < fewest {
			best, fewest = j, load
		}
	}
	return best
}

// firstUp takes the first server of the list that is up: a primary and its backups.
type firstUp struct{}

func (firstUp) choose(pl *pool, tried uint64, now int64) int {
	for j, s := range pl.servers {
		if tried&(1<<j) == 0 && pl.usable(s, now) {
			return j
		}
	}
	return -1
}

// pick is a pool request's server: the one it is sent to, and those it was refused by.
type pick struct {
	pool   *pool
	server *server
	tried  uint64 // a bit per index of pool.servers
	// connected: a connection to a server was had for the request, so something of it may have
	// reached that server: it goes to no other from then on.
	connected atomic.Bool
}

// choose gives the request a usable server of the pool it has not tried, counted in flight there;
// false when there is none.
func (pk *pick) choose() bool {
	j := pk.pool.lb.choose(pk.pool, pk.tried, time.Now().UnixNano())
	if j < 0 {
		return false
	}
	pk.tried |= 1 << j
	pk.server = pk.pool.servers[j]
	pk.server.inFlight.Add(1)
	return true
}

// done ends the request's stay at its server.
func (pk *pick) done() { pk.server.inFlight.Add(-1) }

// pickOf returns the pool choice of a forwarded request, nil for a request to origin:'s server.
func pickOf(o *web.Outcome) *pick {
	if o == nil {
		return nil
	}
	pk, _ := o.Server.(*pick)
	return pk
}

// poolSet is the pools a route table sends requests to, by name: origin:'s and origins[].
type poolSet struct {
	byName map[string]*pool
	list   []*pool // origin:'s first, then origins[] in order
}

// newPoolSet builds the pools of origins[] beside origin:'s. A server the running table's pools
// already have under the same pool name and URL keeps its state: its health, its requests in flight
// and its counts.
func (p *Proxy) newPoolSet(origins []config.Pool) (*poolSet, error) {
	set := &poolSet{byName: map[string]*pool{config.DefaultPool: p.defaultPool}, list: []*pool{p.defaultPool}}
	var running *poolSet
	if t := p.table.Load(); t != nil {
		running = t.pools
	}
	for i, o := range origins {
		lb, ok := selectors[o.LB]
		if !ok || len(o.URLs) == 0 || len(o.URLs) > config.MaxPoolServers {
			return nil, fmt.Errorf("origins[%d]: lb %q with %d servers", i, o.LB, len(o.URLs))
		}
		pl := &pool{name: o.Name, lb: lb, health: o.Health, passive: o.Passive, log: p.logger}
		for j, raw := range o.URLs {
			s := running.server(o.Name, raw)
			if s == nil {
				u, err := url.Parse(raw)
				if err != nil {
					return nil, fmt.Errorf("origins[%d].urls[%d]: %w", i, j, err)
				}
				s = &server{url: u, raw: raw}
			}
			pl.servers = append(pl.servers, s)
		}
		set.byName[o.Name] = pl
		set.list = append(set.list, pl)
	}
	return set, nil
}

// server returns the server of the named pool with that URL, nil when there is none.
func (set *poolSet) server(pool, raw string) *server {
	if set == nil || set.byName[pool] == nil {
		return nil
	}
	for _, s := range set.byName[pool].servers {
		if s.raw == raw {
			return s
		}
	}
	return nil
}

// initPools makes origin:'s pool, its one server never checked and always tried, and returns the pools
// of a table without origins[].
func (p *Proxy) initPools(origin *url.URL) *poolSet {
	s := &server{url: origin}
	if origin != nil {
		s.raw = origin.String()
	}
	p.defaultPool = &pool{name: config.DefaultPool, servers: []*server{s}, lb: firstUp{}, log: p.logger}
	p.poolsInstalled = make(chan struct{}, 1)
	return &poolSet{byName: map[string]*pool{config.DefaultPool: p.defaultPool}, list: []*pool{p.defaultPool}}
}

// forwardTo is the last handler of a route whose requests go to pl: forward itself for origin:'s
// pool, which keeps the way every request took before pools, with no per-request cost.
func (p *Proxy) forwardTo(pl *pool) http.HandlerFunc {
	if pl == p.defaultPool {
		return p.forward
	}
	return func(w http.ResponseWriter, r *http.Request) {
		o := web.OutcomeFrom(r.Context())
		if o == nil {
			// Not through ServeHTTP (which tracks every forwarded request): track it here, so the
			// choice of server reaches the rewrite and the transport.
			info := web.NewRequest(p.logger, "")
			info.TrackOutcome()
			r = r.WithContext(web.WithRequest(r.Context(), info))
			o = web.OutcomeFrom(r.Context())
		}
		pk := &pick{pool: pl}
		if !pk.choose() {
			p.noServer(w, r, o, pl)
			return
		}
		o.Server = pk
		defer pk.done() // at the server of the end: the transport may have moved the request
		p.forward(w, r)
	}
}

// noServer answers a request whose pool has no server up: 503 ORIGIN_UNAVAILABLE at once, nothing
// tried (a connect timeout per request would hold every visitor of a dead pool for seconds). The
// request never reached the shop: an admission gives its unit back.
func (p *Proxy) noServer(w http.ResponseWriter, r *http.Request, o *web.Outcome, pl *pool) {
	o.TransportError = true
	o.MarkAnswered()
	// A failure at once: counted with the others, so the error ratio of the alerts keeps its meaning.
	p.metrics.OriginDuration.Observe(0)
	p.metrics.OriginErrors.WithLabelValues(metrics.OriginUnavailable).Inc()
	p.responder.Error(w, r, web.ErrNoOriginServer.Because(fmt.Errorf("no server of pool %s is up", pl.name)))
}

// targetOf is the server URL a forwarded request goes to.
func (p *Proxy) targetOf(o *web.Outcome) *url.URL {
	if pk := pickOf(o); pk != nil {
		return pk.server.url
	}
	return p.origin
}

// Compile builds the route table for routes that use origin:'s pool only (CompileWith).
func (p *Proxy) Compile(routes []config.Route) (*Table, error) { return p.CompileWith(routes, nil) }

// routeForward is the last handler of route: forwarding to the pool it names.
func (set *poolSet) routeForward(p *Proxy, route config.Route) (http.HandlerFunc, error) {
	name := route.Origin
	if name == "" {
		name = config.DefaultPool
	}
	pl := set.byName[name]
	if pl == nil {
		return nil, fmt.Errorf("%q is not the name of any pool", route.Origin)
	}
	return p.forwardTo(pl), nil
}
