package proxy

// The health of the servers of a pool (docs/reference.md "Pools of shop servers"): the active check
// asks each server for health.path every health.interval; the passive one counts the requests that
// got no answer. edgeq_origin_up and edgeq_origin_requests_total say what this replica knows.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// serverAnswered records the answer of a forwarded request's server. Any answer, a 5xx too, ends a
// run of failures: the server takes requests, and a 5xx is the shop's answer about this one request
// (a checkout that collided with another, a product it refuses), which the next server would give
// as well; taking servers out for them would empty a pool that works.
func (p *Proxy) serverAnswered(o *web.Outcome, status int) {
	pk := pickOf(o)
	if pk == nil {
		p.defaultPool.servers[0].count(status)
		return
	}
	pk.server.count(status)
	if pk.server.fails.Load() != 0 {
		pk.server.fails.Store(0)
	}
}

// serverFailed records a forwarded request that got no answer (err) from its server. A visitor who
// left, a visitor's body that broke off (bodyErr) and a fenced request (never written) are nobody's
// failure but the visitor's or this replica's: not counted.
func (p *Proxy) serverFailed(r *http.Request, err, bodyErr error) {
	if bodyErr != nil || errors.Is(err, web.ErrFenced) || r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	pk := pickOf(web.OutcomeFrom(r.Context()))
	if pk == nil {
		p.defaultPool.servers[0].count(0)
		return
	}
	pk.pool.failed(pk.server)
}

// failed counts a request that got no answer from s (refused, reset, timed out) and takes s out for
// passive.down_for after passive.fail_after of them in a row.
func (pl *pool) failed(s *server) {
	s.count(0)
	after := int32(pl.passive.FailAfter) //nolint:gosec // passive.fail_after is validated to 0..1000
	if after <= 0 || s.fails.Add(1) < after {
		return
	}
	now := time.Now()
	until := s.downUntil.Load()
	if until > now.UnixNano() || !s.downUntil.CompareAndSwap(until, now.Add(pl.passive.DownFor).UnixNano()) {
		return // out already: requests sent before it was taken out fail too
	}
	// Back after down_for on trial: its first failure then takes it out again.
	s.fails.Store(after - 1)
	pl.logger().Warn("shop server taken out: requests in a row got no answer", "pool", pl.name, "url", s.raw,
		"failures", after, "for", pl.passive.DownFor.String())
}

// RunHealth runs the active health checks of the installed pools until ctx ends. Installing a table
// with other pools (a reload) restarts them on those; a server kept by the reload keeps its state.
func (p *Proxy) RunHealth(ctx context.Context) {
	tr := NewHTTPTransport(0)
	// A connection per check, as a new visitor's request would open: a server that stopped accepting
	// fails its check even while a kept-alive connection to it is still open.
	tr.DisableKeepAlives = true
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a 3xx is an answer: healthy
	}}
	for {
		set := p.table.Load().pools
		checking, stop := context.WithCancel(ctx)
		var checks sync.WaitGroup
		for _, pl := range set.list {
			if pl.health.Path == "" {
				continue
			}
			for _, s := range pl.servers {
				checks.Go(func() { pl.check(checking, client, s) })
			}
		}
		select {
		case <-ctx.Done():
		case <-p.poolsInstalled:
		}
		stop()
		checks.Wait()
		if ctx.Err() != nil {
			return
		}
	}
}

// installed tells RunHealth that a table was installed, whose pools may be others.
func (p *Proxy) installed() {
	select {
	case p.poolsInstalled <- struct{}{}:
	default: // told already
	}
}

// check asks s for the health path every interval until ctx ends.
func (pl *pool) check(ctx context.Context, client *http.Client, s *server) {
	target := healthURL(s.url, pl.health.Path)
	tick := time.NewTicker(pl.health.Interval)
	defer tick.Stop()
	for {
		pl.probe(ctx, client, s, target)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe makes one check: a 2xx or 3xx within the timeout is a success. unhealthy_after failures in a
// row take the server out, healthy_after successes in a row put it back.
func (pl *pool) probe(ctx context.Context, client *http.Client, s *server, target string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return // the path was validated with the configuration
	}
	timed, cancel := context.WithTimeout(ctx, pl.health.Timeout)
	defer cancel()
	req = req.WithContext(timed)
	req.Header.Set("User-Agent", "edgeq-health-check")
	resp, err := client.Do(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}
	if ctx.Err() != nil {
		return // stopped (a reload, shutdown): no result
	}
	if err == nil && status >= 200 && status < 400 {
		s.failRun, s.okRun = 0, s.okRun+1
		if s.checkedDown.Load() && s.okRun >= pl.health.HealthyAfter {
			s.checkedDown.Store(false)
			pl.logger().Info("shop server back: its health checks pass", "pool", pl.name, "url", s.raw, "successes", s.okRun)
		}
		return
	}
	s.okRun, s.failRun = 0, s.failRun+1
	if !s.checkedDown.Load() && s.failRun >= pl.health.UnhealthyAfter {
		s.checkedDown.Store(true)
		reason := "status " + strconv.Itoa(status)
		if err != nil {
			reason = web.ClipErr(err)
		}
		pl.logger().Warn("shop server taken out: its health checks fail", "pool", pl.name, "url", s.raw,
			"failures", s.failRun, "last", reason)
	}
}

// healthURL is the health path on a server, below the server URL's own path as a visitor's request
// path would be.
func healthURL(base *url.URL, path string) string {
	ref, err := url.Parse(path)
	if err != nil {
		return ""
	}
	u := *base
	u.Path, u.RawPath = strings.TrimSuffix(base.Path, "/")+ref.Path, ""
	u.RawQuery = ref.RawQuery
	return u.String()
}

var (
	originUpDesc = prometheus.NewDesc(vocab.Namespace+"_origin_up",
		"1 while a server of a pool takes requests (no health check has it out), else 0; origin:'s server is never checked.", []string{"pool", "url"}, nil)
	originRequestsDesc = prometheus.NewDesc(vocab.Namespace+"_origin_requests_total",
		"Requests sent to each server of each pool, by the class of its answer: 1xx to 5xx, or error (refused, reset, timed out).", []string{"pool", "url", "class"}, nil)
)

// poolCollector exports the servers of the installed pools, read at each scrape: a server a reload
// removed leaves no series behind.
type poolCollector struct{ p *Proxy }

// PoolCollector is the collector of edgeq_origin_up and edgeq_origin_requests_total.
func (p *Proxy) PoolCollector() prometheus.Collector { return poolCollector{p} }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- originUpDesc
	ch <- originRequestsDesc
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now().UnixNano()
	for _, pl := range c.p.table.Load().pools.list {
		for _, s := range pl.servers {
			up := 0.0
			if pl.usable(s, now) {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(originUpDesc, prometheus.GaugeValue, up, pl.name, s.raw)
			for class, name := range answerClasses {
				ch <- prometheus.MustNewConstMetric(originRequestsDesc, prometheus.CounterValue,
					float64(s.requests[class].Load()), pl.name, s.raw, name)
			}
		}
	}
}
