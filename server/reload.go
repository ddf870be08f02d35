package server

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/accesslog"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/waitroom"
)

// gateway holds what a hot reload swaps (docs/reference.md "Configuration").
type gateway struct {
	cfg       atomic.Pointer[config.Config] // the configuration in force
	path      string
	level     *slog.LevelVar
	logger    *slog.Logger
	metrics   *metrics.Metrics
	proxy     *proxy.Proxy
	room      *waitroom.Room
	admission *admission.Service

	loadedSum [sha256.Size]byte // of the file last loaded, to skip events that changed nothing
}

// reloadDebounce lets an editor or a ConfigMap update finish writing before the file is read.
const reloadDebounce = 200 * time.Millisecond

// fileWatch is the watch on the configuration file's directory. It watches the directory rather
// than the file, because editors and Kubernetes ConfigMap updates replace the file (rename, symlink
// swap) instead of writing it in place.
type fileWatch struct {
	watcher *fsnotify.Watcher // nil when there is no file or it cannot be watched
}

// watchFile starts watching before Run reports itself started, so no change made after that is
// missed.
func (g *gateway) watchFile() *fileWatch {
	if g.path == "" {
		return &fileWatch{}
	}
	w, err := fsnotify.NewWatcher()
	if err == nil {
		if err = w.Add(filepath.Dir(g.path)); err != nil {
			_ = w.Close()
		}
	}
	if err != nil {
		g.logger.Warn("cannot watch the configuration file; reload with SIGHUP", "error", err.Error())
		return &fileWatch{}
	}
	return &fileWatch{watcher: w}
}

// watch reloads on every value of forced (SIGHUP) and when the configuration file changes, until ctx
// ends.
func (g *gateway) watch(ctx context.Context, fw *fileWatch, forced <-chan struct{}) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if fw.watcher != nil {
		defer func() { _ = fw.watcher.Close() }()
		events, errs = fw.watcher.Events, fw.watcher.Errors
	}
	base := filepath.Base(g.path)
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-forced:
			if !ok {
				forced = nil
				continue
			}
			g.reload("signal", true)
		case ev := <-events:
			name := filepath.Base(ev.Name)
			// "..data" is the symlink Kubernetes swaps when a mounted ConfigMap changes.
			if name == base || name == "..data" {
				debounce.Reset(reloadDebounce)
			}
		case err := <-errs:
			g.logger.Warn("configuration file watch error", "error", err.Error())
		case <-debounce.C:
			g.reload("file change", false)
		}
	}
}

// reload loads, validates and applies the configuration file. An invalid file is refused whole: the
// running configuration stays and the error is logged and counted.
func (g *gateway) reload(trigger string, force bool) {
	sum := fileSum(g.path)
	if !force && sum == g.loadedSum {
		return // touched, or a neighbour changed: nothing to do
	}
	g.loadedSum = sum
	next, err := config.Load(g.path)
	if err != nil {
		g.refuse(trigger, config.OneLine(err))
		return
	}
	table, err := g.proxy.CompileWith(next.Routes, next.Origins) // the pools with the routes that name them
	if err != nil {
		g.refuse(trigger, err.Error())
		return
	}
	running := g.cfg.Load()
	if ignored := config.RestartKeys(running, next); len(ignored) > 0 {
		g.logger.Warn("configuration keys changed that only take effect after a restart; ignored until then",
			"keys", strings.Join(ignored, ","))
	}
	g.proxy.Use(table)
	warnMissing(g.logger, table)
	if err := g.admission.Use(next); err != nil {
		// The routes compiled with the same parsing: only a bug gets here.
		g.logger.Warn("the admission listings of a user's own keep the previous identities", "error", err.Error())
	}
	g.level.Set(parseLevel(next.Log.Level))
	g.cfg.Store(config.WithHot(running, next))
	// Queue settings go to the store (capacity changes take effect at once); the file was valid, so a
	// store error here is not a refused reload: the room's tick keeps retrying missing queues.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	g.room.KeepCheckTimes(routesCheck(next.Routes))
	if err := g.room.Apply(ctx, next.Queues, running.Queues); err != nil {
		g.logger.Warn("queue settings not written to the store", "error", err.Error())
	}
	if err := g.admission.Apply(ctx, next, running); err != nil {
		g.logger.Warn("products or auctions not written to the store", "error", err.Error())
	}
	cancel()
	g.metrics.ConfigReloads.WithLabelValues("ok").Inc()
	g.logger.Info("configuration reloaded", "trigger", trigger, "routes", strings.Join(table.Routes(), ","),
		"log_level", next.Log.Level)
}

func (g *gateway) refuse(trigger, reason string) {
	g.metrics.ConfigReloads.WithLabelValues("error").Inc()
	g.logger.Error("configuration reload refused; the running configuration stays", "trigger", trigger, "error", reason)
}

func fileSum(path string) [sha256.Size]byte {
	if path == "" {
		return [sha256.Size]byte{}
	}
	f, err := os.Open(path) //nolint:gosec // the configuration file edgeq was started with
	if err != nil {
		return [sha256.Size]byte{}
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	_, _ = io.Copy(h, f) // a failed read sums less: reload then loads the file, which says what is wrong
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

func parseLevel(level string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// newLogger is slog's JSON or text handler, with the access-log line's fast path (package accesslog).
func newLogger(w io.Writer, format string, level *slog.LevelVar) *slog.Logger {
	return slog.New(accesslog.NewHandler(w, format, level))
}

// routesCheck reports whether some route asks for a bot check (routes[].turnstile).
func routesCheck(routes []config.Route) bool {
	for _, r := range routes {
		if r.Turnstile {
			return true
		}
	}
	return false
}
