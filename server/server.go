// Package server assembles edgeq from its parts and runs it: configuration, logging, store, metrics,
// the public proxy, the admin listener, hot reload and graceful shutdown. cmd/edgeq is a thin wrapper
// around Run.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/admin"
	"github.com/edgeq/edgeq/internal/buildinfo"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/tracing"
)

// Options configures Run.
type Options struct {
	ConfigPath string          // "" runs on defaults and EDGEQ_* variables only
	LogOutput  io.Writer       // where logs go (stderr)
	Reload     <-chan struct{} // a value forces a reload (SIGHUP)
	// Version is the version stamped into the binary at link time ("" when none was): with what the
	// binary records of its build it makes edgeq_build_info, as it makes `edgeq version`'s text.
	Version string
	// Started, if set, is called once both listeners are bound, with their addresses (tests listen on
	// port 0 and learn the ports here).
	Started func(public, admin net.Addr)
	// StartedTLS, if set, is called before Started with the TLS listener's address when
	// server.tls.listen is set.
	StartedTLS func(tls net.Addr)
	// acmeChallenges pins the ACME challenge types (tests); nil = both.
	acmeChallenges []string
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

	binary := buildinfo.Read(opts.Version)
	built, err := build(cfg, logger, binary.Version)
	if err != nil {
		return &StartupError{Err: err}
	}
	built.registry.MustRegister(metrics.NewBuildInfo(binary))
	defer func() { _ = built.store.Close() }()
	if built.ledger != nil {
		defer built.ledger.Close()
	}

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

	l, err := listen(cfg, built, g, opts.acmeChallenges, logger)
	if err != nil {
		_ = built.tracing.Shutdown(context.Background()) // nothing was traced: nothing to wait for
		return err
	}
	stopBackground := startBackground(cfg, built, g, opts.Reload, logger)
	serveErr := l.serve(logger)
	logger.Info("edgeq started",
		"public", l.publicLn.Addr().String(), "admin", l.adminLn.Addr().String(), "origin", cfg.Origin.URL,
		"routes", len(cfg.Routes), "store", storeKind(cfg.Redis), "config", opts.ConfigPath, "version", binary.Version)
	if l.tls != nil {
		logger.Info("TLS listener started", "tls", l.tls.ln.Addr().String(), "certificates", len(cfg.Server.TLS.Certificates),
			"acme_domains", len(cfg.Server.TLS.ACME.Domains),
			"min_version", cfg.Server.TLS.MinVersion, "redirect_http", cfg.Server.TLS.RedirectHTTP, "h2c", cfg.Server.H2C)
		if opts.StartedTLS != nil {
			opts.StartedTLS(l.tls.ln.Addr())
		}
	}
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
	// tls is server.tls.listen's server, nil without one; stopWatch ends its certificate watch.
	tls       *edgeTLS
	stopWatch context.CancelFunc
	watching  sync.WaitGroup
	// draining is set once shutdown begins; the admin readiness check reports it.
	draining atomic.Bool
	// tracing's spans are sent before the drain ends (nil: tracing off).
	tracing *tracing.Tracing
}

