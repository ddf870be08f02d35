package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestKeys_ExactStringsWithHashTags(t *testing.T) {
	k := store.Keys{Prefix: "edgeq"}
	cases := map[string]string{
		k.Queue("drop", "counter"):          "edgeq:{q:drop}:counter",
		k.Entity("p", "1", "stock"):         "edgeq:{p:1}:stock",
		k.Entity("a", "42", "highest"):      "edgeq:{a:42}:highest",
		k.Global("admissions", "by_time"):   "edgeq:{admissions}:by_time",
		k.IDNodes():                         "edgeq:{edgeq}:id_nodes",
		store.Keys{"shop1"}.Queue("q", "x"): "shop1:{q:q}:x",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// One script touching two keys of one queue, reading the time from Redis, must run unchanged on both
// stores (and, because both keys share the {q:...} tag, on Cluster).
var clockScript = redis.NewScript(`
-- KEYS[1] counter, KEYS[2] last-seen time; returns {counter, seconds}
local now = redis.call('TIME')
local n = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], now[1], 'EX', 60)
return {n, tonumber(now[1])}
`)

func TestStore_ScriptsWithRedisTime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		keys := []string{s.Keys.Queue("drop", "counter"), s.Keys.Queue("drop", "seen")}
		for want := int64(1); want <= 3; want++ {
			res, err := clockScript.Run(ctx, s.Client, keys).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if res[0] != want {
				t.Fatalf("counter = %d, want %d", res[0], want)
			}
			if skew := time.Since(time.Unix(res[1], 0)); skew < -2*time.Second || skew > 2*time.Second {
				t.Fatalf("TIME from the store is %s away from the clock", skew)
			}
		}
		ttl, err := s.Client.TTL(ctx, keys[1]).Result()
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Fatalf("TTL = %s, %v", ttl, err)
		}
	})
}

