// Package storetest gives tests real stores: a private redis-server per test package, started on a free
// port the first time a test asks for it, a private 3-master Redis Cluster, likewise, and the embedded
// store. Scripts are never tested against a mock.
//
// When redis-server (or, for the cluster, redis-cli) is not installed, tests fail with a clear message
// if the CI environment variable is set. Outside CI a test that asks for a single Redis runs on the
// embedded store instead (said once on stderr), and a test that asks for the cluster is skipped,
// saying why: a "cluster" case on one Redis would pass without testing anything a cluster changes.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

// Main runs the tests of a package and then stops its private redis-server and cluster. Call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	server.stop()
	cluster.stop()
	atExit.Lock()
	for _, fn := range atExit.fns {
		fn()
	}
	atExit.Unlock()
	os.Exit(code)
}

var atExit struct {
	sync.Mutex
	fns []func()
}

// AtExit registers fn to run when Main ends, for other private servers a test package starts (the
// ledger's PostgreSQL).
func AtExit(fn func()) {
	atExit.Lock()
	atExit.fns = append(atExit.fns, fn)
	atExit.Unlock()
}

// Each runs fn as two subtests, "redis" on the private redis-server and "embedded" on the in-process
// store, each with a store whose keys no other test shares.
func Each(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	t.Run("redis", func(t *testing.T) { fn(t, Redis(t)) })
	t.Run("embedded", func(t *testing.T) { fn(t, Embedded(t)) })
}

// EachWithCluster is Each plus a third subtest, "cluster", on the package's private 3-master Redis
// Cluster through a go-redis ClusterClient: for the tests whose invariants must hold when the keys of
// different products, auctions and queues live on different nodes. Without redis-server or redis-cli
// the "cluster" subtest fails in CI and is skipped, saying why, elsewhere (Cluster).
func EachWithCluster(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	Each(t, fn)
	t.Run("cluster", func(t *testing.T) { fn(t, Cluster(t)) })
}

// starvedWait is how long the test clients wait for a connection from the pool and for an answer.
// The suites fire hundreds of concurrent requests under the race detector while `go test` runs other
// packages (and Chromium) on the same two CPUs; go-redis's defaults (4 s for a pooled connection, 3 s
// for an answer) then turn a starved goroutine into a 503 that says nothing about the invariant under
// test. edgeq's own client (store.Open) keeps its fail-fast timeouts, which the outage tests exercise.
const starvedWait = 30 * time.Second

// Redis returns a store on the package's private redis-server with a key prefix private to this call.
func Redis(t testing.TB) *store.Store {
	t.Helper()
	addr := RedisAddr(t)
	if server.fallback != nil {
		t.Log("storetest: redis-server is not installed: this store is the embedded one, not a real Redis")
	}
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128, PoolTimeout: starvedWait, ReadTimeout: starvedWait})
	t.Cleanup(func() { _ = client.Close() })
	return store.Wrap(client, store.Keys{Prefix: UniquePrefix()})
}

// Cluster returns a store on the package's private Redis Cluster (three masters, started on first use)
// through a ClusterClient, with a key prefix private to this call. Without a cluster it fails the test
// in CI and skips it elsewhere (ClusterAddrs).
func Cluster(t testing.TB) *store.Store {
	t.Helper()
	addrs := ClusterAddrs(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 128, PoolTimeout: starvedWait, ReadTimeout: starvedWait})
	t.Cleanup(func() { _ = client.Close() })
	return store.Wrap(client, store.Keys{Prefix: UniquePrefix()})
}

// ClusterAddrs returns the addresses of the package's private Redis Cluster nodes, starting it on first
// use. When redis-server or redis-cli is missing it fails the test in CI and skips it elsewhere, naming
// what is missing: it never returns without a cluster. Call it from the test's goroutine.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	return cluster.addrsFor(t)
}

func (c *redisCluster) addrsFor(t testing.TB) []string {
	t.Helper()
	addrs, err := c.addrs()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	if addrs == nil {
		t.Skipf("storetest: no Redis Cluster here (%v): skipped outside CI; with CI=true this fails "+
			"(apt-get install redis-server, which brings redis-tools and so redis-cli)", c.missing)
	}
	return addrs
}

// MasterOf returns the address of the cluster master holding key, so that a test can make sure its keys
// are spread over the nodes (a cross-slot mistake only shows when they are); "" when s is not on a
// Redis Cluster.
func MasterOf(t testing.TB, s *store.Store, key string) string {
	t.Helper()
	client, ok := s.Client.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	master, err := client.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatalf("storetest: master of %s: %v", key, err)
	}
	return master.Options().Addr
}

