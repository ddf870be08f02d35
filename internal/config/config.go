// Package config is edgeq's typed configuration: the YAML file (docs/reference.md "Configuration"), its
// defaults, the EDGEQ_* environment overrides, validation with field paths, and what a hot reload may
// change.
//
// It is the only package that knows viper. Everything else receives a *Config that has passed Validate
// and treats it as read-only: a reload builds a new *Config instead of mutating the old one.
package config

import (
	"slices"
	"time"
)

// Config is the whole configuration. The yaml tags are the key names of the file and, upper-cased with
// "." replaced by "_" and prefixed by EDGEQ_, of the environment variables.
type Config struct {
	Server      Server      `yaml:"server"`
	Admin       Admin       `yaml:"admin"`
	Origin      Origin      `yaml:"origin"`
	Origins     []Pool      `yaml:"origins"`
	Redis       Redis       `yaml:"redis"`
	Tokens      Tokens      `yaml:"tokens"`
	Identity    Identity    `yaml:"identity"`
	Turnstile   Turnstile   `yaml:"turnstile"`
	Challenge   Challenge   `yaml:"challenge"`
	Queues      []Queue     `yaml:"queues"`
	Routes      []Route     `yaml:"routes"`
	Limits      Limits      `yaml:"limits"`
	Pages       Pages       `yaml:"pages"`
	StoreHealth StoreHealth `yaml:"store_health"`
	Ledger      Ledger      `yaml:"ledger"`
	Admission   Admissions  `yaml:"admission"`
	Report      Report      `yaml:"report"`
	Log         Log         `yaml:"log"`
	Tracing     Tracing     `yaml:"tracing"`

	// Sections are the registered sections (RegisterSection) by name, defaults filled in and the
	// file's sections decoded over them; in the file and when printed they follow routes:.
	Sections map[string]Section `yaml:"-"`
}

// Ledger is the durable record in PostgreSQL (docs/reference.md "Ledger"); off when PostgresURL is "".
type Ledger struct {
	PostgresURL string `yaml:"postgres_url" secret:"true"`
}

// Admissions is what the store keeps of admissions and bids (docs/reference.md "TTLs").
type Admissions struct {
	// RecordsRetention is how long the admin records, their indexes and the scripts' own records
	// stay, ledger or not (the ledger is the record of account); buyer counts stay as long as their
	// product.
	RecordsRetention time.Duration `yaml:"records_retention"`
}

// Report is what the store keeps for the report after a drop (docs/reference.md "The report").
type Report struct {
	// Retention is how long the one-minute buckets are kept; the report reads at most this far back.
	Retention time.Duration `yaml:"retention"`
}

