package inflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestKeys_ExactStringsWithHashTags(t *testing.T) {
	k := store.Keys{Prefix: "edgeq"}
	// lib.lua reads KEYS in this order.
	want := []string{"edgeq:{f:checkout}:holders", "edgeq:{f:checkout}:waiters", "edgeq:{f:checkout}:alive",
		"edgeq:{f:checkout}:seq", "edgeq:{f:checkout}:clients"}
	if got := routeKeys(k, "checkout"); !slices.Equal(got, want) {
		t.Errorf("routeKeys: got %q, want %q", got, want)
	}
	if got := grantChannel(k); got != "edgeq:inflight:granted" {
		t.Errorf("grantChannel: %q", got)
	}
}

// replicas returns n limiters on one store, as n edgeq replicas would have, each relaying grants.
func replicas(t *testing.T, s *store.Store, n int, opts Options) []*Limiter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })
	out := make([]*Limiter, n)
	for i := range out {
		opts.Store = s
		out[i] = New(opts)
		running.Go(func() { out[i].Run(ctx) })
	}
	return out
}

// subscribers counts the subscriptions to a channel, over every node of a cluster.
func subscribers(t *testing.T, s *store.Store, channel string) int64 {
	t.Helper()
	ctx := context.Background()
	cc, ok := s.Client.(*redis.ClusterClient)
	if !ok {
		n, err := s.Client.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	var total atomic.Int64
	err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.PubSubNumSub(ctx, channel).Result()
		total.Add(n[channel])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total.Load()
}

// line returns how many tickets wait for the route's slots, and how many leases hold one.
func line(t *testing.T, s *store.Store, route string) (waiting, holding int64) {
	t.Helper()
	keys := routeKeys(s.Keys, route)
	ctx := context.Background()
	var err error
	if holding, err = s.Client.ZCard(ctx, keys[0]).Result(); err != nil {
		t.Fatal(err)
	}
	if waiting, err = s.Client.ZCard(ctx, keys[1]).Result(); err != nil {
		t.Fatal(err)
	}
	return waiting, holding
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, 20*time.Second, what, cond)
}

// The limit holds across replicas under real concurrency: 300 requests on three replicas, limit 3,
// each holding its slot for a moment; never more than 3 at once, and everyone gets a slot in the end.
//
// On Redis the 300 arrive at once. The embedded store runs one Lua call at a time, 5 to 10 ms each on a
// busy 2-CPU machine, and every waiter polls it once a second: 300 waiters ask more calls a second than
// it can answer, its queue outgrows the 3 s store timeout and requests fail with "context deadline
// exceeded" while the limit holds (59 of 300 served, once, beside other packages). There 30 callers
// send 10 requests each, one after the other: the same 300 requests, ten times the limit contending.
func TestAcquire_NeverMoreHoldersThanTheLimitAcrossReplicas(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		limiters := replicas(t, s, 3, Options{})
		lim := Limit{Route: "checkout", Max: 3, Hold: time.Minute}
		const requests = 300
		callers := requests
		if s.Embedded() {
			callers = 30
		}
		var inside, most, served atomic.Int64
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for i := c; i < requests; i += callers {
					lease, _, err := limiters[i%3].Acquire(context.Background(), lim, "")
					if err != nil {
						t.Error(err)
						return
					}
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					served.Add(1)
					lease.Release()
				}
			})
		}
		wg.Wait()
		if most.Load() > 3 || served.Load() != 300 {
			t.Fatalf("at most %d inside at once (limit 3), %d of 300 served", most.Load(), served.Load())
		}
		if waiting, holding := line(t, s, "checkout"); waiting != 0 || holding != 0 {
			t.Fatalf("left behind: %d waiting, %d holding", waiting, holding)
		}
	})
}

