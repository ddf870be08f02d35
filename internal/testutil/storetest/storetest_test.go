package storetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

func TestMain(m *testing.M) { Main(m) }

func TestMissingRedisServerFailsInCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "true")
	var s redisServer
	_, err := s.start()
	if err == nil || !strings.Contains(err.Error(), "redis-server is not installed but CI is set") {
		t.Fatalf("err = %v", err)
	}
}

func TestMissingRedisServerFallsBackOutsideCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	var s redisServer
	addr, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	if s.fallback == nil || addr != s.fallback.Addr() {
		t.Fatalf("no fallback to the embedded store: addr %q", addr)
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestPrivateRedisServerIsReal(t *testing.T) {
	s := Redis(t)
	if server.fallback != nil { // only outside CI: in CI Redis fails the test without redis-server
		t.Skip("redis-server is not installed: the private server is the embedded store, so there is no " +
			"redis-server to check (skipped outside CI)")
	}
	info, err := s.Client.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "redis_version:") || !strings.Contains(info, "tcp_port:") {
		t.Fatalf("INFO does not look like redis-server: %q", info)
	}
}

func TestMissingRedisCLIFailsInCI(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		if InCI() {
			t.Fatal("redis-server is not installed but CI is set")
		}
		t.Skip("redis-server is not installed: a PATH with redis-server and without redis-cli cannot be " +
			"built here (skipped outside CI)")
	}
	bin := t.TempDir()
	if err := os.Symlink(server, filepath.Join(bin, "redis-server")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("CI", "true")
	var c redisCluster
	_, err = c.start()
	if err == nil || !strings.Contains(err.Error(), "redis-cli is not installed but CI is set") {
		t.Fatalf("err = %v", err)
	}
}

func TestMissingRedisServerFailsClusterInCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "true")
	var c redisCluster
	_, err := c.start()
	if err == nil || !strings.Contains(err.Error(), "redis-server is not installed but CI is set") {
		t.Fatalf("err = %v", err)
	}
}

// Outside CI a missing cluster is no error, but the tests that ask for one are skipped, saying what
// is missing: they do not run their "cluster" case on one Redis and pass as if they had.
func TestMissingClusterSkipsOutsideCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	var c redisCluster
	addrs, err := c.start()
	if err != nil || addrs != nil || c.cluster != nil || !errors.Is(c.missing, redisserver.ErrNotInstalled) {
		t.Fatalf("addrs %v, err %v, missing %v: want no cluster, no error, and redis-server named missing",
			addrs, err, c.missing)
	}
	c.once.Do(func() {}) // started (and found missing) above
	var skipped bool
	t.Run("is skipped, as it should be", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		c.addrsFor(t)
		t.Error("addrsFor returned without a cluster")
	})
	if !skipped {
		t.Fatal("a test that asks for a missing cluster outside CI was not skipped")
	}
}

// The cluster is a real one: three masters sharing the slots, keys of different hash tags on
// different nodes, and a script over keys of two tags refused with CROSSSLOT, as a production cluster
// refuses it. Without this, tests "on the cluster" could pass on something that forgives what a
// cluster does not.
func TestClusterIsReal(t *testing.T) {
	addrs := ClusterAddrs(t) // skips outside CI without redis-server or redis-cli, saying so
	ctx := context.Background()
	if len(addrs) != 3 {
		t.Fatalf("%d nodes, want 3", len(addrs))
	}
	for _, addr := range addrs {
		node := redis.NewClient(&redis.Options{Addr: addr})
		nodes, err := node.ClusterNodes(ctx).Result()
		node.Close()
		if err != nil {
			t.Fatal(err)
		}
		masters := 0
		for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
			fields := strings.Fields(line)
			// <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slot> ...
			if len(fields) >= 9 && strings.Contains(fields[2], "master") && fields[7] == "connected" {
				masters++
			}
		}
		if masters != 3 {
			t.Fatalf("node %s sees %d connected masters with slots:\n%s", addr, masters, nodes)
		}
	}

	s := Cluster(t)
	client, ok := s.Client.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("the cluster store's client is a %T", s.Client)
	}
	owners := map[string]bool{}
	for i := range 20 {
		key := s.Keys.Entity("p", strconv.Itoa(i), "stock")
		if err := client.Set(ctx, key, i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		master := MasterOf(t, s, key)
		owners[master] = true
		// The key lives on its master only: asked directly, every other node redirects.
		for _, addr := range addrs {
			node := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			err := node.Get(ctx, key).Err()
			node.Close()
			if moved := err != nil && strings.HasPrefix(err.Error(), "MOVED"); moved == (addr == master) {
				t.Fatalf("key %s asked at %s (master %s): %v", key, addr, master, err)
			}
		}
	}
	if len(owners) != 3 {
		t.Fatalf("keys of 20 products landed on %d nodes, want all 3", len(owners))
	}

	var a, b string
	for i := 0; b == ""; i++ {
		key := s.Keys.Entity("p", strconv.Itoa(i), "x")
		if a == "" {
			a = key
		} else if redisSlot(t, client, key) != redisSlot(t, client, a) {
			b = key
		}
	}
	err := client.Eval(ctx, "return redis.call('SET', KEYS[1], 1) and redis.call('SET', KEYS[2], 1)", []string{a, b}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a script over keys of two tags: %v, want CROSSSLOT", err)
	}
	same := []string{s.Keys.Entity("p", "0", "a"), s.Keys.Entity("p", "0", "b")}
	if err := client.Eval(ctx, "redis.call('SET', KEYS[1], 1) redis.call('SET', KEYS[2], 1) return 1", same).Err(); err != nil {
		t.Fatalf("a script over keys of one tag: %v", err)
	}
	client.Del(ctx, same...)
	if MasterOf(t, Redis(t), "k") != "" || MasterOf(t, Embedded(t), "k") != "" {
		t.Fatal("MasterOf names a master outside a cluster")
	}
}

func redisSlot(t *testing.T, client *redis.ClusterClient, key string) int64 {
	t.Helper()
	slot, err := client.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return slot
}