// listen binds server.listen, admin.listen and server.tls.listen and builds the servers that will
// serve them; a port in use, or a certificate that does not load, is a start-up error.
func listen(cfg *config.Config, built *parts, g *gateway, challenges []string, logger *slog.Logger) (*listeners, error) {
	l := &listeners{tracing: built.tracing}
	var err error
	l.publicLn, err = net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, startupErr("server.listen: %v", err)
	}
	l.adminLn, err = net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		_ = l.publicLn.Close()
		return nil, startupErr("admin.listen: %v", err)
	}

	dashboard, err := admin.NewDashboard(cfg.Pages.Brand)
	if err != nil {
		_ = l.publicLn.Close()
		_ = l.adminLn.Close()
		return nil, startupErr("dashboard: %v", err)
	}
	rep, err := newReport(cfg, built.store, built.responder)
	if err != nil {
		_ = l.publicLn.Close()
		_ = l.adminLn.Close()
		return nil, startupErr("%v", err)
	}
	adminHandler := admin.Handler(admin.Options{
		Dashboard:    dashboard,
		Report:       rep.PageHandler(),
		API:          []func(*http.ServeMux){built.room.RegisterAdmin, built.admission.RegisterAdmin, rep.RegisterAPI},
		APIKey:       cfg.Admin.APIKey,
		AllowedHosts: cfg.Admin.AllowedHosts,
		OpenMetrics:  cfg.Tracing.On(), // the format that carries the latency histograms' exemplars
		Misdirected:  built.metrics.AdminMisdirected,
		Gatherer:     built.registry,
		Responder:    built.responder,
		Logger:       logger,
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
		Handler:   built.proxy,
		Protocols: plainProtocols(cfg.Server.H2C),
		// Slow-client protection: headers must arrive within server.read_header_timeout, idle
		// connections close after server.idle_timeout, and the proxy ends a body's reads
		// server.body_timeout after its request arrived (a read deadline it lifts once the body is in).
		// Responses have no overall deadline, because streams and WebSockets legitimately take long:
		// the proxy gives each write of an answer server.write_timeout instead (a client that takes
		// nothing is cut off); the admission step reads at most server.max_body_bytes.
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errorLog,
	}
	if l.tls, err = listenTLS(cfg, built, built.proxy, l.public, l.publicLn.Addr(), challenges, logger); err != nil {
		_ = l.publicLn.Close()
		_ = l.adminLn.Close()
		return nil, startupErr("%v", err)
	}
	if l.tls != nil && cfg.Server.TLS.RedirectHTTP {
		l.public.Handler = newRedirectHTTP(built.proxy, l.tls.ln.Addr(), cfg.Server.TrustedProxies)
	}
	if l.tls != nil && l.tls.acme != nil {
		l.public.Handler = l.tls.acme.HTTPHandler(l.public.Handler) // HTTP-01 checks, before any redirect
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
		switch p, err := built.store.Persistence(applyCtx); {
		case err != nil:
		case p == store.PersistNothing:
			logger.Warn("Redis persistence is off (appendonly no, no save points): a Redis restart loses queue " +
				"positions, stock, buyers and bids; turn on appendonly yes with appendfsync everysec")
		case p == store.PersistRDBOnly:
			logger.Warn("Redis appendonly is off: RDB snapshots alone lose every sale, bid and queue place since " +
				"the last snapshot (minutes) when Redis crashes; turn on appendonly yes with appendfsync everysec")
		}
	}
	built.room.KeepCheckTimes(routesCheck(cfg.Routes))
	if err := built.room.Apply(applyCtx, cfg.Queues, nil); err != nil {
		logger.Warn("queues not written to the store yet; retrying in the background", "error", err.Error())
	}
	if err := built.admission.Apply(applyCtx, cfg, nil); err != nil {
		logger.Warn("products or auctions not written to the store yet; they are written on the next reload", "error", err.Error())
	}
	// The liveness lease fences every admitted request (docs/reference.md "Failover"): held before
	// the first visitor is served.
	if err := built.admission.RenewLease(applyCtx); err != nil {
		logger.Warn("the liveness lease is not written yet: admitted requests are answered 503 until it is", "error", err.Error())
	}
	cancelApply()
	var background sync.WaitGroup
	background.Go(func() { built.room.Run(runCtx) })
	if built.check != nil {
		background.Go(func() { built.check.Run(runCtx) })
	}
	background.Go(func() { built.admission.Run(runCtx) })
	background.Go(func() { built.health.Run(runCtx) })
	background.Go(func() { built.store.WatchReplicas(runCtx, cfg.StoreHealth.Interval) })
	background.Go(func() { built.inflight.Run(runCtx) })
	background.Go(func() { built.proxy.RunHealth(runCtx) }) // pools' active health checks
	fileWatch := g.watchFile()
	background.Go(func() { g.watch(runCtx, fileWatch, reload) })
	return func() {
		stopBackground()
		background.Wait()
	}
}

// serve starts the servers, and the TLS listener's watch of its certificate files. When a server
// stops, what its Serve returned is sent: before shutdown, a listener that failed.
func (l *listeners) serve(logger *slog.Logger) <-chan error {
	serveErr := make(chan error, 3)
	go func() { serveErr <- l.public.Serve(l.publicLn) }()
	go func() { serveErr <- l.admin.Serve(l.adminLn) }()
	if l.tls != nil {
		go func() { serveErr <- l.tls.server.ServeTLS(l.tls.ln, "", "") }()
		var watchCtx context.Context
		watchCtx, l.stopWatch = context.WithCancel(context.Background())
		if l.tls.certs != nil {
			l.watching.Go(func() { l.tls.certs.Watch(watchCtx) })
		}
		if l.tls.acme != nil {
			// Ordering runs in the background; an error here is the storage's, before any order.
			if err := l.tls.acme.Start(watchCtx); err != nil {
				logger.Error("automatic certificates did not start: names without a certificate file "+
					"fail their TLS handshakes", "error", err.Error())
			}
		}
	}
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
	var publicErr, tlsErr error
	shutdown.Go(func() { publicErr = l.public.Shutdown(shutdownCtx) })
	shutdown.Go(func() { _ = l.admin.Shutdown(shutdownCtx) })
	if l.tls != nil {
		shutdown.Go(func() { tlsErr = l.tls.server.Shutdown(shutdownCtx) })
		l.stopWatch()
		l.watching.Wait()
		if l.tls.acme != nil {
			l.tls.acme.Stop()
		}
	}
	shutdown.Wait()
	stopBackground()
	// The spans of the requests just drained and of the workers' last passes, sent within what is
	// left of server.shutdown_timeout.
	if err := l.tracing.Shutdown(shutdownCtx); err != nil {
		logger.Warn("tracing: spans still queued at the shutdown timeout were lost", "error", err.Error())
	}
	if err := errors.Join(publicErr, tlsErr); err != nil {
		logger.Warn("shutdown timeout reached: requests still in flight were cut off", "error", err.Error())
		_ = l.public.Close()
		if l.tls != nil {
			_ = l.tls.server.Close()
		}
	}
}

// maxHeaderBytes bounds a request's header block on both listeners (431 beyond).
const maxHeaderBytes = 64 << 10

// routeClientLogs makes the first Run of the process own go-redis's process-wide logger.
var routeClientLogs sync.Once

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
