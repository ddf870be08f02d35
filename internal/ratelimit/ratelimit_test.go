package ratelimit

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestRedis_BurstThenRefusedWithRetryAfter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		l := NewRedis(s.Client)
		ctx := context.Background()
		key := s.Keys.Global("rl:198.51.100.7", "join")
		limit := PerMinute(3)
		for i := range 3 {
			ok, _, err := l.Allow(ctx, key, limit)
			if err != nil || !ok {
				t.Fatalf("request %d: ok=%v err=%v", i, ok, err)
			}
		}
		ok, retry, err := l.Allow(ctx, key, limit)
		if err != nil || ok {
			t.Fatalf("fourth request allowed: %v", err)
		}
		if retry <= 0 || retry > 20*time.Second {
			t.Fatalf("retry after %s, want about 20s (one interval)", retry)
		}
		// Another client is not affected, and no limit means no limit.
		if ok, _, _ := l.Allow(ctx, s.Keys.Global("rl:198.51.100.8", "join"), limit); !ok {
			t.Fatal("another client was refused")
		}
		if ok, _, _ := l.Allow(ctx, key, Limit{}); !ok {
			t.Fatal("a zero limit refused")
		}
		ttl, _ := s.Client.PTTL(ctx, key).Result()
		if ttl <= 0 || ttl > time.Minute {
			t.Fatalf("the limiter key has TTL %s", ttl)
		}
	})
}

func TestLocal_RefillsWithTime(t *testing.T) {
	l := NewLocal(100)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	limit := PerMinute(60) // one a second, bursts of 60
	for i := range 60 {
		if ok, _ := l.Allow("a", limit); !ok {
			t.Fatalf("request %d refused inside the burst", i)
		}
	}
	ok, retry := l.Allow("a", limit)
	if ok || retry != time.Second {
		t.Fatalf("61st: ok=%v retry=%s", ok, retry)
	}
	now = now.Add(time.Second)
	if ok, _ := l.Allow("a", limit); !ok {
		t.Fatal("refused after waiting one interval")
	}
	if ok, _ := l.Allow("b", limit); !ok {
		t.Fatal("another client refused")
	}
}

func TestClientKey(t *testing.T) {
	cases := map[string]string{
		"198.51.100.7":            "198.51.100.7",
		"::ffff:198.51.100.7":     "198.51.100.7",
		"2001:db8:1:2:3:4:5:6":    "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::9999": "2001:db8:1:2::/64",
	}
	for in, want := range cases {
		if got := ClientKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
}