// Waiters are served in arrival order across replicas, and they are woken by the grant itself: the
// polls are off (an hour apart), so a waiter that was not told would never go.
func TestAcquire_WaitersAreServedInArrivalOrder(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		limiters := replicas(t, s, 2, Options{Poll: time.Hour})
		lim := Limit{Route: "checkout", Max: 1, Hold: time.Minute}
		first, _, err := limiters[0].Acquire(context.Background(), lim, "")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		const n = 8
		for i := range n {
			wg.Go(func() {
				lease, waited, err := limiters[i%2].Acquire(context.Background(), lim, "")
				if err != nil || !waited {
					t.Errorf("waiter %d: waited %v, %v", i, waited, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				lease.Release()
			})
			// The next one arrives once this one is in line.
			eventually(t, fmt.Sprintf("waiter %d in line", i), func() bool { w, _ := line(t, s, "checkout"); return w == int64(i+1) })
		}
		// Both replicas subscribe when their first waiter lines up, and the subscription takes a moment
		// (on a cluster, a connection to a node of its own): the grants must not come before it.
		eventually(t, "both replicas subscribed", func() bool { return subscribers(t, s, grantChannel(s.Keys)) == 2 })
		first.Release()
		wg.Wait()
		if !slices.Equal(order, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
			t.Fatalf("served in order %v", order)
		}
	})
}

// When hold runs out the request gets ErrBusy and leaves the line; with hold 0 it does not wait at
// all.
func TestAcquire_HoldRunsOutWithErrBusy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		l := replicas(t, s, 1, Options{Poll: 20 * time.Millisecond})[0]
		held, _, err := l.Acquire(context.Background(), Limit{Route: "checkout", Max: 1}, "")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		if _, waited, err := l.Acquire(context.Background(), Limit{Route: "checkout", Max: 1}, ""); !errors.Is(err, ErrBusy) || waited {
			t.Fatalf("hold 0: waited %v, %v; want ErrBusy at once", waited, err)
		}
		if _, waited, err := l.Acquire(context.Background(), Limit{Route: "checkout", Max: 1, Hold: 100 * time.Millisecond}, ""); !errors.Is(err, ErrBusy) || !waited {
			t.Fatalf("hold 100ms: waited %v, %v; want ErrBusy after waiting", waited, err)
		}
		if waiting, holding := line(t, s, "checkout"); waiting != 0 || holding != 1 {
			t.Fatalf("%d waiting, %d holding; want the line empty and the first lease kept", waiting, holding)
		}
	})
}

// A visitor who leaves while waiting leaves the line: the slot freed next goes to nobody.
func TestAcquire_AVisitorWhoLeavesLeavesTheLine(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		l := replicas(t, s, 1, Options{})[0]
		lim := Limit{Route: "checkout", Max: 1, Hold: time.Minute}
		held, _, err := l.Acquire(context.Background(), lim, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() {
			_, _, err := l.Acquire(ctx, lim, "")
			gone <- err
		}()
		eventually(t, "the waiter in line", func() bool { w, _ := line(t, s, "checkout"); return w == 1 })
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		held.Release()
		if waiting, holding := line(t, s, "checkout"); waiting != 0 || holding != 0 {
			t.Fatalf("%d waiting, %d holding; want nobody", waiting, holding)
		}
	})
}

// A replica that dies holding a slot (nothing renews it, nothing gives it back) costs at most one
// lease time: then the first waiter gets the slot.
func TestLease_ADeadReplicasSlotIsFreeAfterTheLeaseTime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		opts := Options{Lease: 300 * time.Millisecond, Poll: 20 * time.Millisecond}
		limiters := replicas(t, s, 2, opts)
		lim := Limit{Route: "checkout", Max: 1, Hold: time.Minute}
		dead, _, err := limiters[0].Acquire(context.Background(), lim, "")
		if err != nil {
			t.Fatal(err)
		}
		dead.once.Do(func() { close(dead.stop) }) // the replica dies: no renewal, no release
		diedAt := time.Now()
		lease, waited, err := limiters[1].Acquire(context.Background(), lim, "")
		if err != nil || !waited {
			t.Fatalf("waited %v, %v", waited, err)
		}
		defer lease.Release()
		// One lease time after the last renewal, give or take a poll: generous slack for a shared CPU.
		if took := time.Since(diedAt); took > opts.Lease+2*time.Second {
			t.Fatalf("the slot was free after %v, lease %v", took, opts.Lease)
		}
	})
}

