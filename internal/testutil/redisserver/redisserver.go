// Package redisserver runs a private redis-server process on a free loopback port, for tests and
// benchmarks that must measure real Redis rather than the embedded store.
package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/proc"
)

// ErrNotInstalled means redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server is not installed")

// Server is a running private redis-server.
type Server struct {
	addr string
	dir  string
	path string
	args []string
	proc *proc.Process
}

// Start launches redis-server with no persistence on a free port, retrying if another process takes
// the port first, and waits until it answers PING. extra arguments are passed on (e.g. "--appendonly",
// "yes").
func Start(extra ...string) (*Server, error) {
	return start(proc.FreePort, func(string) []string { return extra })
}

// start launches redis-server on a port from pickPort with the arguments extra gives for its
// directory, retrying with another port when the server does not come up (another process took the
// port between the pick and the bind).
func start(pickPort func() (int, error), extra func(dir string) []string) (*Server, error) {
	return startWith(pickPort, func(dir string, port int) ([]string, error) {
		return append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--maxclients", "10000", "--loglevel", "warning",
		}, extra(dir)...), nil
	})
}

// startWith is start with the whole command line up to the caller, computed once the directory and the
// port are known: a Sentinel takes its settings from a file it rewrites, which must name its port.
func startWith(pickPort func() (int, error), argsFor func(dir string, port int) ([]string, error)) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "edgeq-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := pickPort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		args, err := argsFor(dir, port)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, path: path, args: args}
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

// launch starts the server and waits up to 10s until it answers PING; one that does not is killed.
func (s *Server) launch() error {
	client := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer func() { _ = client.Close() }()
	p, err := proc.StartReady(exec.Command(s.path, s.args...), 10*time.Second, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return client.Ping(ctx).Err()
	})
	if err != nil {
		return fmt.Errorf("redis-server at %s: %w", s.addr, err)
	}
	s.proc = p
	return nil
}

// Kill ends the server with SIGKILL, as a crash would, and keeps its directory (and so its append-only
// file, if it has one) for Restart.
func (s *Server) Kill() { s.proc.Kill() }

// Restart starts the server again after Kill, on the same port with the same arguments and directory,
// and waits until it answers PING.
func (s *Server) Restart() error { return s.launch() }

// Pid is the server's process id (benchmarks pin it to a CPU).
func (s *Server) Pid() int { return s.proc.Pid() }

// Dir is the server's working directory (where an append-only file goes).
func (s *Server) Dir() string { return s.dir }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Stop kills the server and removes its directory. Later Stops return at once.
func (s *Server) Stop() {
	s.proc.Kill()
	_ = os.RemoveAll(s.dir)
}