// Keys must expire by the wall clock on both stores; miniredis only does so when told to.
func TestStore_TTLsExpireWithTheClock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		key := s.Keys.Queue("q", "short")
		if err := s.Client.Set(ctx, key, "x", 50*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := s.Client.Exists(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("a key with a 50ms TTL still exists after 5s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestOpen_EmbeddedWhenNoRedisConfiguredWarns(t *testing.T) {
	var logs bytes.Buffer
	s, err := store.Open(config.Default().Redis, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Embedded() || s.Addr() == "" {
		t.Fatal("want the embedded store")
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "embedded in-memory store") {
		t.Fatalf("no start-up warning: %q", logs.String())
	}
}

func TestOpen_SingleServer(t *testing.T) {
	cfg := config.Default().Redis
	cfg.Addr = storetest.RedisAddr(t)
	s, err := store.Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Embedded() {
		t.Fatal("a configured addr must not give the embedded store")
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_ClientKindFollowsConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  config.Redis
		want string
	}{
		{"single", config.Redis{Addr: "127.0.0.1:1", KeyPrefix: "e"}, "*redis.Client"},
		{"cluster", config.Redis{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, KeyPrefix: "e"}, "*redis.ClusterClient"},
		{"cluster with one seed", config.Redis{Addrs: []string{"127.0.0.1:1"}, KeyPrefix: "e"}, "*redis.ClusterClient"},
		{"sentinel", config.Redis{Addrs: []string{"127.0.0.1:1"}, MasterName: "m", KeyPrefix: "e"}, "*redis.Client"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := store.Open(c.cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := typeName(s.Client); got != c.want {
				t.Fatalf("client is %s, want %s", got, c.want)
			}
		})
	}
}

func TestOpen_TLSAndAuth(t *testing.T) {
	s, err := store.Open(config.Redis{Addr: "127.0.0.1:1", Username: "u", Password: "p", TLS: true, DB: 3, KeyPrefix: "e"},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts := s.Client.(*redis.Client).Options()
	if opts.TLSConfig == nil || opts.Username != "u" || opts.Password != "p" || opts.DB != 3 {
		t.Fatalf("options = %+v", opts)
	}
}

func TestStore_PingFailsWhenDown(t *testing.T) {
	s, err := store.Open(config.Redis{Addr: "127.0.0.1:1", KeyPrefix: "e"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(context.Background()); err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *redis.Client:
		return "*redis.Client"
	case *redis.ClusterClient:
		return "*redis.ClusterClient"
	}
	return "other"
}

func TestHealth_Hysteresis(t *testing.T) {
	cfg := config.StoreHealth{Interval: time.Second, FailuresToDegrade: 3, SuccessesToRecover: 5, Cooldown: 30 * time.Second}
	var observed []bool
	h := store.NewHealth(nil, cfg, slog.New(slog.DiscardHandler), func(up, degraded bool) { observed = append(observed, degraded) })
	now := time.Unix(1_000_000, 0)
	store.SetClock(h, func() time.Time { return now })
	down := errors.New("connection refused")
	step := func(err error, wantDegraded bool) {
		t.Helper()
		now = now.Add(cfg.Interval)
		h.Record(err)
		if h.Degraded() != wantDegraded {
			t.Fatalf("at %s after %v: degraded = %v, want %v", now.Format(time.TimeOnly), err, h.Degraded(), wantDegraded)
		}
		if h.Up() != (err == nil) {
			t.Fatalf("Up() = %v after %v", h.Up(), err)
		}
	}
	step(down, false)
	step(down, false)
	step(nil, false) // a success resets the failure count
	step(down, false)
	step(down, false)
	step(down, true) // third consecutive failure
	switchedAt := now
	for range 4 {
		step(nil, true)
	}
	step(nil, true) // fifth success, but only 6 s since the switch: cooldown holds
	for now.Add(cfg.Interval).Sub(switchedAt) < cfg.Cooldown {
		step(nil, true)
	}
	step(nil, false) // cooldown passed and enough successes
	if len(observed) == 0 || observed[len(observed)-1] {
		t.Fatalf("observer not told: %v", observed)
	}
}

func TestHealth_RunPingsAndStops(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// The ping timeout is the interval: long enough that a loaded machine does not fail a live store.
		cfg := config.StoreHealth{Interval: 250 * time.Millisecond, FailuresToDegrade: 1, SuccessesToRecover: 1}
		pings := make(chan bool, 100)
		h := store.NewHealth(s.Ping, cfg, slog.New(slog.DiscardHandler), func(up, _ bool) {
			select {
			case pings <- up:
			default:
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		for range 3 {
			if up := <-pings; !up {
				t.Fatal("ping of a live store reported down")
			}
		}
		cancel()
		<-done
	})
}

// Persistence follows CONFIG GET on one server, and on a Cluster asks every master: one master
// keeping nothing on disk is enough to warn, whichever node a keyless command would have reached.
func TestStore_Persistence(t *testing.T) {
	ctx := context.Background()
	setAOF := func(t *testing.T, addr, value string) {
		t.Helper()
		node := redis.NewClient(&redis.Options{Addr: addr})
		defer node.Close()
		if err := node.ConfigSet(ctx, "appendonly", value).Err(); err != nil {
			t.Fatal(err)
		}
	}
	want := func(t *testing.T, s *store.Store, off bool) {
		t.Helper()
		for range 10 { // on a cluster a keyless command reaches one node or another
			got, err := s.Persistence(ctx)
			if err != nil || (got == store.PersistNothing) != off {
				t.Fatalf("Persistence = %v, %v; want nothing kept: %v", got, err, off)
			}
		}
	}
	t.Run("redis", func(t *testing.T) {
		if _, err := exec.LookPath("redis-server"); err != nil && !storetest.InCI() {
			t.Skip("redis-server is not installed: the embedded store has no CONFIG to ask (skipped outside CI)")
		}
		s := storetest.Redis(t)
		addr := storetest.RedisAddr(t)
		want(t, s, true) // the private server keeps nothing
		setAOF(t, addr, "yes")
		t.Cleanup(func() { setAOF(t, addr, "no") })
		want(t, s, false)
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := storetest.ClusterAddrs(t) // skips outside CI without redis-server or redis-cli, saying so
		s := storetest.Cluster(t)
		want(t, s, true)
		for _, addr := range addrs {
			setAOF(t, addr, "yes")
			t.Cleanup(func() { setAOF(t, addr, "no") })
		}
		want(t, s, false)
		for _, addr := range addrs {
			setAOF(t, addr, "no")
			want(t, s, true)
			setAOF(t, addr, "yes")
		}
	})
}
