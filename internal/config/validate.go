package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/brand"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/templates"
)

// ID is the syntax of queue, product and auction ids, and of route names: they appear in URLs, Redis
// hash tags and metric labels, so they are kept short and plain.
var ID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

var (
	prefixSyntax    = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)+$`)
	keyPrefixSyntax = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
)

// Queue duration bounds: a revocation is remembered for MaxTokenTTL; a renewed session lasts at most
// MaxSession; the waiting page polls at least
// every MinAbandonAfter/3.
const (
	MaxTokenTTL     = 24 * time.Hour
	MaxSession      = 7 * 24 * time.Hour
	MinAbandonAfter = 10 * time.Second
	// DefaultGoneAfter frees a no-show's reached place within 15 s of its last poll (the page polls
	// every 4 s); HiddenGrace is how long a page in the background keeps its place without a poll
	// (browsers throttle background timers to about one a minute, and may freeze them).
	DefaultGoneAfter = 10 * time.Second
	HiddenGrace      = 10 * time.Minute
)

// check collects problems with their field paths.
type check struct{ problems []Problem }

func (c *check) add(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
}

func (c *check) oneOf(path, value string, allowed ...string) {
	if !slices.Contains(allowed, value) {
		c.add(path, "%q is not one of %s", value, strings.Join(allowed, ", "))
	}
}

func (c *check) atLeast(path string, value, minimum int64) {
	if value < minimum {
		c.add(path, "must be at least %d, not %d", minimum, value)
	}
}

func (c *check) durationAtLeast(path string, value, minimum time.Duration) {
	if value < minimum {
		c.add(path, "must be at least %s, not %s", minimum, value)
	}
}

func (c *check) hostPort(path, value string) {
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		c.add(path, "%q is not host:port", value)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.add(path, "%q has an invalid port", value)
	}
	if strings.ContainsAny(host, " /") {
		c.add(path, "%q has an invalid host", value)
	}
}

// hostName reports whether name is a DNS host name (admin.allowed_hosts): labels of letters, digits
// and hyphens, 1-63 bytes each, at most 253 bytes, one trailing dot allowed (RFC 1123 section 2.1).
// No port, scheme or wildcard: the admin listener compares whole names.
func hostName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func (c *check) httpURL(path, value string) {
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add(path, "%q is not an absolute http(s) URL", value)
	}
}

func (c *check) id(path, value string) {
	if !ID.MatchString(value) {
		c.add(path, "%q must be 1-64 characters of A-Z a-z 0-9 _ -", value)
	}
}

func (c *check) money(path, value string) {
	cents, err := money.Parse(value)
	if err != nil {
		c.add(path, "%q: %v", value, err)
	} else if cents <= 0 {
		c.add(path, "must be greater than zero")
	}
}

func (cfg *Config) problems() []Problem {
	c := &check{}
	cfg.checkServer(c)
	cfg.checkRedis(c)
	cfg.checkLedger(c)
	if r := cfg.Admission.RecordsRetention; r < time.Minute || r > 2160*time.Hour {
		c.add("admission.records_retention", "%s must be between 1m and 2160h (90 days)", r)
	}
	if r := cfg.Report.Retention; r < time.Hour || r > 2160*time.Hour {
		c.add("report.retention", "%s must be between 1h and 2160h (90 days)", r)
	}
	cfg.checkTokens(c)
	cfg.checkTurnstile(c)
	cfg.checkChallenge(c)
	checkEach(c, "queues", cfg.Queues, func(q Queue) string { return q.ID }, checkQueue)
	cfg.checkRoutes(c)
	cfg.checkOrigins(c)
	cfg.checkSections(c)

	c.atLeast("limits.join_per_ip_per_minute", int64(cfg.Limits.JoinPerIPPerMinute), 0)
	c.atLeast("limits.status_per_ip_per_minute", int64(cfg.Limits.StatusPerIPPerMinute), 0)
	c.atLeast("limits.turnstile_per_ip_per_minute", int64(cfg.Limits.TurnstilePerIPPerMinute), 0)
	cfg.checkLanguages(c)
	cfg.checkPages(c)
	c.durationAtLeast("store_health.interval", cfg.StoreHealth.Interval, 100*time.Millisecond)
	c.atLeast("store_health.failures_to_degrade", int64(cfg.StoreHealth.FailuresToDegrade), 1)
	c.atLeast("store_health.successes_to_recover", int64(cfg.StoreHealth.SuccessesToRecover), 1)
	c.durationAtLeast("store_health.cooldown", cfg.StoreHealth.Cooldown, 0)
	c.oneOf("log.level", cfg.Log.Level, "debug", "info", "warn", "error")
	c.oneOf("log.format", cfg.Log.Format, "json", "text")
	return c.problems
}

// checkPages checks the pages' look. The logo file is read here, so `edgeq check` and start-up refuse
// a file that is missing, too large or not an image, instead of a page showing a broken one.
func (cfg *Config) checkPages(c *check) {
	if strings.TrimSpace(cfg.Pages.Brand) == "" {
		c.add("pages.brand", "must not be empty")
	}
	if cfg.Pages.LogoFile != "" {
		if _, err := brand.ReadLogo(cfg.Pages.LogoFile); err != nil {
			c.add("pages.logo_file", "%v", err)
		}
	}
	if cfg.Pages.AccentColor != "" {
		if _, err := brand.NewAccent(cfg.Pages.AccentColor); err != nil {
			c.add("pages.accent_color", "%v", err)
		}
	}
}

// checkLanguages: pages.languages names built-in languages, each once, and the fallback
// (pages.default_language) is one of those offered: a visitor whose language is not offered gets it.
func (cfg *Config) checkLanguages(c *check) {
	builtin := strings.Join(templates.Languages, ", ")
	for i, lang := range cfg.Pages.Languages {
		path := fmt.Sprintf("pages.languages[%d]", i)
		switch {
		case !slices.Contains(templates.Languages, lang):
			c.add(path, "%q is not a built-in language (built-in: %s)", lang, builtin)
		case slices.Index(cfg.Pages.Languages, lang) < i:
			c.add(path, "%q is listed twice", lang)
		}
	}
	switch {
	case !slices.Contains(templates.Languages, cfg.Pages.DefaultLanguage):
		c.add("pages.default_language", "%q is not a built-in language (built-in: %s)", cfg.Pages.DefaultLanguage, builtin)
	case len(cfg.Pages.Languages) > 0 && !slices.Contains(cfg.Pages.Languages, cfg.Pages.DefaultLanguage):
		c.add("pages.default_language", "%q is not one of pages.languages (%s): visitors whose language is not offered get it",
			cfg.Pages.DefaultLanguage, strings.Join(cfg.Pages.Languages, ", "))
	}
}

func (cfg *Config) checkServer(c *check) {
	c.hostPort("server.listen", cfg.Server.Listen)
	if !prefixSyntax.MatchString(cfg.Server.Prefix) {
		c.add("server.prefix", "%q must be a path such as /_edgeq (no trailing slash, no wildcards)", cfg.Server.Prefix)
	}
	for i, p := range cfg.Server.TrustedProxies {
		if _, err := ParseCIDR(p); err != nil {
			c.add(fmt.Sprintf("server.trusted_proxies[%d]", i), "%v", err)
		}
	}
	c.atLeast("server.max_body_bytes", cfg.Server.MaxBodyBytes, 1)
	c.durationAtLeast("server.shutdown_timeout", cfg.Server.ShutdownTimeout, 0)
	c.durationAtLeast("server.read_header_timeout", cfg.Server.ReadHeaderTimeout, 100*time.Millisecond)
	c.durationAtLeast("server.idle_timeout", cfg.Server.IdleTimeout, 100*time.Millisecond)
	c.durationAtLeast("server.body_timeout", cfg.Server.BodyTimeout, 0)
	c.durationAtLeast("server.write_timeout", cfg.Server.WriteTimeout, 100*time.Millisecond)
	if s := cfg.Server.SpoolBytes; s < 0 || s > maxSpoolBytes {
		c.add("server.spool_bytes", "%v: must be 0 (no spooling) to %v", s, ByteSize(maxSpoolBytes))
	}
	cfg.checkTLS(c)
	cfg.checkTracing(c)

	c.hostPort("admin.listen", cfg.Admin.Listen)
	if cfg.Admin.Listen == cfg.Server.Listen && !strings.HasSuffix(cfg.Admin.Listen, ":0") {
		c.add("admin.listen", "must differ from server.listen: the admin API is never served on the public listener")
	}
	for i, h := range cfg.Admin.AllowedHosts {
		if !hostName(h) {
			c.add(fmt.Sprintf("admin.allowed_hosts[%d]", i), "%q is not a host name (no port, no scheme)", h)
		}
	}

	c.httpURL("origin.url", cfg.Origin.URL)
	if u, err := url.Parse(cfg.Origin.URL); err == nil && (u.RawQuery != "" || u.Fragment != "" || u.User != nil) {
		c.add("origin.url", "must not carry a query, fragment or credentials")
	}
	c.durationAtLeast("origin.timeout", cfg.Origin.Timeout, time.Millisecond)
}

// ParseCIDR reads a CIDR (server.trusted_proxies, queues[].bypass_cidrs) ("10.0.0.0/8") or a single address ("10.1.2.3", meaning /32 or /128).
func ParseCIDR(text string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(text); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(text); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is not a CIDR or an IP address", text)
}

// checkLedger accepts a PostgreSQL URL (postgres:// or postgresql://) naming a host and a database.
// The problem never repeats the value: it may hold a password.
func (cfg *Config) checkLedger(c *check) {
	raw := cfg.Ledger.PostgresURL
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		c.add("ledger.postgres_url", "is not a URL (postgres://user:password@host:5432/database)")
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		c.add("ledger.postgres_url", "must start with postgres:// or postgresql://")
	case u.Host == "" && u.Query().Get("host") == "":
		c.add("ledger.postgres_url", "names no host (postgres://user:password@host:5432/database)")
	case strings.Trim(u.Path, "/") == "":
		c.add("ledger.postgres_url", "names no database (postgres://user:password@host:5432/database)")
	}
}

func (cfg *Config) checkRedis(c *check) {
	r := cfg.Redis
	if r.Addr != "" {
		c.hostPort("redis.addr", r.Addr)
		if len(r.Addrs) > 0 {
			c.add("redis.addrs", "set either redis.addr (one server) or redis.addrs (Cluster or Sentinel), not both")
		}
	}
	for i, a := range r.Addrs {
		c.hostPort(fmt.Sprintf("redis.addrs[%d]", i), a)
	}
	if r.MasterName != "" && len(r.Addrs) == 0 {
		c.add("redis.master_name", "Sentinel needs the sentinel addresses in redis.addrs")
	}
	c.atLeast("redis.db", int64(r.DB), 0)
	if r.DB != 0 && len(r.Addrs) > 0 && r.MasterName == "" {
		c.add("redis.db", "Redis Cluster only has database 0")
	}
	if !keyPrefixSyntax.MatchString(r.KeyPrefix) {
		c.add("redis.key_prefix", "%q must be 1-64 characters of A-Z a-z 0-9 _ . : - (braces would break hash tags)", r.KeyPrefix)
	}
	if r.Embedded() && (r.Password != "" || r.Username != "" || r.TLS) {
		c.add("redis", "username, password or tls are set but no redis.addr or redis.addrs: the embedded store would ignore them")
	}
	c.atLeast("redis.wait_replicas", int64(r.WaitReplicas), 0)
	if r.WaitReplicas > 0 && r.Embedded() {
		c.add("redis.wait_replicas", "%d, but the embedded store has no replicas: every reservation would time out (set redis.addr or redis.addrs, or 0)", r.WaitReplicas)
	}
	if r.WaitTimeout < time.Millisecond || r.WaitTimeout > 10*time.Second {
		c.add("redis.wait_timeout", "%s must be between 1ms and 10s (every reservation waits up to this long for the replicas)", r.WaitTimeout)
	}
	if r.StreamMaxEntries < 100 {
		c.add("redis.stream_max_entries", "%d must be at least 100", r.StreamMaxEntries)
	}
}

func (cfg *Config) checkTokens(c *check) {
	if strings.TrimSpace(cfg.Tokens.Issuer) == "" {
		c.add("tokens.issuer", "must not be empty")
	}
	c.oneOf("tokens.cookie_secure", cfg.Tokens.CookieSecure, "auto", "always", "never")
	c.durationAtLeast("tokens.leeway", cfg.Tokens.Leeway, 0)
	if cfg.Tokens.Leeway > 5*time.Minute {
		c.add("tokens.leeway", "%s is more than 5m: expired tokens would keep working too long", cfg.Tokens.Leeway)
	}
	for i, f := range cfg.Tokens.VerifyKeyFiles {
		if strings.TrimSpace(f) == "" {
			c.add(fmt.Sprintf("tokens.verify_key_files[%d]", i), "must not be empty")
		}
	}
}

func (cfg *Config) checkTurnstile(c *check) {
	t := cfg.Turnstile
	c.httpURL("turnstile.verify_url", t.VerifyURL)
	if !strings.HasPrefix(t.ScriptURL, "/") || strings.HasPrefix(t.ScriptURL, "//") {
		c.httpURL("turnstile.script_url", t.ScriptURL)
	}
	c.durationAtLeast("turnstile.timeout", t.Timeout, time.Millisecond)
	c.durationAtLeast("turnstile.clearance_ttl", t.ClearanceTTL, time.Second)
	c.oneOf("turnstile.on_error", t.OnError, "closed", "open")
	for i, h := range t.Hostnames {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, "/ ") {
			c.add(fmt.Sprintf("turnstile.hostnames[%d]", i), "%q is not a hostname", h)
		}
	}
	if wanted := cfg.checkUsers(); len(wanted) > 0 && cfg.Challenge.Provider == "turnstile" {
		if t.SiteKey == "" {
			c.add("turnstile.site_key", "required because %s ask for Turnstile", strings.Join(wanted, ", "))
		}
		if t.SecretKey == "" {
			c.add("turnstile.secret_key", "required because %s ask for Turnstile", strings.Join(wanted, ", "))
		}
	}
}

// sortProblems orders problems by field path, reading list indexes as numbers, so output is stable.
func sortProblems(problems []Problem) {
	sort.SliceStable(problems, func(i, j int) bool { return pathLess(problems[i].Path, problems[j].Path) })
}

func pathLess(a, b string) bool {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			na, ra := leadingNumber(a)
			nb, rb := leadingNumber(b)
			if na != nb {
				return na < nb
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	n, _ := strconv.Atoi(s[:i])
	return n, s[i:]
}