// A live replica renews its leases: a request that stays at the origin for several lease times keeps
// its slot.
func TestLease_RenewalKeepsALongRequestsSlot(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// A lease of a second, renewed every 200 ms, held for two and a half: it lives only by its
		// renewals, with 800 ms of slack for a starved goroutine when the suite runs under -race
		// beside the browser tests (a 200 ms lease failed there once).
		l := replicas(t, s, 1, Options{Lease: time.Second, Poll: 20 * time.Millisecond})[0]
		lim := Limit{Route: "checkout", Max: 1}
		held, _, err := l.Acquire(context.Background(), lim, "")
		if err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if _, _, err := l.Acquire(context.Background(), lim, ""); !errors.Is(err, ErrBusy) {
				t.Fatalf("a second request got %v while the first still held its slot", err)
			}
		}
		held.Release()
		again, _, err := l.Acquire(context.Background(), lim, "")
		if err != nil {
			t.Fatalf("after the release: %v", err)
		}
		again.Release()
	})
}

// A waiter whose replica died (it stopped polling) is dropped from the line: the ones behind it are
// not stuck behind a ghost.
func TestAcquire_AnAbsentWaiterIsSkipped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		l := replicas(t, s, 1, Options{Poll: 20 * time.Millisecond})[0]
		lim := Limit{Route: "checkout", Max: 1, Hold: time.Minute}
		held, _, err := l.Acquire(context.Background(), lim, "")
		if err != nil {
			t.Fatal(err)
		}
		ghost := ticket{l: l, keys: routeKeys(s.Keys, "checkout"), id: newID(), limit: 1}
		if code, err := ghost.acquire(true); err != nil || code != codeWaiting {
			t.Fatalf("ghost: %d, %v", code, err)
		}
		got := make(chan error, 1)
		go func() {
			lease, _, err := l.Acquire(context.Background(), lim, "")
			if err == nil {
				lease.Release()
			}
			got <- err
		}()
		eventually(t, "two in line", func() bool { w, _ := line(t, s, "checkout"); return w == 2 })
		held.Release()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if waiting, holding := line(t, s, "checkout"); waiting != 0 || holding != 0 {
			t.Fatalf("%d waiting, %d holding", waiting, holding)
		}
	})
}

// A store that cannot be reached is an error of its own, not ErrBusy: the route's on_store_error
// decides.
func TestAcquire_StoreDownIsAnError(t *testing.T) {
	s := storetest.Embedded(t)
	l := New(Options{Store: s})
	s.Close()
	_, _, err := l.Acquire(context.Background(), Limit{Route: "checkout", Max: 1, Hold: time.Second}, "")
	if err == nil || errors.Is(err, ErrBusy) {
		t.Fatalf("got %v, want a store error", err)
	}
}

// Every key the scripts write expires a little after the latest lease or presence in it (nothing is
// left behind by a route that is removed, or by replicas that all died).
func TestScripts_EveryKeyHasATTL(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		l := New(Options{Store: s, Lease: 2 * time.Second, Poll: time.Second})
		held, _, err := l.Acquire(context.Background(), Limit{Route: "checkout", Max: 1}, "")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		waiter := ticket{l: l, keys: routeKeys(s.Keys, "checkout"), id: ticketID("203.0.113.7"), limit: 1}
		if code, err := waiter.acquire(true); err != nil || code != codeWaiting {
			t.Fatalf("waiter: %d, %v", code, err)
		}
		for _, key := range routeKeys(s.Keys, "checkout") {
			ttl, err := s.Client.PTTL(context.Background(), key).Result()
			// At most the lease (2s) or the presence (3 polls) plus a second.
			if err != nil || ttl <= 0 || ttl > 4*time.Second {
				t.Errorf("%s: TTL %v, %v", key, ttl, err)
			}
		}
	})
}

