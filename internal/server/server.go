// Package server assembles edgeq from its parts and runs it: configuration, logging, store, metrics,
// the public proxy, the admin listener, hot reload and graceful shutdown. cmd/edgeq is a thin wrapper
// around Run.
package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/admin"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/turnstile"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
	"github.com/edgeq/edgeq/waitroom"
)

// Options configures Run.
type Options struct {
	ConfigPath string          // "" runs on defaults and EDGEQ_* variables only
	LogOutput  io.Writer       // where logs go (stderr)
	Reload     <-chan struct{} // a value forces a reload (SIGHUP)
	// Started, if set, is called once both listeners are bound, with their addresses (tests listen on
	// port 0 and learn the ports here).
	Started func(public, admin net.Addr)
}

// StartupError is a failure before edgeq could serve: a bad configuration, a key that will not load, a
// port in use. cmd/edgeq exits 1 with its one-line message.
type StartupError struct{ Err error }

func (e *StartupError) Error() string { return e.Err.Error() }
func (e *StartupError) Unwrap() error { return e.Err }

func startupErr(format string, args ...any) error {
	return &StartupError{Err: fmt.Errorf(format, args...)}
}

// Run serves until ctx is cancelled, then stops accepting, lets in-flight requests finish within
// server.shutdown_timeout and returns nil. It returns a *StartupError when it cannot start.
func Run(ctx context.Context, opts Options) error {
	// The checksum is taken before loading, so a change that lands in between is reloaded, not missed.
	loadedSum := fileSum(opts.ConfigPath)
	cfg, err := config.Load(opts.ConfigPath)
	if err != nil {
		return startupErr("configuration: %s", config.OneLine(err))
	}
	level := new(slog.LevelVar)
	level.Set(parseLevel(cfg.Log.Level))
	logger := newLogger(opts.LogOutput, cfg.Log.Format, level)
	routeClientLogs.Do(func() { store.RouteClientLogs(logger) })

	built, err := build(cfg, logger)
	if err != nil {
		return &StartupError{Err: err}
	}
	defer built.store.Close()

	g := &gateway{
		path:      opts.ConfigPath,
		loadedSum: loadedSum,
		room:      built.room,
		admission: built.admission,
		level:     level,
		logger:    logger,
		metrics:   built.metrics,
		proxy:     built.proxy,
	}
	g.cfg.Store(cfg)

	l, err := listen(cfg, built, g, logger)
	if err != nil {
		return err
	}
	stopBackground := startBackground(cfg, built, g, opts.Reload, logger)
	serveErr := l.serve()
	logger.Info("edgeq started",
		"public", l.publicLn.Addr().String(), "admin", l.adminLn.Addr().String(), "origin", cfg.Origin.URL,
		"routes", len(cfg.Routes), "store", storeKind(cfg.Redis), "config", opts.ConfigPath)
	if len(cfg.Routes) == 0 {
		how := "add routes to the configuration file"
		if opts.ConfigPath == "" {
			how = "no configuration file was given (-config FILE or EDGEQ_CONFIG)"
		}
		logger.Warn("no routes: every request goes to the origin ungated, with no queue or admission", "hint", how)
	}
	if opts.Started != nil {
		opts.Started(l.publicLn.Addr(), l.adminLn.Addr())
	}

	var failure error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		failure = fmt.Errorf("listener failed: %w", err)
	}

	l.drain(g, stopBackground, logger)
	logger.Info("edgeq stopped")
	return failure
}

// listeners are the public and admin servers with the ports they are bound to.
type listeners struct {
	public, admin     *http.Server
	publicLn, adminLn net.Listener
	// draining is set once shutdown begins; the admin readiness check reports it.
	draining atomic.Bool
}

// listen binds server.listen and admin.listen and builds the servers that will serve them; a port in
// use is a start-up error.
func listen(cfg *config.Config, built *parts, g *gateway, logger *slog.Logger) (*listeners, error) {
	l := &listeners{}
	var err error
	l.publicLn, err = net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, startupErr("server.listen: %v", err)
	}
	l.adminLn, err = net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		l.publicLn.Close()
		return nil, startupErr("admin.listen: %v", err)
	}

	dashboard, err := admin.NewDashboard(cfg.Pages.Brand)
	if err != nil {
		l.publicLn.Close()
		l.adminLn.Close()
		return nil, startupErr("dashboard: %v", err)
	}
	adminHandler := admin.Handler(admin.Options{
		Dashboard: dashboard,
		API:       []func(*http.ServeMux){built.room.RegisterAdmin, built.admission.RegisterAdmin},
		APIKey:    cfg.Admin.APIKey,
		Gatherer:  built.registry,
		Responder: built.responder,
		Logger:    logger,
		Ready: func(ctx context.Context) map[string]error {
			checks := map[string]error{"store": built.store.Ping(ctx), "config": nil}
			if g.cfg.Load() == nil {
				checks["config"] = errors.New("no configuration loaded")
			}
			if l.draining.Load() {
				checks["shutdown"] = errors.New("draining: shutting down")
			}
			return checks
		},
	})

	errorLog := slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	l.public = &http.Server{
		Handler: built.proxy,
		// Slow-client protection: headers must arrive within server.read_header_timeout and idle
		// connections close after server.idle_timeout. Bodies and responses have no overall deadline,
		// because uploads, streams and WebSockets legitimately take long; the admission step reads at
		// most server.max_body_bytes.
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errorLog,
	}
	l.admin = &http.Server{
		Handler:           adminHandler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errorLog,
	}
	return l, nil
}

