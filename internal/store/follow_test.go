package store_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
)

// follower runs store.Follow on channel and collects what it delivers.
type follower struct {
	mu   sync.Mutex
	got  []string
	done chan struct{}
}

func follow(ctx context.Context, s *store.Store, channel string) *follower {
	f := &follower{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		store.Follow(ctx, s.Client, channel, func(payload string) {
			f.mu.Lock()
			f.got = append(f.got, payload)
			f.mu.Unlock()
		})
	}()
	return f
}

func (f *follower) payloads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// subscribed publishes probes on channel until the follower delivers one: a subscription is set up on
// its own goroutine, and what is published before it is not delivered.
func subscribed(t *testing.T, s *store.Store, f *follower, channel, probe string) {
	t.Helper()
	wait.Until(t, 10*time.Second, "a probe delivered on "+channel, func() bool {
		if err := s.Client.Publish(t.Context(), channel, probe).Err(); err != nil {
			t.Fatalf("publish: %v", err)
		}
		return slices.Contains(f.payloads(), probe)
	})
}

// Follow delivers the messages of its channel, in order, none of another channel's, and returns when
// its context ends.
func TestFollow_DeliversInOrderUntilTheContextEnds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		channel := s.Keys.Global("follow", "test")
		f := follow(ctx, s, channel)
		subscribed(t, s, f, channel, "probe")

		if err := s.Client.Publish(t.Context(), s.Keys.Global("follow", "other"), "elsewhere").Err(); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 20 {
			want = append(want, "m"+strconv.Itoa(i))
			if err := s.Client.Publish(t.Context(), channel, want[i]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		wait.Until(t, 10*time.Second, "20 messages delivered", func() bool { return slices.Contains(f.payloads(), "m19") })
		got := slices.DeleteFunc(f.payloads(), func(p string) bool { return p == "probe" })
		if !slices.Equal(got, want) {
			t.Fatalf("delivered %q, want %q", got, want)
		}

		cancel()
		select {
		case <-f.done:
		case <-time.After(10 * time.Second):
			t.Fatal("Follow did not return after its context ended")
		}
	})
}

// After its connection is cut, Follow is subscribed again (go-redis reconnects) and delivers what is
// published from then on.
func TestFollow_SubscribesAgainAfterTheConnectionIsCut(t *testing.T) {
	s := storetest.Redis(t)
	channel := s.Keys.Global("follow", "cut")
	f := follow(t.Context(), s, channel)
	subscribed(t, s, f, channel, "before")
	cut, err := s.Client.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Int()
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("CLIENT KILL: %v (the embedded store stands in for a missing redis-server)", err)
		}
		t.Fatalf("CLIENT KILL: %v", err)
	}
	if cut < 1 {
		t.Fatalf("CLIENT KILL cut %d connections: the subscription was not cut", cut)
	}
	subscribed(t, s, f, channel, "after")
}
