// Command edgeq is an edge gateway for traffic spikes: a reverse proxy with a virtual waiting room,
// signed access tokens and atomic admission on Redis, put in front of an unmodified shop.
//
//	edgeq [serve] [-config FILE]             run the gateway (FILE also from EDGEQ_CONFIG)
//	edgeq check -config FILE [-print]        validate a configuration file; -print shows the effective one
//	edgeq keygen [-out FILE]                 write a new Ed25519 signing key (PKCS#8 PEM)
//	edgeq reconcile -config FILE [-wait 1m]  compare the store with the ledger (exit 1 on a difference)
//	edgeq report -config FILE -queue ID [-from T] [-to T] -out FILE.html
//	                                         write a queue's report after a drop as one HTML file
//	edgeq version                            print the version, the commit, the Go version and the build settings
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgeq/edgeq/internal/buildinfo"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/server"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3" (make build, make release and the
// Dockerfile set it from the git tag); without it, internal/buildinfo finds one in what the binary
// records of its build.
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit code: 0 success or clean shutdown, 1 a
// configuration or start-up error (one line on stderr), 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	command := "serve"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		usage(stdout)
		return 0
	}
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		command, args = args[0], args[1:]
	}
	switch command {
	case "serve":
		return serve(args, stderr)
	case "check":
		return check(args, stdout, stderr)
	case "keygen":
		return keygen(args, stdout, stderr)
	case "reconcile":
		return reconcile(args, stdout, stderr)
	case "report":
		return writeReport(args, stdout, stderr)
	case "version":
		return printVersion(args, stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	_, _ = fmt.Fprintf(stderr, "edgeq: unknown command %q\n", command)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	_, _ = fmt.Fprint(w, `usage:
  edgeq [serve] [-config FILE]             run the gateway (FILE also from EDGEQ_CONFIG)
  edgeq check -config FILE [-print]        validate a configuration file; -print shows the effective one
  edgeq keygen [-out FILE]                 write a new Ed25519 signing key (PKCS#8 PEM)
  edgeq reconcile -config FILE [-wait 1m]  compare the store with the ledger (exit 1 on a difference)
  edgeq report -config FILE -queue ID [-from T] [-to T] -out FILE.html
                                           write a queue's report after a drop as one HTML file
  edgeq version                            print the version, the commit, the Go version and the build settings
`)
}

// parseExit is the exit code of a failed flag parse: 0 when help was asked for (the flags were
// printed), 2 for bad usage.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("edgeq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// configFlags are the flags of a command that reads the configuration: -config, EDGEQ_CONFIG by default.
func configFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := newFlags(name, stderr)
	return fs, fs.String("config", os.Getenv("EDGEQ_CONFIG"), "configuration file (YAML)")
}

// toolLogger is the logger of a command that runs once against the store: warnings and errors alone,
// and go-redis's dial retries at debug, so that an unreachable Redis is one line.
func toolLogger(stderr io.Writer) *slog.Logger {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store.RouteClientLogs(logger)
	return logger
}

func serve(args []string, stderr io.Writer) int {
	fs, configPath := configFlags("serve", stderr)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default: // a reload is already pending
			}
		}
	}()
	err := server.Run(ctx, server.Options{ConfigPath: *configPath, LogOutput: stderr, Reload: reload, Version: version})
	if err != nil {
		var startup *server.StartupError
		if errors.As(err, &startup) {
			_, _ = fmt.Fprintln(stderr, "edgeq:", startup.Error())
		} else {
			_, _ = fmt.Fprintln(stderr, "edgeq:", err)
		}
		return 1
	}
	return 0
}

func check(args []string, stdout, stderr io.Writer) int {
	fs, configPath := configFlags("check", stderr)
	print := fs.Bool("print", false, "print the effective configuration (defaults and EDGEQ_* applied, secrets masked)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if *configPath == "" {
		_, _ = fmt.Fprintln(stderr, "edgeq check: -config FILE is required")
		return 2
	}
	problems, advice, err := server.Review(*configPath)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "edgeq:", err)
		return 1
	}
	// Warnings and notes do not fail the check: the file is valid, and start-up logs the same lines.
	for _, w := range advice.Warnings {
		_, _ = fmt.Fprintln(stderr, "warning:", w)
	}
	for _, n := range advice.Notes {
		_, _ = fmt.Fprintln(stderr, "note:", n)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			_, _ = fmt.Fprintln(stdout, p.Error())
		}
		_, _ = fmt.Fprintf(stderr, "%s: %d problem(s)\n", *configPath, len(problems))
		return 1
	}
	if *print {
		cfg, err := config.Load(*configPath)
		if err == nil {
			err = config.Print(cfg, stdout)
		}
		if err != nil {
			_, _ = fmt.Fprintln(stderr, "edgeq:", err)
			return 1
		}
		return 0
	}
	_, _ = fmt.Fprintf(stdout, "%s: ok\n", *configPath)
	return 0
}