// startBackground writes the configuration's queues, products and auctions to the store and starts what
// runs beside the servers: the room's tick, admission's workers, the store health check and the
// configuration watch. stop ends them and returns once they have ended.
func startBackground(cfg *config.Config, built *parts, g *gateway, reload <-chan struct{},
	logger *slog.Logger) (stop func()) {
	runCtx, stopBackground := context.WithCancel(context.Background())
	// The configuration's queues are written to the store before serving; if the store is not
	// reachable yet, the room's tick recreates them as soon as it is.
	applyCtx, cancelApply := context.WithTimeout(runCtx, 5*time.Second)
	if !built.store.Embedded() {
		if off, err := built.store.PersistenceOff(applyCtx); err == nil && off {
			logger.Warn("Redis persistence is off (appendonly no, no save points): a Redis restart loses queue " +
				"positions, stock, buyers and bids; turn on appendonly yes with appendfsync everysec")
		}
	}
	if err := built.room.Apply(applyCtx, cfg.Queues, nil); err != nil {
		logger.Warn("queues not written to the store yet; retrying in the background", "error", err.Error())
	}
	if err := built.admission.Apply(applyCtx, cfg.Products, nil); err != nil {
		logger.Warn("products not written to the store yet; they are written on the next reload", "error", err.Error())
	}
	if err := built.admission.ApplyAuctions(applyCtx, cfg.Auctions, nil); err != nil {
		logger.Warn("auctions not written to the store yet; they are written on the next reload", "error", err.Error())
	}
	cancelApply()
	var background sync.WaitGroup
	background.Go(func() { built.room.Run(runCtx) })
	background.Go(func() { built.admission.Run(runCtx) })
	background.Go(func() { built.health.Run(runCtx) })
	fileWatch := g.watchFile()
	background.Go(func() { g.watch(runCtx, fileWatch, reload) })
	return func() {
		stopBackground()
		background.Wait()
	}
}

// serve starts both servers. When one stops, what its Serve returned is sent: before shutdown, a
// listener that failed.
func (l *listeners) serve() <-chan error {
	serveErr := make(chan error, 2)
	go func() { serveErr <- l.public.Serve(l.publicLn) }()
	go func() { serveErr <- l.admin.Serve(l.adminLn) }()
	return serveErr
}

