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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled means redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server is not installed")

// Server is a running private redis-server.
type Server struct {
	addr   string
	dir    string
	path   string
	args   []string
	cmd    *exec.Cmd
	exited chan error
}

// Start launches redis-server with no persistence on a free port, retrying if another process takes
// the port first, and waits until it answers PING. extra arguments are passed on (e.g. "--appendonly",
// "yes").
func Start(extra ...string) (*Server, error) {
	return start(freePort, func(string) []string { return extra })
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
			os.RemoveAll(dir)
			return nil, err
		}
		args, err := argsFor(dir, port)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, path: path, args: args}
		if err := s.launch(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if lastErr = s.waitReady(); lastErr == nil {
			return s, nil
		}
		s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

func (s *Server) launch() error {
	cmd := exec.Command(s.path, s.args...)
	// Take the server down with its parent even if the parent dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan error, 1)
	go func() { s.exited <- cmd.Wait() }()
	return nil
}

// Kill ends the server with SIGKILL, as a crash would, and keeps its directory (and so its append-only
// file, if it has one) for Restart.
func (s *Server) Kill() {
	s.cmd.Process.Kill()
	err := <-s.exited
	s.exited <- err
}

// Restart starts the server again after Kill, on the same port with the same arguments and directory,
// and waits until it answers PING.
func (s *Server) Restart() error {
	if err := s.launch(); err != nil {
		return err
	}
	return s.waitReady()
}

// Pid is the server's process id (benchmarks pin it to a CPU).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Dir is the server's working directory (where an append-only file goes).
func (s *Server) Dir() string { return s.dir }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.exited
	s.exited <- nil // later Stops return at once
	os.RemoveAll(s.dir)
}

func (s *Server) waitReady() error {
	client := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.exited:
			s.exited <- err
			return fmt.Errorf("redis-server exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server at %s did not answer PING in 10s", s.addr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
