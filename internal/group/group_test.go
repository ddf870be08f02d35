package group

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Under concurrency every call gets its own result, calls of a key are sent in arrival order within
// a group, some groups hold more than one call, and a send's error reaches each of its calls.
func TestBatcher_EveryCallGetsItsOwnResult(t *testing.T) {
	var sends, grouped atomic.Int64
	b := New(16, func(ctx context.Context, key string, reqs []int) ([]string, error) {
		sends.Add(1)
		if len(reqs) > 1 {
			grouped.Add(1)
		}
		time.Sleep(time.Millisecond) // a round trip: calls queue up meanwhile
		if key == "broken" {
			return nil, errors.New("store away")
		}
		out := make([]string, len(reqs))
		for i, r := range reqs {
			out[i] = fmt.Sprintf("%s:%d", key, r)
		}
		return out, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	for !b.isRunning() {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := range 2000 {
		wg.Go(func() {
			key := []string{"a", "b", "broken"}[i%3]
			res, err := b.Do(context.Background(), key, i)
			if key == "broken" {
				if err == nil {
					t.Errorf("call %d: no error from a failed send", i)
				}
				return
			}
			if want := fmt.Sprintf("%s:%d", key, i); err != nil || res != want {
				t.Errorf("call %d: %q %v, want %q", i, res, err, want)
			}
		})
	}
	wg.Wait()
	cancel()
	<-done
	if grouped.Load() == 0 || sends.Load() >= 2000 {
		t.Fatalf("%d sends for 2000 calls, %d with more than one call: nothing was grouped", sends.Load(), grouped.Load())
	}
	// Stopped: calls go alone.
	if res, err := b.Do(context.Background(), "a", 7); err != nil || res != "a:7" {
		t.Fatalf("after Run: %q %v", res, err)
	}
}

func (b *Batcher[K, Req, Res]) isRunning() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.running
}

// Go queues a call without waiting: its callback gets its own result (or its group's error), in the
// same groups as Do's calls; a batcher that is not running queues nothing.
func TestBatcher_GoCallsBackWithItsOwnResult(t *testing.T) {
	b := New(16, func(ctx context.Context, key string, reqs []int) ([]string, error) {
		time.Sleep(time.Millisecond)
		if key == "broken" {
			return nil, errors.New("store away")
		}
		out := make([]string, len(reqs))
		for i, r := range reqs {
			out[i] = fmt.Sprintf("%s:%d", key, r)
		}
		return out, nil
	})
	if b.Go("a", 1, func(string, error) {}) {
		t.Fatal("a batcher not running queued a call")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	for !b.isRunning() {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := range 300 {
		if i%40 == 0 {
			wg.Wait() // waves that fit the queue (4 times the group size): a full queue queues nothing
		}
		key := []string{"a", "broken"}[i%2]
		wg.Add(1)
		if !b.Go(key, i, func(res string, err error) {
			defer wg.Done()
			if key == "broken" {
				if err == nil {
					t.Errorf("call %d: no error from a failed send", i)
				}
			} else if want := fmt.Sprintf("a:%d", i); err != nil || res != want {
				t.Errorf("call %d: %q %v, want %q", i, res, err, want)
			}
		}) {
			wg.Done()
			t.Errorf("call %d was not queued", i)
		}
	}
	wg.Wait()
	cancel()
	<-done
}

// BenchmarkBatcher_OneHotKey: calls of one key from many goroutines (a hot product), through a send
// that answers at once: the batcher's own cost per call.
func BenchmarkBatcher_OneHotKey(b *testing.B) {
	bt := New(128, func(_ context.Context, _ string, reqs []int) ([]int, error) { return reqs, nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { bt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if v, err := bt.Do(ctx, "hot", i); err != nil || v != i {
				b.Fatalf("%d: %v %v", i, v, err)
			}
		}
	})
}