// drain reports edgeq as shutting down, stops accepting and lets in-flight requests finish within
// server.shutdown_timeout, then stops the background work; requests still in flight by then are cut
// off.
func (l *listeners) drain(g *gateway, stopBackground func(), logger *slog.Logger) {
	l.draining.Store(true)
	timeout := g.cfg.Load().Server.ShutdownTimeout
	logger.Info("shutting down: draining in-flight requests", "timeout", timeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var shutdown sync.WaitGroup
	var publicErr error
	shutdown.Go(func() { publicErr = l.public.Shutdown(shutdownCtx) })
	shutdown.Go(func() { l.admin.Shutdown(shutdownCtx) })
	shutdown.Wait()
	stopBackground()
	if publicErr != nil {
		logger.Warn("shutdown timeout reached: requests still in flight were cut off", "error", publicErr.Error())
		l.public.Close()
	}
}

// maxHeaderBytes bounds a request's header block on both listeners (431 beyond).
const maxHeaderBytes = 64 << 10

// routeClientLogs makes the first Run of the process own go-redis's process-wide logger.
var routeClientLogs sync.Once

// parts is everything build makes from a configuration.
type parts struct {
	store     *store.Store
	health    *store.Health
	registry  *prometheus.Registry
	metrics   *metrics.Metrics
	responder *web.Responder
	proxy     *proxy.Proxy
	room      *waitroom.Room
	admission *admission.Service
}

// build turns a validated configuration into the running parts; any error is a start-up error.
func build(cfg *config.Config, logger *slog.Logger) (*parts, error) {
	keyring, err := loadKeys(cfg, logger)
	if err != nil {
		return nil, err
	}
	assets := static.New(cfg.Server.Prefix + "/static/")
	pages, err := templates.Parse(cfg.Pages.TemplatesDir, template.FuncMap{"static": assets.URL})
	if err != nil {
		return nil, fmt.Errorf("pages: %w", err)
	}
	responder := &web.Responder{Pages: pages, Brand: cfg.Pages.Brand, Lang: cfg.Pages.DefaultLanguage}

	origin, err := url.Parse(cfg.Origin.URL)
	if err != nil {
		return nil, fmt.Errorf("origin.url: %w", err)
	}
	trusted := make([]netip.Prefix, 0, len(cfg.Server.TrustedProxies))
	for _, p := range cfg.Server.TrustedProxies {
		prefix, err := config.ParseTrustedProxy(p)
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

	var ts *turnstile.Client
	var tsGate *turnstile.Gate
	if cfg.Turnstile.SiteKey != "" && cfg.Turnstile.SecretKey != "" {
		if turnstile.IsTestingSecret(cfg.Turnstile.SecretKey) {
			logger.Warn("turnstile.secret_key is one of Cloudflare's dummy testing secrets: fine for tests, " +
				"never for a real sale")
		}
		ts = turnstile.New(cfg.Turnstile, st, registry)
		tsGate = turnstile.NewGate(turnstile.GateOptions{
			Client: ts, ClearanceTTL: cfg.Turnstile.ClearanceTTL, Key: identityKey(cfg.Identity, keyring, purposeClearance),
			Prefix: cfg.Server.Prefix, MaxBodyBytes: cfg.Server.MaxBodyBytes,
			Cookies: web.Cookies{Secure: cfg.Tokens.CookieSecure}, Responder: responder,
		})
	}

	room := waitroom.New(waitroom.Options{
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
		Turnstile: ts,
	})
	registry.MustRegister(room.Collector())

	adm := admission.New(admission.Options{
		Store:        st,
		IDs:          ids.New(leaseNode(st, logger)),
		IdentityKey:  identityKey(cfg.Identity, keyring, purposePseudonyms),
		MaxBodyBytes: cfg.Server.MaxBodyBytes,
		ClaimTTL:     cfg.Origin.Timeout + 30*time.Second,
		Prefix:       cfg.Server.Prefix,
		Responder:    responder,
		Logger:       logger,
		Registry:     registry,
	})

	endpoints := http.NewServeMux()
	endpoints.Handle("GET "+cfg.Server.Prefix+"/static/", assets)
	room.Register(endpoints)
	adm.Register(endpoints)
	steps := []proxy.Step{room.Gate()}
	if tsGate != nil {
		tsGate.Register(endpoints)
		steps = append(steps, tsGate)
	}
	steps = append(steps, adm)

	health := store.NewHealth(st.Ping, cfg.StoreHealth, logger, m.ObserveStore)
	p := proxy.New(proxy.Options{
		Degraded:       health.Degraded,
		Origin:         origin,
		OriginTimeout:  cfg.Origin.Timeout,
		Prefix:         cfg.Server.Prefix,
		TrustedProxies: trusted,
		Endpoints:      web.Routes(endpoints, responder),
		Steps:          steps,
		Responder:      responder,
		Metrics:        m,
		Logger:         logger,
	})
	table, err := p.Compile(cfg.Routes)
	if err != nil {
		st.Close()
		return nil, err
	}
	warnMissing(logger, table)
	p.Use(table)
	return &parts{store: st, health: health, registry: registry, metrics: m, responder: responder, proxy: p, room: room, admission: adm}, nil
}

// What the keys of identityKey are for; each purpose gives an independent key.
const (
	purposeRequestIDs = "edgeq request ids v1"
	purposeClearance  = "edgeq turnstile clearance v1"
	purposePseudonyms = "edgeq identity v1"
)

// identityKey gives the MAC key of request ids, clearance cookies or user pseudonyms. The keys come
// from identity.secret when it is set, so that rotating the signing key (the old one in
// tokens.verify_key_files) keeps every place in line, every live token, every clearance and every
// pseudonym valid; otherwise they are derived from the signing key. With a secret, the pseudonym key
// is the secret itself rather than a key derived from it: pseudonyms are stored (buyers, bidders,
// owners), so deriving that key now would change every one of them.
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

func storeKind(r config.Redis) string {
	switch {
	case r.Embedded():
		return "embedded"
	case r.MasterName != "":
		return "sentinel"
	case len(r.Addrs) > 0:
		return "cluster"
	}
	return "redis"
}
