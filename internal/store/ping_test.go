package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// On a Cluster the health ping asks every master: with one of three down it fails every time, not
// one time in three, and it names the master that did not answer.
func TestPing_ClusterNeedsEveryMaster(t *testing.T) {
	c, err := redisserver.StartCluster(3)
	if errors.Is(err, redisserver.ErrNotInstalled) || errors.Is(err, redisserver.ErrCLINotInstalled) {
		if storetest.InCI() {
			t.Fatal("this test needs redis-server and redis-cli (apt-get install redis-server redis-tools); .ci/run installs them")
		}
		t.Skip("redis-server or redis-cli is not installed; skipped outside CI")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	s := store.Wrap(client, store.Keys{Prefix: "ping"})
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping of a healthy cluster: %v", err)
	}
	down := c.Node(1)
	down.Kill()
	for i := range 10 {
		pingCtx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.Ping(pingCtx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), down.Addr()) {
			t.Fatalf("ping %d with master %s down: %v", i, down.Addr(), err)
		}
	}
}
