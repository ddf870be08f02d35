package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/admission/stock"
	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/inflight"
	"github.com/edgeq/edgeq/internal/brand"
	"github.com/edgeq/edgeq/internal/compression"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/tracing"
	"github.com/edgeq/edgeq/internal/visitor"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
	"github.com/edgeq/edgeq/waitroom"
)

// parts is everything build makes from a configuration.
type parts struct {
	store     *store.Store
	health    *store.Health
	registry  *prometheus.Registry
	metrics   *metrics.Metrics
	responder *web.Responder
	proxy     *proxy.Proxy
	room      *waitroom.Room
	check     *botcheck.Check // nil without a configured bot check
	admission *admission.Service
	inflight  *inflight.Limiter
	ledger    *ledger.Ledger   // nil when the ledger is off
	tracing   *tracing.Tracing // nil when tracing is off
}

// build turns a validated configuration into the running parts; any error is a start-up error.
// version is the build's, for traces.
func build(cfg *config.Config, logger *slog.Logger, version string) (*parts, error) {
	keyring, err := loadKeys(cfg, logger)
	if err != nil {
		return nil, err
	}
	assets := static.New(cfg.Server.Prefix + "/static/")
	pages, err := templates.Parse(cfg.Pages.TemplatesDir, template.FuncMap{"static": assets.URL})
	if err != nil {
		return nil, fmt.Errorf("pages: %w", err)
	}
	responder := &web.Responder{Pages: pages, Brand: cfg.Pages.Brand, Lang: cfg.Pages.DefaultLanguage, Languages: cfg.Pages.Languages}
	if responder.LogoURL, responder.AccentStylesheet, err = addLook(cfg.Pages, assets); err != nil {
		return nil, err
	}

	origin, err := url.Parse(cfg.Origin.URL)
	if err != nil {
		return nil, fmt.Errorf("origin.url: %w", err)
	}
	trusted := make([]netip.Prefix, 0, len(cfg.Server.TrustedProxies))
	for _, p := range cfg.Server.TrustedProxies {
		prefix, err := config.ParseCIDR(p)
		if err != nil {
			return nil, fmt.Errorf("server.trusted_proxies: %w", err)
		}
		trusted = append(trusted, prefix)
	}

	st, err := store.Open(cfg.Redis, logger)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	registry := prometheus.NewRegistry()
	m := metrics.New(registry)
	registry.MustRegister(st.Collectors()...)

	for _, warning := range warnings(cfg) {
		logger.Warn(warning)
	}
	for _, note := range notes(cfg) {
		logger.Info(note)
	}
	var room *waitroom.Room // the check's adaptive difficulty reads its join rates; built below
	check, err := botcheck.New(botcheck.Env{
		Config: cfg, Store: st, Key: identityKey(cfg.Identity, keyring, purposeChallenge), Prefix: cfg.Server.Prefix,
		Static: assets.URL, JoinRate: func(queue string) float64 { return room.JoinRate(queue) }, Responder: responder,
	}, registry)
	if err != nil {
		_ = st.Close()
		return nil, err
	}

	led, err := openLedger(cfg.Ledger, logger)
	if err != nil {
		_ = st.Close()
		return nil, err
	}

	tr, err := startTracing(cfg.Tracing, version, st, logger)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	tracer := tr.Tracer() // nil: tracing off

	var adm *admission.Service // the room's sold_out_with reads its stock; built below
	room = waitroom.New(waitroom.Options{
		Stock: func(ctx context.Context, products []string) (bool, error) {
			return stock.SoldOut(ctx, adm, products)
		},
		Store:     st,
		Keyring:   keyring,
		Verifier:  token.NewVerifier(keyring, cfg.Tokens.Issuer, cfg.Tokens.Leeway),
		Issuer:    cfg.Tokens.Issuer,
		IDKey:     identityKey(cfg.Identity, keyring, purposeRequestIDs),
		Prefix:    cfg.Server.Prefix,
		Cookies:   web.Cookies{Secure: cfg.Tokens.CookieSecure},
		Limits:    cfg.Limits,
		Responder: responder,
		Logger:    logger,
		Check:     check,
		Tracer:    tracer,

		ReportRetention: cfg.Report.Retention,
	})
	registry.MustRegister(room.Collector())
	var checkGate *botcheck.Gate
	if check != nil {
		checkGate = botcheck.NewGate(botcheck.GateOptions{
			Check: check, Store: st, ClearanceTTL: cfg.Turnstile.ClearanceTTL, Key: identityKey(cfg.Identity, keyring, purposeClearance),
			Prefix: cfg.Server.Prefix, MaxBodyBytes: cfg.Server.MaxBodyBytes,
			Cookies: web.Cookies{Secure: cfg.Tokens.CookieSecure}, Responder: responder,
			PerIPPerMinute: cfg.Limits.TurnstilePerIPPerMinute, RateLimited: room.RateLimited("turnstile"),
		})
	}

	adm = admission.New(admission.Options{
		Store:        st,
		IDs:          ids.New(leaseNode(st, logger)),
		IdentityKey:  identityKey(cfg.Identity, keyring, purposePseudonyms),
		MaxBodyBytes: cfg.Server.MaxBodyBytes,
		ClaimTTL:     claimTTL(cfg),
		Prefix:       cfg.Server.Prefix,
		Responder:    responder,
		Logger:       logger,
		Registry:     registry,
		Ledger:       led,
		Visitor:      room.TokenRequestID,
		Tracer:       tracer,

		StreamMaxEntries: cfg.Redis.StreamMaxEntries,
		RecordsRetention: cfg.Admission.RecordsRetention,
		OrphanAfter:      cfg.Origin.Timeout,
		ReportRetention:  cfg.Report.Retention,
	})

	endpoints := http.NewServeMux()
	endpoints.Handle("GET "+cfg.Server.Prefix+"/static/", assets)
	room.Register(endpoints)
	adm.Register(endpoints)
	steps := []proxy.Step{room.Gate()}
	if checkGate != nil {
		checkGate.Register(endpoints)
		check.Register(endpoints)
		steps = append(steps, checkGate)
	}
	steps = append(steps, adm)

	health := store.NewHealth(st.Ping, cfg.StoreHealth, logger, m.ObserveStore)
	limiter := inflight.New(inflight.Options{Store: st, Logger: logger})
	visitors := &proxy.Visitors{
		IDs:     visitor.New(identityKey(cfg.Identity, keyring, purposeVisitors)),
		Cookies: web.Cookies{Secure: cfg.Tokens.CookieSecure},
	}
	p := proxy.New(proxy.Options{
		Degraded:       health.Degraded,
		Origin:         origin,
		OriginTimeout:  cfg.Origin.Timeout,
		BodyTimeout:    cfg.Server.BodyTimeout,
		Prefix:         cfg.Server.Prefix,
		TrustedProxies: trusted,
		Endpoints:      compression.Handler(web.Routes(endpoints, responder)), // never the shop's answers
		Steps:          steps,
		InFlight:       limiter,
		MaxBodyBytes:   cfg.Server.MaxBodyBytes,
		WriteTimeout:   cfg.Server.WriteTimeout,
		SpoolBytes:     int64(cfg.Server.SpoolBytes),
		Visitors:       visitors,
		Responder:      responder,
		Metrics:        m,
		Logger:         logger,
		Tracer:         tracer,
	})
	registry.MustRegister(p.PoolCollector())
	table, err := p.CompileWith(cfg.Routes, cfg.Origins)
	if err != nil {
		_ = tr.Shutdown(context.Background()) // nothing was traced yet: nothing to wait for
		_ = st.Close()
		return nil, err
	}
	warnMissing(logger, table)
	p.Use(table)
	if err := adm.Use(cfg); err != nil {
		_ = tr.Shutdown(context.Background())
		_ = st.Close()
		return nil, err
	}
	return &parts{store: st, health: health, registry: registry, metrics: m, responder: responder, proxy: p, room: room, check: check, admission: adm, inflight: limiter, ledger: led, tracing: tr}, nil
}