// hold_per_client: one client has at most PerClient requests waiting in line; its next one is refused
// at once (ErrClientBusy, an ErrBusy) without taking a place, while another client still joins. A
// request that holds a slot does not count, and a place given up (served, left) is the client's again.
func TestAcquire_OneClientHoldsAtMostPerClientPlacesInLine(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		l := replicas(t, s, 1, Options{Poll: 20 * time.Millisecond})[0]
		lim := Limit{Route: "checkout", Max: 1, Hold: time.Minute, PerClient: 2}
		const flooder, other = "t:request-of-the-flooder", "198.51.100.9"
		held, _, err := l.Acquire(context.Background(), lim, flooder)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			lease *Lease
			err   error
		}
		results := make(chan result, 10)
		wait := func(client string) {
			go func() {
				lease, _, err := l.Acquire(context.Background(), lim, client)
				results <- result{lease, err}
			}()
		}
		for i := range 2 {
			wait(flooder)
			eventually(t, "the flooder in line", func() bool { w, _ := line(t, s, "checkout"); return w == int64(i+1) })
		}
		began := time.Now()
		if _, waited, err := l.Acquire(context.Background(), lim, flooder); !errors.Is(err, ErrClientBusy) || !errors.Is(err, ErrBusy) || waited {
			t.Fatalf("the flooder's third waiting request: waited %v, %v; want ErrClientBusy at once", waited, err)
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("refused after %v, want at once", took)
		}
		wait(other)
		eventually(t, "the other client in line", func() bool { w, _ := line(t, s, "checkout"); return w == 3 })

		// The first of the flooder's waiters gets the slot: its place in line is free for it again.
		held.Release()
		first := <-results
		if first.err != nil {
			t.Fatal(first.err)
		}
		wait(flooder)
		eventually(t, "the flooder's new request in line", func() bool { w, _ := line(t, s, "checkout"); return w == 3 })
		first.lease.Release()
		for range 3 {
			r := <-results
			if r.err != nil {
				t.Fatal(r.err)
			}
			r.lease.Release()
		}
		if waiting, holding := line(t, s, "checkout"); waiting != 0 || holding != 0 {
			t.Fatalf("%d waiting, %d holding", waiting, holding)
		}
		if n, err := s.Client.Exists(context.Background(), routeKeys(s.Keys, "checkout")[4]).Result(); err != nil || n != 0 {
			t.Fatalf("the client counts outlive the line: %d, %v", n, err)
		}
	})
}

// A client's count follows its tickets however they leave the line: hold running out, the visitor
// leaving, the ticket dropped as absent (its replica died). With PerClient 0 nothing is bounded, and a
// request of no known client ("") is never counted.
func TestAcquire_ClientCountsFollowTicketsOutOfTheLine(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		l := replicas(t, s, 1, Options{Poll: 20 * time.Millisecond})[0]
		lim := Limit{Route: "checkout", Max: 1, Hold: 100 * time.Millisecond, PerClient: 1}
		held, _, err := l.Acquire(context.Background(), lim, "")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		const client = "203.0.113.7"
		count := func() int64 {
			n, _ := s.Client.HGet(context.Background(), routeKeys(s.Keys, "checkout")[4], ticketID(client)[:16]).Int64()
			return n
		}
		// Hold runs out, three times over: each time the place is the client's again.
		for range 3 {
			if _, waited, err := l.Acquire(context.Background(), lim, client); !errors.Is(err, ErrBusy) || errors.Is(err, ErrClientBusy) || !waited {
				t.Fatalf("waited %v, %v; want ErrBusy after waiting", waited, err)
			}
			if n := count(); n != 0 {
				t.Fatalf("after hold ran out the client still counts %d", n)
			}
		}
		// The visitor leaves.
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		long := Limit{Route: "checkout", Max: 1, Hold: time.Minute, PerClient: 1}
		go func() { _, _, err := l.Acquire(ctx, long, client); gone <- err }()
		eventually(t, "the client counted in line", func() bool { return count() == 1 })
		cancel()
		<-gone
		if n := count(); n != 0 {
			t.Fatalf("after the visitor left the client still counts %d", n)
		}
		// A ghost: a ticket whose replica stopped polling is dropped from the line by the next call.
		ghost := ticket{l: l, keys: routeKeys(s.Keys, "checkout"), id: ticketID(client), limit: 1, perClient: 1}
		if code, err := ghost.acquire(true); err != nil || code != codeWaiting {
			t.Fatalf("ghost: %d, %v", code, err)
		}
		eventually(t, "the ghost dropped", func() bool {
			_, _, err := l.Acquire(context.Background(), Limit{Route: "checkout", Max: 1}, "")
			return errors.Is(err, ErrBusy) && count() == 0
		})
		// No bound, and no client.
		for _, tc := range []struct {
			client    string
			perClient int
		}{{client, 0}, {"", 1}} {
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					_, _, err := l.Acquire(context.Background(), Limit{Route: "checkout", Max: 1, Hold: 300 * time.Millisecond, PerClient: tc.perClient}, tc.client)
					if errors.Is(err, ErrClientBusy) {
						t.Errorf("client %q, per client %d: %v", tc.client, tc.perClient, err)
					}
				})
			}
			wg.Wait()
		}
	})
}
