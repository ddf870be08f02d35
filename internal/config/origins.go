package config

// Pools of shop servers (docs/reference.md "Pools of shop servers"): origins[] names pools, a route
// picks one with routes[].origin, and origin: stays the pool every other request goes to.

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// DefaultPool is the name of the pool origin: describes: unrouted requests and routes whose origin is
// "" go to it.
const DefaultPool = "default"

// MaxPoolServers bounds a pool's urls: a request remembers which servers it tried in one machine word.
const MaxPoolServers = 64

// Pool is one entry of origins[]: servers that serve the same shop, and how requests are spread over
// them.
type Pool struct {
	Name string `yaml:"name"`
	// URLs are the servers; they differ in host and port only (the same scheme and path), so a request
	// refused at connect by one goes to another unchanged.
	URLs []string `yaml:"urls"`
	// LB picks a server for each request: one of LBPolicies.
	LB      string      `yaml:"lb"`
	Health  PoolHealth  `yaml:"health"`
	Passive PoolPassive `yaml:"passive"`
}

// PoolHealth is a pool's active health check: with Path set, every server is asked GET Path every
// Interval (Timeout for the answer); UnhealthyAfter failures in a row take it out, HealthyAfter
// successes (2xx or 3xx) in a row put it back.
type PoolHealth struct {
	Path           string        `yaml:"path"`
	Interval       time.Duration `yaml:"interval"`
	Timeout        time.Duration `yaml:"timeout"`
	UnhealthyAfter int           `yaml:"unhealthy_after"`
	HealthyAfter   int           `yaml:"healthy_after"`
}

// PoolPassive takes a server out for DownFor after FailAfter requests in a row got no answer from it
// (refused or failed connections, timeouts); 0 turns it off.
type PoolPassive struct {
	FailAfter int           `yaml:"fail_after"`
	DownFor   time.Duration `yaml:"down_for"`
}

// Load-balancing policies (origins[].lb).
const (
	LBRoundRobin = "round_robin"
	LBLeastConn  = "least_conn"
	LBFirst      = "first"
)

// LBPolicies lists every policy.
var LBPolicies = []string{LBRoundRobin, LBLeastConn, LBFirst}

func (p *Pool) applyDefaults() {
	p.LB = LBRoundRobin
	p.Health = PoolHealth{Interval: 5 * time.Second, Timeout: 2 * time.Second, UnhealthyAfter: 3, HealthyAfter: 2}
	p.Passive = PoolPassive{FailAfter: 3, DownFor: 30 * time.Second}
}

// PoolByName returns the pool of origins[] with that name, or nil.
func (c *Config) PoolByName(name string) *Pool {
	for i := range c.Origins {
		if c.Origins[i].Name == name {
			return &c.Origins[i]
		}
	}
	return nil
}

// checkOrigins checks origins[] and what routes[].origin names.
func (cfg *Config) checkOrigins(c *check) {
	seen := map[string]int{}
	for i, pool := range cfg.Origins {
		p := fmt.Sprintf("origins[%d]", i)
		c.id(p+".name", pool.Name)
		switch j, dup := seen[pool.Name]; {
		case pool.Name == DefaultPool:
			c.add(p+".name", "%q is the pool of origin: (unrouted requests and routes without an origin)", pool.Name)
		case dup:
			c.add(p+".name", "%q is already the name of origins[%d]", pool.Name, j)
		}
		if _, dup := seen[pool.Name]; !dup {
			seen[pool.Name] = i
		}
		checkPoolURLs(c, p+".urls", pool.URLs)
		c.oneOf(p+".lb", pool.LB, LBPolicies...)
		checkPoolHealth(c, p+".health", pool.Health)
		if f := pool.Passive.FailAfter; f < 0 || f > 1000 {
			c.add(p+".passive.fail_after", "%d: must be 0 (off) to 1000", f)
		}
		if d := pool.Passive.DownFor; d < 100*time.Millisecond || d > time.Hour {
			c.add(p+".passive.down_for", "%s must be between 100ms and 1h", d)
		}
	}
	for i, r := range cfg.Routes {
		if r.Origin != "" && r.Origin != DefaultPool && cfg.PoolByName(r.Origin) == nil {
			c.add(fmt.Sprintf("routes[%d].origin", i), "%q is not the name of any pool (origins[].name; \"\" for origin:)", r.Origin)
		}
	}
}

// checkPoolURLs: at least one server, each an absolute http(s) URL without query, fragment or
// credentials, listed once, all of the same scheme and path as the first.
func checkPoolURLs(c *check, path string, urls []string) {
	switch {
	case len(urls) == 0:
		c.add(path, "a pool needs at least one server URL")
	case len(urls) > MaxPoolServers:
		c.add(path, "%d servers: a pool has at most %d", len(urls), MaxPoolServers)
	}
	var first *url.URL
	for i, raw := range urls {
		p := fmt.Sprintf("%s[%d]", path, i)
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.add(p, "%q is not an absolute http(s) URL", raw)
			continue
		}
		switch {
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			c.add(p, "%q must not carry a query, fragment or credentials", raw)
		case first == nil:
			first = u
		case u.Scheme != first.Scheme || strings.TrimSuffix(u.Path, "/") != strings.TrimSuffix(first.Path, "/"):
			c.add(p, "%q: the servers of a pool serve the same shop, so their URLs differ in host and port only (scheme and path of %q)", raw, first)
		}
		for j := range i {
			if urls[j] == raw {
				c.add(p, "%q is already urls[%d]", raw, j)
				break
			}
		}
	}
}

func checkPoolHealth(c *check, p string, h PoolHealth) {
	if h.Path != "" {
		u, err := url.Parse(h.Path)
		if err != nil || !strings.HasPrefix(h.Path, "/") || strings.HasPrefix(h.Path, "//") || u.Host != "" || u.Fragment != "" ||
			strings.ContainsAny(h.Path, " \t\r\n") {
			c.add(p+".path", "%q is not a path on the servers (such as /healthz)", h.Path)
		}
	}
	if h.Interval < 100*time.Millisecond || h.Interval > time.Hour {
		c.add(p+".interval", "%s must be between 100ms and 1h", h.Interval)
	}
	if h.Timeout < time.Millisecond || h.Timeout > h.Interval {
		c.add(p+".timeout", "%s must be at least 1ms and at most the interval (%s)", h.Timeout, h.Interval)
	}
	for _, n := range []struct {
		key   string
		value int
	}{{"unhealthy_after", h.UnhealthyAfter}, {"healthy_after", h.HealthyAfter}} {
		if n.value < 1 || n.value > 100 {
			c.add(p+"."+n.key, "%d: must be 1 to 100", n.value)
		}
	}
}