// startTracing starts the tracer provider of tracing: (nil when it is off) and traces the store's
// calls made within recorded spans. The headers are never logged.
func startTracing(cfg config.Tracing, version string, st *store.Store, logger *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.New(cfg, version, logger)
	if err != nil || tr == nil {
		return nil, err
	}
	st.Client.AddHook(tracing.RedisHook(tr.Tracer()))
	logger.Info("tracing on", "exporter", cfg.Exporter, "endpoint", cfg.Endpoint, "sample_ratio", cfg.SampleRatio,
		"headers", len(cfg.Headers))
	return tr, nil
}

// What the keys of identityKey are for; each purpose gives an independent key.
const (
	purposeRequestIDs = "edgeq request ids v1"
	purposeClearance  = "edgeq turnstile clearance v1"
	purposeChallenge  = "edgeq challenge v1"
	purposePseudonyms = "edgeq identity v1"
	purposeVisitors   = "edgeq visitor ids v1"
)

// identityKey gives the MAC key of request ids, clearance cookies, user pseudonyms or visitor ids. The
// keys come from identity.secret when it is set, so that rotating the signing key (the old one in
// tokens.verify_key_files) keeps every place in line, every live token, every clearance, every
// pseudonym and every visitor id valid; otherwise they are derived from the signing key. With a
// secret, the pseudonym key is the secret itself rather than a key derived from it: pseudonyms are
// stored (buyers, bidders, owners), so deriving that key now would change every one of them.
func identityKey(identity config.Identity, keyring *token.Keyring, purpose string) []byte {
	switch {
	case identity.Secret == "":
		return keyring.DeriveKey(purpose)
	case purpose == purposePseudonyms:
		return []byte(identity.Secret)
	}
	return token.DeriveKey([]byte(identity.Secret), purpose)
}