func keygen(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("keygen", stderr)
	out := fs.String("out", "", "write the key to FILE (mode 0600, never overwritten) instead of stdout")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	key, err := token.GenerateKey()
	if err == nil {
		var pemBytes []byte
		if pemBytes, err = token.MarshalPrivateKey(key); err == nil {
			if *out == "" {
				_, err = stdout.Write(pemBytes)
			} else {
				err = writeNew(*out, pemBytes)
			}
		}
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "edgeq keygen:", err)
		return 1
	}
	if *out != "" {
		_, _ = fmt.Fprintf(stderr, "wrote %s (kid %s)\n", *out, token.KeyID(key.Public().(ed25519.PublicKey)))
	}
	return 0
}

// writeNew creates path with mode 0600 and fails if it exists: an existing key is never replaced by
// accident.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // the operator's own -out path
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// printVersion prints what internal/buildinfo knows of this binary; edgeq_build_info on /metrics
// carries the same version.
func printVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintln(stderr, "edgeq version: takes no arguments")
		return 2
	}
	if err := buildinfo.Read(version).Write(stdout, "edgeq"); err != nil {
		_, _ = fmt.Fprintln(stderr, "edgeq version:", err)
		return 1
	}
	return 0
}

// reconcile compares the store with the ledger (docs/operations.md, "The ledger"): 0 when they
// agree, 1 when they differ (each difference on a line of stdout), 3 when they could not be compared.
func reconcile(args []string, stdout, stderr io.Writer) int {
	fs, configPath := configFlags("reconcile", stderr)
	wait := fs.Duration("wait", time.Minute, "how long to let the ledger catch up before comparing")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if *configPath == "" {
		_, _ = fmt.Fprintln(stderr, "edgeq reconcile: -config FILE is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := toolLogger(stderr)
	r, err := server.Reconcile(ctx, *configPath, *wait, logger)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "edgeq reconcile:", err)
		return 3
	}
	for _, d := range r.Differences {
		_, _ = fmt.Fprintln(stdout, d.String())
	}
	_, _ = fmt.Fprintf(stdout, "compared %s (records since %s): %d difference(s)\n",
		r.Compared(), vocab.FormatTime(r.Since), len(r.Differences))
	if len(r.Differences) > 0 {
		return 1
	}
	return 0
}

// writeReport writes a queue's report page to a file (docs/operations.md, "After the drop"): 0 when
// written, 1 when it could not be, 2 for bad usage.
func writeReport(args []string, stdout, stderr io.Writer) int {
	fs, configPath := configFlags("report", stderr)
	queue := fs.String("queue", "", "the queue's id")
	from := fs.String("from", "", "start of the range, RFC 3339 (default: 24 hours before -to; without -from and -to, the drop's own span)")
	to := fs.String("to", "", "end of the range, RFC 3339 (default: now; without -from and -to, the drop's own span)")
	out := fs.String("out", "", "the HTML file to write (- for standard output)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if *configPath == "" || *queue == "" || *out == "" {
		_, _ = fmt.Fprintln(stderr, "edgeq report: -config FILE, -queue ID and -out FILE are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := toolLogger(stderr)
	var page bytes.Buffer
	if err := server.WriteReport(ctx, server.ReportOptions{ConfigPath: *configPath, Queue: *queue, From: *from, To: *to}, &page, logger); err != nil {
		_, _ = fmt.Fprintln(stderr, "edgeq report:", err)
		return 1
	}
	if *out == "-" {
		_, _ = stdout.Write(page.Bytes())
		return 0
	}
	//nolint:gosec // a report page to share, not a secret
	if err := os.WriteFile(*out, page.Bytes(), 0o644); err != nil {
		_, _ = fmt.Fprintln(stderr, "edgeq report:", err)
		return 1
	}
	_, _ = fmt.Fprintf(stdout, "wrote %s (%d bytes)\n", *out, page.Len())
	return 0
}
