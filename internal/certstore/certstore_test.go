package certstore

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// The file system certmagic expects: files, directories made of their prefixes, listing with and
// without recursion, stat, and deletion of a file or of a whole directory.
func TestStorage_FilesAndDirectories(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := New(s.Client, s.Keys)
		ctx := context.Background()
		files := map[string]string{
			"acme/ca/users/ops@example.com/ops.json":        "account",
			"certificates/ca/shop.example/shop.example.crt": "cert",
			"certificates/ca/shop.example/shop.example.key": "key",
			"certificates/ca/shopping/shopping.crt":         "other cert",
		}
		for k, v := range files {
			if err := st.Store(ctx, k, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		for k, v := range files {
			got, err := st.Load(ctx, k)
			if err != nil || string(got) != v {
				t.Fatalf("load %s: %q %v", k, got, err)
			}
		}
		if _, err := st.Load(ctx, "certificates/ca/nothing.crt"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a missing key: %v, want fs.ErrNotExist", err)
		}
		for k, want := range map[string]bool{
			"certificates": true, "certificates/ca/shop.example": true, "acme/ca/users/ops@example.com/ops.json": true,
			"certificates/ca/shop": false, "certificates/c": false, "nothing": false,
		} {
			if got := st.Exists(ctx, k); got != want {
				t.Errorf("exists %s: %v, want %v", k, got, want)
			}
		}
		list, err := st.List(ctx, "certificates/ca", false)
		if want := []string{"certificates/ca/shop.example", "certificates/ca/shopping"}; err != nil || !slices.Equal(list, want) {
			t.Fatalf("list: %q %v, want %q", list, err, want)
		}
		list, err = st.List(ctx, "certificates", true)
		want := []string{"certificates/ca", "certificates/ca/shop.example", "certificates/ca/shop.example/shop.example.crt",
			"certificates/ca/shop.example/shop.example.key", "certificates/ca/shopping", "certificates/ca/shopping/shopping.crt"}
		if err != nil || !slices.Equal(list, want) {
			t.Fatalf("recursive list: %q %v, want %q", list, err, want)
		}
		if _, err := st.List(ctx, "certificates/ca/shop", false); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("listing a prefix that is no directory: %v", err)
		}
		info, err := st.Stat(ctx, "certificates/ca/shop.example/shop.example.crt")
		if err != nil || !info.IsTerminal || info.Size != 4 || time.Since(info.Modified) > time.Minute {
			t.Fatalf("stat of a file: %+v %v", info, err)
		}
		if info, err := st.Stat(ctx, "certificates/ca"); err != nil || info.IsTerminal {
			t.Fatalf("stat of a directory: %+v %v", info, err)
		}
		if _, err := st.Stat(ctx, "certificates/cab"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat of nothing: %v", err)
		}
		if err := st.Delete(ctx, "certificates/ca/shop.example"); err != nil {
			t.Fatal(err)
		}
		if st.Exists(ctx, "certificates/ca/shop.example/shop.example.key") || !st.Exists(ctx, "certificates/ca/shopping/shopping.crt") {
			t.Fatal("deleting a directory took the wrong keys")
		}
		if err := st.Delete(ctx, "certificates/ca/shop.example"); err != nil {
			t.Fatalf("deleting what is gone: %v", err)
		}
		if err := st.Store(ctx, "/leading", []byte("x")); err == nil {
			t.Fatal("a key with a leading slash was stored")
		}
	})
}

// Two replicas' storages: one holds a lock at a time, a waiter gets it once it is let go, a holder that
// stops renewing (a replica killed) loses it after its time to live, a wait ends with its context, and
// a holder whose lock was taken over does not delete the new holder's.
func TestStorage_Locks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a, b := New(s.Client, s.Keys), New(s.Client, s.Keys)
		for _, st := range []*Storage{a, b} {
			st.ttl, st.renew, st.poll = 2*time.Second, 500*time.Millisecond, 20*time.Millisecond
		}
		// Mutual exclusion under contention: 8 goroutines on each replica, one at a time inside.
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			st := []*Storage{a, b}[i%2]
			wg.Go(func() {
				if err := st.Lock(ctx, "issue_cert_shop.example"); err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				if err := st.Unlock(ctx, "issue_cert_shop.example"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if most.Load() != 1 {
			t.Fatalf("%d holders at once", most.Load())
		}
		// A holder kept alive past its time to live keeps it.
		if ok, err := a.TryLock(ctx, "held"); !ok || err != nil {
			t.Fatalf("trylock: %v %v", ok, err)
		}
		time.Sleep(3 * time.Second)
		if ok, _ := b.TryLock(ctx, "held"); ok {
			t.Fatal("a live holder's lock was taken after its time to live: not renewed")
		}
		// A wait ends with its context.
		wait, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		err := b.Lock(wait, "held")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting on a held lock: %v", err)
		}
		// The holder stops renewing (as a killed replica does): the lock expires and b takes it; a's late
		// unlock leaves b's alone.
		a.mu.Lock()
		close(a.held["held"].stop)
		a.held["held"] = heldLock{token: a.held["held"].token, stop: make(chan struct{})}
		a.mu.Unlock()
		took := time.Now()
		if err := b.Lock(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(took); waited > 4*time.Second {
			t.Fatalf("took %s to take an abandoned lock", waited)
		}
		if err := a.Unlock(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := a.TryLock(ctx, "held"); ok {
			t.Fatal("a stale holder's unlock freed the new holder's lock")
		}
		if err := b.Unlock(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		if err := b.Unlock(ctx, "held"); err == nil {
			t.Fatal("unlocking a lock not held: no error")
		}
	})
}
