// Command demoshop runs the demo shop (package demoshop): the origin of edgeq's quick start, built the
// way real shops are (a cart API, a checkout that fails when two overlap, a GraphQL endpoint executed
// by graph-gophers/graphql-go). It knows nothing about edgeq.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgeq/edgeq/demoshop"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3000", "address to listen on")
	verbose := flag.Bool("v", false, "log every request")
	dbLatency := flag.Duration("db-latency", 20*time.Millisecond,
		"time between reading the last order number and inserting the next: checkouts overlapping within it fail with 500")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	shop, err := demoshop.New(logger, demoshop.DBLatency(*dbLatency))
	if err != nil {
		logger.Error("cannot start", "error", err)
		os.Exit(1)
	}
	srv := &http.Server{Addr: *listen, Handler: shop, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("demo shop listening", "url", "http://"+*listen+"/")
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("demo shop stopped", "error", err)
		os.Exit(1)
	}
}
