package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
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
	info, err := s.Client.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !InCI() && server.fallback != nil {
		t.Log("redis-server is not installed: this ran on the embedded store")
		return
	}
	if !strings.Contains(info, "redis_version:") || !strings.Contains(info, "tcp_port:") {
		t.Fatalf("INFO does not look like redis-server: %q", info)
	}
}
