// Package storetest gives tests real stores: a private redis-server per test package, started on a free
// port the first time a test asks for it, and the embedded store. Scripts are never tested against a
// mock.
//
// When redis-server is not installed, tests fail with a clear message if the CI environment variable is
// set; outside CI they fall back to the embedded store and say so once.
package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
)

// Main runs the tests of a package and then stops its private redis-server. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	server.stop()
	os.Exit(code)
}

// Each runs fn as two subtests, "redis" on the private redis-server and "embedded" on the in-process
// store, each with a store whose keys no other test shares.
func Each(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	t.Run("redis", func(t *testing.T) { fn(t, Redis(t)) })
	t.Run("embedded", func(t *testing.T) { fn(t, Embedded(t)) })
}

// Redis returns a store on the package's private redis-server with a key prefix private to this call.
func Redis(t testing.TB) *store.Store {
	t.Helper()
	addr := RedisAddr(t)
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128})
	t.Cleanup(func() { client.Close() })
	return store.Wrap(client, store.Keys{Prefix: UniquePrefix()})
}

// Embedded returns a fresh embedded store, closed when the test ends.
func Embedded(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.OpenEmbedded(store.Keys{Prefix: UniquePrefix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var prefixes atomic.Int64

// UniquePrefix returns a key prefix no other store of this test process uses.
func UniquePrefix() string { return "t" + strconv.FormatInt(prefixes.Add(1), 10) }

// RedisAddr returns the address of the package's private redis-server, starting it on first use. Tests
// that run edgeq as a separate process give it this address.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr, err := server.addr()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return addr
}

// InCI reports whether the CI environment variable asks for every dependency to be present.
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "0" && v != "false"
}

type redisServer struct {
	once     sync.Once
	address  string
	err      error
	cmd      *exec.Cmd
	dir      string
	fallback *store.Store
}

var server redisServer

func (s *redisServer) addr() (string, error) {
	s.once.Do(func() { s.address, s.err = s.start() })
	return s.address, s.err
}

func (s *redisServer) start() (string, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if InCI() {
			return "", fmt.Errorf("redis-server is not installed but CI is set: tests that run Lua need a real Redis " +
				"(install it with `apt-get install redis-server`; .ci/run does this)")
		}
		fmt.Fprintln(os.Stderr, "storetest: redis-server not found on PATH; tests that ask for real Redis run on the "+
			"embedded store instead (install redis-server to test against Redis; with CI=true this is an error)")
		emb, err := store.OpenEmbedded(store.Keys{})
		if err != nil {
			return "", err
		}
		s.fallback = emb
		return emb.Addr(), nil
	}
	dir, err := os.MkdirTemp("", "edgeq-redis-")
	if err != nil {
		return "", err
	}
	s.dir = dir
	// A port picked by the kernel can be taken by someone else before redis binds it; try a few.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(path,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--maxclients", "10000", "--loglevel", "warning")
		// Take the server down with the test binary even if it dies without running Main's cleanup.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return "", fmt.Errorf("start redis-server: %w", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if lastErr = waitReady(addr, exited); lastErr == nil {
			s.cmd = cmd
			return addr, nil
		}
		cmd.Process.Kill()
		<-exited
	}
	return "", fmt.Errorf("redis-server did not start: %w", lastErr)
}

func waitReady(addr string, exited <-chan error) error {
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
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
	return fmt.Errorf("redis-server at %s did not answer PING in 10s", addr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *redisServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
	if s.fallback != nil {
		s.fallback.Close()
	}
}
