// Package pgserver runs a private PostgreSQL server (Debian's postgresql package) in a temporary
// directory on a free loopback port, for tests and benchmarks of the ledger, as redisserver does for
// Redis.
//
// PostgreSQL refuses to run as root: under root the server runs as the "postgres" user the Debian
// package creates (its directory is handed to that user).
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeq/edgeq/internal/testutil/proc"
)

// ErrNotInstalled means no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (Debian: apt-get install postgresql)")

// Server is a running private PostgreSQL server. Its superuser is "edgeq", trusted on loopback.
type Server struct {
	bin  string // directory of initdb and postgres
	dir  string // data directory (dir/data) and socket directory (dir)
	port int
	cred *syscall.Credential
	proc *proc.Process
	dbs  atomic.Int64
}

// binDir finds the directory of the server binaries: Debian keeps them in
// /usr/lib/postgresql/<version>/bin (the newest is taken), other systems put initdb on PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

// Start creates a cluster with initdb and starts it. Durability settings are off (fsync,
// synchronous_commit): a test server holds nothing worth a disk flush.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "edgeq-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := s.command("initdb", "-D", s.data(), "-U", "edgeq", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	var lastErr error
	for range 5 {
		if s.port, err = proc.FreePort(); err != nil {
			break
		}
		if lastErr = s.Restart(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("postgres did not start: %w", errors.Join(err, lastErr))
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// Take the server down with its parent even if the parent dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

// Restart starts the server (again, after Stop) on its port and waits up to 30s until it takes
// connections; one that does not is killed.
func (s *Server) Restart() error {
	cmd := s.command("postgres", "-D", s.data(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "log_min_messages=warning")
	p, err := proc.StartReady(cmd, 30*time.Second, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
	if err != nil {
		return fmt.Errorf("postgres on port %d: %w", s.port, err)
	}
	s.proc = p
	return nil
}

// Stop shuts the server down (fast shutdown: open connections are ended; killed after 10s) and keeps
// its data for Restart.
func (s *Server) Stop() { s.proc.Stop(syscall.SIGINT, 10*time.Second) }

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	_ = os.RemoveAll(s.dir)
}

// URL is the connection URL of a database on the server.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("postgres://edgeq@127.0.0.1:%d/%s?sslmode=disable", s.port, database)
}

// NewDatabase creates an empty database of its own and returns its URL.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.URL(name), nil
}