// Server is the public listener: the waiting room and the proxied traffic.
type Server struct {
	Listen          string        `yaml:"listen"`
	Prefix          string        `yaml:"prefix"`
	TrustedProxies  []string      `yaml:"trusted_proxies"`
	MaxBodyBytes    int64         `yaml:"max_body_bytes"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// ReadHeaderTimeout and IdleTimeout protect against slow clients (slowloris): a request's headers
	// must arrive within the first, and a kept-alive connection with no request is closed after the second.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// BodyTimeout bounds the time from a request's arrival to the end of its body (a client that
	// trickles a body holds a request to the origin meanwhile); 0: no bound.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// WriteTimeout cuts off a client that takes nothing of an answer for this long: every write of
	// an answer must go out within it (docs/reference.md "Proxying"). It bounds how long a client that
	// stopped reading holds a connection, a spooled answer's memory or a max_in_flight slot.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// SpoolBytes is how much of an answer of a max_in_flight route edgeq holds in memory for a client
	// that has not taken it yet, so that the shop is done and the slot free; 0: none.
	SpoolBytes ByteSize `yaml:"spool_bytes"`
	// TLS is edgeq's own HTTPS listener (docs/reference.md "TLS and HTTP/2"); H2C lets Listen take
	// HTTP/2 without TLS from a load balancer that speaks it.
	TLS TLS  `yaml:"tls"`
	H2C bool `yaml:"h2c"`
}

// Admin is the operator listener: /api/*, /metrics, /healthz, /readyz.
type Admin struct {
	Listen string `yaml:"listen"`
	APIKey string `yaml:"api_key" secret:"true"`
	// AllowedHosts are the Host names the admin listener answers besides IP literals and localhost
	// (others get 421): a DNS rebinding page reaches it under a name of its own.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Origin is the unmodified shop edgeq sits in front of.
type Origin struct {
	URL     string        `yaml:"url"`
	Timeout time.Duration `yaml:"timeout"`
}

// Redis selects the store: embedded (Addr and Addrs empty), a single server (Addr), a Cluster (Addrs) or
// Sentinel (Addrs with MasterName).
type Redis struct {
	Addr       string   `yaml:"addr"`
	Addrs      []string `yaml:"addrs"`
	MasterName string   `yaml:"master_name"`
	Username   string   `yaml:"username"`
	Password   string   `yaml:"password" secret:"true"`
	DB         int      `yaml:"db"`
	TLS        bool     `yaml:"tls"`
	KeyPrefix  string   `yaml:"key_prefix"`
	// WaitReplicas > 0: a reservation, a lottery draw, an invitation's use and a revocation count as done
	// only once WAIT says this many replicas hold them (section 11.2); WaitTimeout bounds that wait.
	WaitReplicas int           `yaml:"wait_replicas"`
	WaitTimeout  time.Duration `yaml:"wait_timeout"`
	// StreamMaxEntries bounds each event stream: below it only entries every consumer group has
	// acknowledged are trimmed; past it the oldest unread ones go too, counted.
	StreamMaxEntries int64 `yaml:"stream_max_entries"`
}

// Embedded reports whether no Redis is configured and the in-process store is used.
func (r Redis) Embedded() bool { return r.Addr == "" && len(r.Addrs) == 0 }

// Tokens configures the signed access tokens.
type Tokens struct {
	SigningKeyFile string        `yaml:"signing_key_file"`
	VerifyKeyFiles []string      `yaml:"verify_key_files"`
	Issuer         string        `yaml:"issuer"`
	CookieSecure   string        `yaml:"cookie_secure"`
	Leeway         time.Duration `yaml:"leeway"`
}

// Identity configures how user identities are turned into pseudonyms before they are stored.
type Identity struct {
	Secret string `yaml:"secret" secret:"true"`
}

// Turnstile configures Cloudflare Turnstile checks.
type Turnstile struct {
	SiteKey      string        `yaml:"site_key"`
	SecretKey    string        `yaml:"secret_key" secret:"true"`
	VerifyURL    string        `yaml:"verify_url"`
	ScriptURL    string        `yaml:"script_url"`
	Timeout      time.Duration `yaml:"timeout"`
	Hostnames    []string      `yaml:"hostnames"`
	ClearanceTTL time.Duration `yaml:"clearance_ttl"`
	OnError      string        `yaml:"on_error"`
}

// Queue is one waiting room.
type Queue struct {
	ID               string        `yaml:"id"`
	Title            string        `yaml:"title"`
	Capacity         int           `yaml:"capacity"`
	ReleasePerMinute int           `yaml:"release_per_minute"`
	TokenTTL         time.Duration `yaml:"token_ttl"`
	PositionExpiry   time.Duration `yaml:"position_expiry"`
	AbandonAfter     time.Duration `yaml:"abandon_after"`
	// GoneAfter > 0: a reached place without a token whose visitor has not been heard from for this
	// long frees its capacity (within PositionExpiry); a page in the background counts as heard from
	// for HiddenGrace. 0 leaves it to PositionExpiry alone.
	GoneAfter time.Duration `yaml:"gone_after"`
	Turnstile bool          `yaml:"turnstile"`
	// A scheduled drop (docs/operations.md "Running a drop"): before OpensAt nobody is served; joins are
	// taken Prequeue before it; with Shuffle the pre-queue's order is drawn by lot at the opening. After
	// ClosesAt nobody new joins. Times are RFC 3339, "" for none (ParseQueueTime).
	OpensAt  string        `yaml:"opens_at"`
	Prequeue time.Duration `yaml:"prequeue"`
	Shuffle  bool          `yaml:"shuffle"`
	ClosesAt string        `yaml:"closes_at"`
	// Method is how waiting visitors are served: one of the Method constants.
	Method string `yaml:"method"`
	// SoldOutWith are product ids: when every one has no stock left the queue is sold out.
	SoldOutWith []string `yaml:"sold_out_with"`
	// Sessions: with SessionRenewal a token used in the last half of its life is re-issued, up to
	// MaxSession after the first one.
	SessionRenewal bool          `yaml:"session_renewal"`
	MaxSession     time.Duration `yaml:"max_session"`
	// InviteOnly queues take only visitors with an invitation (POST /api/queue/{id}/invites).
	InviteOnly bool `yaml:"invite_only"`
	// BypassCIDRs are client addresses (after server.trusted_proxies) served at once (ParseCIDR).
	BypassCIDRs []string `yaml:"bypass_cidrs"`
	// PlacesPerIP > 0: the unserved places one client address (an IPv4 /32 or IPv6 /64, after
	// server.trusted_proxies) may hold in the queue; a join past it is refused 429 TOO_MANY_PLACES and
	// takes nothing. Invitations and bypass_cidrs do not count; 0 is no limit.
	PlacesPerIP int `yaml:"places_per_ip"`
}

// Queueing methods (queues[].method).
const (
	MethodFIFO        = "fifo"
	MethodRandom      = "random"
	MethodPassthrough = "passthrough"
	MethodReject      = "reject"
)

// Methods lists every queueing method.
var Methods = []string{MethodFIFO, MethodRandom, MethodPassthrough, MethodReject}

// ParseQueueTime reads opens_at or closes_at: "" is the zero time (none).
func ParseQueueTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, s)
}

// Same reports whether two queue entries are equal in every setting.
func (q Queue) Same(o Queue) bool {
	return slices.Equal(q.SoldOutWith, o.SoldOutWith) && slices.Equal(q.BypassCIDRs, o.BypassCIDRs) &&
		q.withoutLists() == o.withoutLists()
}

type comparableQueue struct {
	ID, Title, OpensAt, ClosesAt, Method             string
	Capacity, ReleasePerMinute, PlacesPerIP          int
	TokenTTL, PositionExpiry, AbandonAfter, Prequeue time.Duration
	MaxSession, GoneAfter                            time.Duration
	Turnstile, Shuffle, SessionRenewal, InviteOnly   bool
}

func (q Queue) withoutLists() comparableQueue {
	return comparableQueue{q.ID, q.Title, q.OpensAt, q.ClosesAt, q.Method, q.Capacity, q.ReleasePerMinute, q.PlacesPerIP,
		q.TokenTTL, q.PositionExpiry, q.AbandonAfter, q.Prequeue, q.MaxSession, q.GoneAfter, q.Turnstile, q.Shuffle,
		q.SessionRenewal, q.InviteOnly}
}

// DefaultQueue is a queue with every setting at its default (and no id).
func DefaultQueue() Queue {
	var q Queue
	q.applyDefaults()
	return q
}

func (q *Queue) applyDefaults() {
	q.Capacity = 100
	q.TokenTTL = 10 * time.Minute
	q.PositionExpiry = 5 * time.Minute
	q.GoneAfter = DefaultGoneAfter
	q.Method = MethodFIFO
	q.MaxSession = 2 * time.Hour
}

// Limits are per-client-IP rate limits; 0 turns one off.
type Limits struct {
	JoinPerIPPerMinute   int `yaml:"join_per_ip_per_minute"`
	StatusPerIPPerMinute int `yaml:"status_per_ip_per_minute"`
	// TurnstilePerIPPerMinute bounds the Turnstile responses a client sends to be verified outside
	// joins (the challenge page, routes with turnstile: true), before siteverify is called.
	TurnstilePerIPPerMinute int `yaml:"turnstile_per_ip_per_minute"`
}

// Pages configures the pages edgeq renders for browsers.
type Pages struct {
	TemplatesDir    string `yaml:"templates_dir"`
	DefaultLanguage string `yaml:"default_language"`
	// Languages are the built-in languages offered, Accept-Language choosing among them; empty offers
	// every one (templates.Languages). DefaultLanguage must be one of them.
	Languages []string `yaml:"languages"`
	Brand     string   `yaml:"brand"`
	// LogoFile is a PNG, SVG or WebP file (at most 256 KiB) that edgeq serves itself and shows on every
	// page in place of the brand text, the brand as its alt text; "" shows the brand text.
	LogoFile string `yaml:"logo_file"`
	// AccentColor is the colour of buttons and the progress bar, "#rgb" or "#rrggbb"; "" keeps edgeq's.
	// It must contrast 4.5:1 with the page background (brand.NewAccent).
	AccentColor string `yaml:"accent_color"`
}

// StoreHealth is the hysteresis of the store health check (docs/reference.md "Store").
type StoreHealth struct {
	Interval           time.Duration `yaml:"interval"`
	FailuresToDegrade  int           `yaml:"failures_to_degrade"`
	SuccessesToRecover int           `yaml:"successes_to_recover"`
	Cooldown           time.Duration `yaml:"cooldown"`
}

// Log configures the process logger.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Default returns the configuration used for every key the file and the environment leave unset.
func Default() *Config {
	return &Config{
		Server: Server{
			Listen:            ":8080",
			Prefix:            "/_edgeq",
			TrustedProxies:    []string{},
			MaxBodyBytes:      1 << 20,
			ShutdownTimeout:   20 * time.Second,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       120 * time.Second,
			BodyTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			SpoolBytes:        8 << 20,
			TLS:               TLS{Certificates: []Certificate{}, MinVersion: "1.2", ACME: ACME{Domains: []string{}}},
		},
		Admin:     Admin{Listen: "127.0.0.1:9090", AllowedHosts: []string{}},
		Origin:    Origin{URL: "http://127.0.0.1:3000", Timeout: 30 * time.Second},
		Origins:   []Pool{},
		Redis:     Redis{Addrs: []string{}, KeyPrefix: "edgeq", WaitTimeout: 50 * time.Millisecond, StreamMaxEntries: 1_000_000},
		Report:    Report{Retention: 336 * time.Hour},
		Admission: Admissions{RecordsRetention: 168 * time.Hour},
		Tokens: Tokens{
			VerifyKeyFiles: []string{},
			Issuer:         "edgeq",
			CookieSecure:   "auto",
			Leeway:         5 * time.Second,
		},
		Challenge: defaultChallenge(),
		Turnstile: Turnstile{
			VerifyURL:    "https://challenges.cloudflare.com/turnstile/v0/siteverify",
			ScriptURL:    "https://challenges.cloudflare.com/turnstile/v0/api.js",
			Timeout:      5 * time.Second,
			Hostnames:    []string{},
			ClearanceTTL: 30 * time.Minute,
			OnError:      "closed",
		},
		Queues:   []Queue{},
		Routes:   []Route{},
		Sections: defaultSections(),
		Limits:   Limits{JoinPerIPPerMinute: 30, StatusPerIPPerMinute: 120, TurnstilePerIPPerMinute: 30},
		Pages:    Pages{DefaultLanguage: "en", Brand: "edgeq"},
		StoreHealth: StoreHealth{
			Interval:           2 * time.Second,
			FailuresToDegrade:  3,
			SuccessesToRecover: 5,
			Cooldown:           30 * time.Second,
		},
		Log:     Log{Level: "info", Format: "json"},
		Tracing: Tracing{SampleRatio: DefaultSampleRatio, Headers: map[string]string{}},
	}
}

// QueueByID returns the queue with that id, or nil.
func (c *Config) QueueByID(id string) *Queue {
	for i := range c.Queues {
		if c.Queues[i].ID == id {
			return &c.Queues[i]
		}
	}
	return nil
}
