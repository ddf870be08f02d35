package redisserver_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// TestSentinelFailover runs a master with one replica in another zone (every byte between them delayed
// 150ms) under one Sentinel, checks that the replica lags by that much, kills the master and follows
// the failover: Sentinel promotes the replica, a go-redis failover client writes to it, and the old
// master, restarted, becomes its replica.
func TestSentinelFailover(t *testing.T) {
	const delay = 150 * time.Millisecond
	begin := time.Now()
	topo, err := redisserver.StartTopology(redisserver.TopologyOptions{
		Replicas: []redisserver.ReplicaOptions{{Delay: delay}},
	})
	if errors.Is(err, redisserver.ErrNotInstalled) {
		const msg = "redis-server is not installed: install it (apt-get install redis-server) to test Sentinel failover"
		if storetest.InCI() {
			t.Fatal(msg + "; CI is set, so this is a failure")
		}
		t.Skip(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Stop()
	t.Logf("topology up in %s", time.Since(begin).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	master := redis.NewClient(&redis.Options{Addr: topo.Master().Addr()})
	defer master.Close()
	replica := redis.NewClient(&redis.Options{Addr: topo.Replica(0).Addr()})
	defer replica.Close()

	// A write reaches the replica one delay after the master has it: never sooner, and well within 2s.
	for i := range 3 {
		key := "lag-" + strconv.Itoa(i)
		written := time.Now()
		if err := master.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		misses := 0
		for {
			err := replica.Get(ctx, key).Err()
			since := time.Since(written)
			if err == nil {
				if since < delay {
					t.Fatalf("%s was on the replica %s after the write, before the %s delay", key, since, delay)
				}
				break
			}
			if !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			misses++
			if since > 2*time.Second {
				t.Fatalf("%s not on the replica 2s after the write", key)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if misses == 0 {
			t.Fatalf("%s was on the replica at the first read after the write", key)
		}
	}

	// WAIT needs the replica's acknowledgement, which takes a round trip through the delay.
	if err := master.Set(ctx, "acked", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waited := time.Now()
	n, err := master.Wait(ctx, 1, 500*time.Millisecond).Result()
	took := time.Since(waited)
	if err != nil || n != 1 {
		t.Fatalf("WAIT 1 500 = %d, %v; want 1 replica", n, err)
	}
	if took < delay {
		t.Fatalf("WAIT 1 500 returned in %s, less than the %s delay", took, delay)
	}
	t.Logf("WAIT 1 500 took %s", took.Round(time.Millisecond))

	from, err := topo.KillMaster()
	if err != nil {
		t.Fatal(err)
	}
	if from != topo.Master().Addr() {
		t.Fatalf("KillMaster killed %s, want the master %s", from, topo.Master().Addr())
	}
	killed := time.Now()
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	promoted, err := topo.WaitFailover(fctx, from)
	if err != nil {
		t.Fatal(err)
	}
	if promoted != topo.Replica(0).Addr() {
		t.Fatalf("Sentinel promoted %s, want the replica %s", promoted, topo.Replica(0).Addr())
	}
	t.Logf("failover took %s from the kill", time.Since(killed).Round(time.Millisecond))

	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: topo.MasterName(), SentinelAddrs: topo.SentinelAddrs(),
	})
	defer client.Close()
	if err := client.Set(ctx, "after-failover", "v", 0).Err(); err != nil {
		t.Fatalf("failover client: %v", err)
	}
	if got, err := replica.Get(ctx, "after-failover").Result(); err != nil || got != "v" {
		t.Fatalf("the promoted replica has after-failover = %q, %v", got, err)
	}
	for i := range 3 {
		if err := replica.Get(ctx, "lag-"+strconv.Itoa(i)).Err(); err != nil {
			t.Errorf("lag-%d, written before the failover and replicated: %v", i, err)
		}
	}

	restarted := time.Now()
	if err := topo.RestartOldMaster(); err != nil {
		t.Fatal(err)
	}
	t.Logf("old master a replica %s after its restart", time.Since(restarted).Round(time.Millisecond))
	if got, err := master.Get(ctx, "after-failover").Result(); err != nil || got != "v" {
		t.Fatalf("the old master, now a replica, has after-failover = %q, %v", got, err)
	}
	if err := master.Set(ctx, "on-old-master", "v", 0).Err(); err == nil {
		t.Fatal("the old master accepted a write as a replica")
	}
	t.Logf("total %s", time.Since(begin).Round(time.Millisecond))
}
