// Package group sends requests to the store in groups: a Batcher takes calls from many goroutines
// and hands each key's calls that queued up while its last send was on its way to one send (a group
// commit: a call alone goes at once; under load the groups grow by themselves). One script call and
// one round trip then carry many requests, which is what Redis CPU per request is made of. While the
// batcher is not running (tests, shutdown) each call is sent alone.
package group

import (
	"context"
	"errors"
	"sync"
)

var errShortAnswer = errors.New("group: the send answered fewer results than calls")

// Send sends the calls of one key (in arrival order) and returns one result per call, or an error
// for them all.
type Send[K comparable, Req, Res any] func(ctx context.Context, key K, reqs []Req) ([]Res, error)

// Batcher groups calls by key. Its zero value is not usable: use New.
type Batcher[K comparable, Req, Res any] struct {
	send Send[K, Req, Res]
	max  int

	mu      sync.RWMutex
	running bool
	queue   chan call[K, Req, Res]
}

type call[K comparable, Req, Res any] struct {
	key   K
	req   Req
	reply chan result[Res]
	then  func(Res, error) // instead of reply: a call made with Go
}

type result[Res any] struct {
	res Res
	err error
}

// New returns a batcher that sends at most max calls of a key at once.
func New[K comparable, Req, Res any](max int, send Send[K, Req, Res]) *Batcher[K, Req, Res] {
	return &Batcher[K, Req, Res]{send: send, max: max}
}

// Do makes one call: through the running batcher, or alone. The send outlives ctx's cancellation
// only as far as send itself lets it (callers pass a context that does not end with a visitor).
func (b *Batcher[K, Req, Res]) Do(ctx context.Context, key K, req Req) (Res, error) {
	reply := make(chan result[Res], 1)
	b.mu.RLock()
	queued := false
	if b.running {
		select {
		case b.queue <- call[K, Req, Res]{key: key, req: req, reply: reply}:
			queued = true
		default: // full: this one goes alone
		}
	}
	b.mu.RUnlock()
	if !queued {
		res, err := b.send(ctx, key, []Req{req})
		if err != nil {
			var zero Res
			return zero, err
		}
		return res[0], nil
	}
	r := <-reply
	return r.res, r.err
}

// Go queues one call without waiting for it: then gets its result once its group was sent. False
// when the batcher is not running or its queue is full (nothing was queued; the caller sends the
// request its own way).
func (b *Batcher[K, Req, Res]) Go(key K, req Req, then func(Res, error)) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if !b.running {
		return false
	}
	select {
	case b.queue <- call[K, Req, Res]{key: key, req: req, then: then}:
		return true
	default:
		return false
	}
}

// Run sends queued calls in groups until ctx ends, then sends what is left; from then on calls go
// alone. The sends use ctx without its cancellation.
func (b *Batcher[K, Req, Res]) Run(ctx context.Context) {
	b.mu.Lock()
	b.queue = make(chan call[K, Req, Res], 4*b.max)
	b.running = true
	b.mu.Unlock()
	sendCtx := context.WithoutCancel(ctx)
	batch := make([]call[K, Req, Res], 0, b.max)
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			b.running = false
			b.mu.Unlock()
			batch = batch[:0]
			for drained := false; !drained; {
				select {
				case c := <-b.queue:
					batch = append(batch, c)
				default:
					drained = true
				}
			}
			b.flush(sendCtx, batch)
			return
		case c := <-b.queue:
			batch = append(batch[:0], c)
			for full := false; !full && len(batch) < b.max; {
				select {
				case c := <-b.queue:
					batch = append(batch, c)
				default:
					full = true
				}
			}
			b.flush(sendCtx, batch)
		}
	}
}

// flush sends a batch, one send per key (in order of first arrival), and answers every call.
func (b *Batcher[K, Req, Res]) flush(ctx context.Context, batch []call[K, Req, Res]) {
	if len(batch) == 0 {
		return
	}
	if oneKey(batch) {
		// The common case under load (one hot product): no grouping and no goroutine.
		b.sendGroup(ctx, batch[0].key, batch)
		return
	}
	var order []K
	byKey := map[K][]call[K, Req, Res]{}
	for _, c := range batch {
		if _, ok := byKey[c.key]; !ok {
			order = append(order, c.key)
		}
		byKey[c.key] = append(byKey[c.key], c)
	}
	var wg sync.WaitGroup
	for _, key := range order {
		wg.Go(func() { b.sendGroup(ctx, key, byKey[key]) })
	}
	wg.Wait()
}

func oneKey[K comparable, Req, Res any](batch []call[K, Req, Res]) bool {
	for _, c := range batch[1:] {
		if c.key != batch[0].key {
			return false
		}
	}
	return true
}

// sendGroup sends the calls of one key in one send and answers each.
func (b *Batcher[K, Req, Res]) sendGroup(ctx context.Context, key K, calls []call[K, Req, Res]) {
	reqs := make([]Req, len(calls))
	for i, c := range calls {
		reqs[i] = c.req
	}
	res, err := b.send(ctx, key, reqs)
	if err == nil && len(res) != len(reqs) {
		err = errShortAnswer
	}
	for i, c := range calls {
		var r result[Res]
		if err != nil {
			r.err = err
		} else {
			r.res = res[i]
		}
		if c.then != nil {
			c.then(r.res, r.err)
		} else {
			c.reply <- r
		}
	}
}