// Embedded returns a fresh embedded store, closed when the test ends.
func Embedded(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.OpenEmbedded(store.Keys{Prefix: UniquePrefix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
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
	server   *redisserver.Server
	fallback *store.Store
}

var server redisServer

func (s *redisServer) addr() (string, error) {
	s.once.Do(func() { s.address, s.err = s.start() })
	return s.address, s.err
}

func (s *redisServer) start() (string, error) {
	srv, err := redisserver.Start()
	if errors.Is(err, redisserver.ErrNotInstalled) {
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
	if err != nil {
		return "", err
	}
	s.server = srv
	return srv.Addr(), nil
}

func (s *redisServer) stop() {
	if s.server != nil {
		s.server.Stop()
	}
	if s.fallback != nil {
		_ = s.fallback.Close()
	}
}

// clusterMasters is the size of the test cluster: the smallest Redis Cluster there is, and enough for
// the keys of a handful of products or queues to land on different nodes.
const clusterMasters = 3

type redisCluster struct {
	once    sync.Once
	address []string
	err     error
	missing error // outside CI, what is missing for a cluster (the tests that ask for one are skipped)
	cluster *redisserver.Cluster
}

var cluster redisCluster

func (c *redisCluster) addrs() ([]string, error) {
	c.once.Do(func() { c.address, c.err = c.start() })
	return c.address, c.err
}

func (c *redisCluster) start() ([]string, error) {
	cl, err := redisserver.StartCluster(clusterMasters)
	if errors.Is(err, redisserver.ErrNotInstalled) || errors.Is(err, redisserver.ErrCLINotInstalled) {
		if InCI() {
			return nil, fmt.Errorf("%v but CI is set: the invariant tests must also run on a Redis Cluster "+
				"(apt-get install redis-server, which brings redis-tools and so redis-cli; .ci/run does this)", err)
		}
		fmt.Fprintf(os.Stderr, "storetest: %v; tests that ask for a Redis Cluster are skipped "+
			"(with CI=true this is an error)\n", err)
		c.missing = err
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.cluster = cl
	return cl.Addrs(), nil
}

func (c *redisCluster) stop() {
	if c.cluster != nil {
		c.cluster.Stop()
	}
}

// RedisCPU reads what a redis-server has spent so far, in µs: process is its CPU (INFO cpu: user and
// system), scripts the time its EVALSHA calls took (INFO commandstats). Benchmarks report Redis CPU per
// operation from two readings: Redis is one shared core for every replica.
func RedisCPU(tb testing.TB, c redis.UniversalClient) (process, scripts float64) {
	tb.Helper()
	text, err := c.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "used_cpu_user", "used_cpu_sys":
			n, _ := strconv.ParseFloat(v, 64)
			process += n * 1e6
		case "cmdstat_evalsha":
			for _, f := range strings.Split(v, ",") {
				if name, n, _ := strings.Cut(f, "="); name == "usec" {
					us, _ := strconv.ParseFloat(n, 64)
					scripts += us
				}
			}
		}
	}
	return process, scripts
}

// CountCommands counts the commands c sends from now on that match (every command when match is
// nil), pipelined ones included: for tests and benchmarks that assert how often the store is called.
func CountCommands(c redis.UniversalClient, match func(redis.Cmder) bool) *atomic.Int64 {
	h := &commandCounter{match: match}
	c.AddHook(h)
	return &h.n
}

type commandCounter struct {
	match func(redis.Cmder) bool
	n     atomic.Int64
}

func (h *commandCounter) count(cmd redis.Cmder) {
	if h.match == nil || h.match(cmd) {
		h.n.Add(1)
	}
}

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// CountTrips counts the round trips c makes from now on: a command alone or a pipeline (or
// transaction) of any length is one.
func CountTrips(c redis.UniversalClient) *atomic.Int64 {
	h := &tripCounter{}
	c.AddHook(h)
	return &h.n
}

type tripCounter struct{ n atomic.Int64 }

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// Topology starts a private Redis master with replicas and Sentinels for one test (failover tests),
// stopped when the test ends. A missing redis-server fails in CI and skips the test elsewhere, saying
// so.
func Topology(t testing.TB, o redisserver.TopologyOptions) *redisserver.Topology {
	t.Helper()
	top, err := redisserver.StartTopology(o)
	if errors.Is(err, redisserver.ErrNotInstalled) {
		if InCI() {
			t.Fatal("this test needs redis-server (apt-get install redis-server)")
		}
		t.Skip("redis-server is not installed; skipped outside CI")
	}
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(top.Stop)
	return top
}

// Replicated starts a private master with one replica for one test, the replica behind a proxy that
// delays the replication link by delay each way (a replica in another zone), and returns a store on the
// master, with a key prefix of its own and WAIT off (Store.SetWaitReplicas turns it on), and a client
// of the replica, to read what it holds.
func Replicated(t testing.TB, delay time.Duration) (*store.Store, *redis.Client) {
	t.Helper()
	top := Topology(t, redisserver.TopologyOptions{Replicas: []redisserver.ReplicaOptions{{Delay: delay}}})
	master := redis.NewClient(&redis.Options{Addr: top.Master().Addr(), PoolSize: 128, PoolTimeout: starvedWait, ReadTimeout: starvedWait})
	replica := redis.NewClient(&redis.Options{Addr: top.Replica(0).Addr()})
	t.Cleanup(func() { _ = master.Close(); _ = replica.Close() })
	return store.Wrap(master, store.Keys{Prefix: UniquePrefix()}), replica
}