// leaseNode gives this replica its node number for admission and bid ids from the store; a random one
// if the store cannot be reached at start.
func leaseNode(st *store.Store, logger *slog.Logger) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	n, err := ids.LeaseNode(ctx, st.Client, st.Keys.IDNodes())
	if err != nil {
		var b [2]byte
		rand.Read(b[:])
		n = int64(b[0])<<8 | int64(b[1])
		logger.Warn("could not lease an id node number from the store; using a random one", "error", err.Error())
	}
	return n
}

// loadKeys loads the token keys, or makes an ephemeral signing key, so a broken key file stops
// start-up instead of the first visitor.
func loadKeys(cfg *config.Config, logger *slog.Logger) (*token.Keyring, error) {
	var signing ed25519.PrivateKey
	if cfg.Tokens.SigningKeyFile == "" {
		// Warned even without queues in the file: queues can be created through the admin API.
		logger.Warn("tokens.signing_key_file is empty: an ephemeral signing key is used; tokens die with " +
			"this process and other replicas cannot verify them (create a key with `edgeq keygen -out FILE`)")
		var err error
		if signing, err = token.GenerateKey(); err != nil {
			return nil, fmt.Errorf("ephemeral signing key: %w", err)
		}
	} else {
		var err error
		if signing, err = token.LoadSigningKey(cfg.Tokens.SigningKeyFile); err != nil {
			return nil, fmt.Errorf("tokens.signing_key_file: %w", err)
		}
		logger.Info("signing key loaded", "kid", token.KeyID(signing.Public().(ed25519.PublicKey)))
	}
	var older []ed25519.PublicKey
	for i, path := range cfg.Tokens.VerifyKeyFiles {
		key, err := token.LoadVerifyKey(path)
		if err != nil {
			return nil, fmt.Errorf("tokens.verify_key_files[%d]: %w", i, err)
		}
		older = append(older, key)
	}
	return token.NewKeyring(signing, older...), nil
}

// warnMissing logs routes whose gate this build cannot enforce; they answer 503 GATE_UNAVAILABLE.
func warnMissing(logger *slog.Logger, t *proxy.Table) {
	for route, missing := range t.Missing {
		logger.Warn("route asks for checks this build does not enforce: it is closed (503 GATE_UNAVAILABLE) "+
			"rather than open", "route", route, "missing", missing)
	}
}

// claimTTL bounds a buyer's in-flight claim if edgeq dies before the origin answers: the origin's
// time to answer, plus the longest a request may wait for an in-flight slot (hold) after it was
// admitted, plus slack. It is set at start; a reload that lengthens a hold beyond it needs a restart
// to lengthen the claims too (docs/reference.md).
func claimTTL(cfg *config.Config) time.Duration {
	var hold time.Duration
	for _, r := range cfg.Routes {
		if r.MaxInFlight > 0 && r.Admission.Type != "" {
			hold = max(hold, r.Hold)
		}
	}
	return cfg.Origin.Timeout + hold + 30*time.Second
}

// openLedger opens the ledger when ledger.postgres_url is set and migrates its schema. A PostgreSQL
// that cannot be reached at start does not stop edgeq (the fast path never waits for it): the
// ledger worker migrates and catches up once it is back. One that answers and refuses (bad
// credentials, no such database, a failed migration) is a start-up error.
func openLedger(cfg config.Ledger, logger *slog.Logger) (*ledger.Ledger, error) {
	if cfg.PostgresURL == "" {
		return nil, nil
	}
	led, err := ledger.New(cfg.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("ledger.postgres_url: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = led.Migrate(ctx)
	switch {
	case err == nil:
		logger.Info("ledger: PostgreSQL schema is current")
	case ledger.Refused(err):
		led.Close()
		return nil, err // "ledger: ..." already
	default:
		logger.Error("ledger: PostgreSQL cannot be reached; edgeq starts, and the ledger catches up once it is back", "error", err.Error())
	}
	return led, nil
}

// addLook serves the shop's look with edgeq's own assets: the logo file (read once, here: a new logo
// needs a restart, as every pages key does) and the accent stylesheet, each under a name with its
// content hash, so browsers keep them a year and a new one is a new URL. It returns their URLs, ""
// for what is not configured. The configuration was validated, so an error here means the logo file
// changed since.
func addLook(pages config.Pages, assets *static.Assets) (logoURL, accentURL string, err error) {
	if pages.LogoFile != "" {
		logo, err := brand.ReadLogo(pages.LogoFile)
		if err != nil {
			return "", "", fmt.Errorf("pages.logo_file: %w", err)
		}
		logoURL = assets.Add("logo"+logo.Ext, logo.Body, logo.ContentType)
	}
	if pages.AccentColor != "" {
		accent, err := brand.NewAccent(pages.AccentColor)
		if err != nil {
			return "", "", fmt.Errorf("pages.accent_color: %w", err)
		}
		accentURL = assets.Add("accent.css", []byte(accent.CSS()), "text/css; charset=utf-8")
	}
	return logoURL, accentURL, nil
}
