package admission

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Reservations in groups. Stock admissions of one product all touch the product's keys, so the
// reserver sends, per product, whatever purchases queued up while its last call was on its way as
// one reserve.lua call (a group commit: one request alone goes at once; under load the groups grow by
// themselves). One script call and one round trip then carry many admissions, which is what Redis CPU
// per admission is made of; each purchase is still decided atomically, in arrival order. While the
// reserver is not running (tests, shutdown), each request makes its own call.

// reserveBatchMax bounds one call.
const reserveBatchMax = 128

type reservation struct {
	c     claim
	reply chan reserved
}

type reserved struct {
	code, remaining, limit int64
	err                    error
}

type reserver struct {
	mu      sync.RWMutex
	running bool
	queue   chan reservation
}

// reserveArgs are reserve.lua's KEYS and ARGV for purchases of one product.
func (s *Service) reserveArgs(product string, cs []claim) ([]string, []any) {
	keys := make([]string, 0, 4+2*len(cs))
	keys = append(keys, infoKey(s.keys, product), stockKey(s.keys, product), buyersKey(s.keys, product), eventsKey(s.keys, product))
	args := make([]any, 0, 3+3*len(cs))
	args = append(args, s.o.ClaimTTL.Milliseconds(), int64(recordTTL.Seconds()), s.o.StreamBound)
	for _, c := range cs {
		keys = append(keys, claimKey(s.keys, product, c.user), recordKey(s.keys, product, c.id))
		args = append(args, c.id, c.user, c.value)
	}
	return keys, args
}

// reserveNow runs reserve.lua for purchases of one product, now, in one call.
func (s *Service) reserveNow(ctx context.Context, product string, cs []claim) ([]reserved, error) {
	keys, args := s.reserveArgs(product, cs)
	res, err := reserveScript.Run(ctx, s.client, keys, args...).Int64Slice()
	return splitReserved(res, err, len(cs))
}

func splitReserved(res []int64, err error, n int) ([]reserved, error) {
	if err == nil && len(res) != 3*n {
		err = fmt.Errorf("reserve answered %v for %d purchases", res, n)
	}
	if err != nil {
		return nil, err
	}
	out := make([]reserved, n)
	for i := range out {
		out[i] = reserved{code: res[3*i], remaining: res[3*i+1], limit: res[3*i+2]}
	}
	return out, nil
}

// reserveOne reserves one purchase: through the reserver when it runs, else with a call of its own.
func (s *Service) reserveOne(ctx context.Context, c claim) (reserved, error) {
	reply := make(chan reserved, 1)
	s.reserves.mu.RLock()
	queued := false
	if s.reserves.running {
		select {
		case s.reserves.queue <- reservation{c: c, reply: reply}:
			queued = true
		default:
		}
	}
	s.reserves.mu.RUnlock()
	if !queued {
		res, err := s.reserveNow(ctx, c.owner, []claim{c})
		if err != nil {
			return reserved{}, err
		}
		return res[0], nil
	}
	r := <-reply
	return r, r.err
}

// runReserver sends queued purchases in groups until ctx ends, then sends what is left.
func (s *Service) runReserver(ctx context.Context) {
	s.reserves.mu.Lock()
	s.reserves.queue = make(chan reservation, 4*reserveBatchMax)
	s.reserves.running = true
	s.reserves.mu.Unlock()
	batch := make([]reservation, 0, reserveBatchMax)
	for {
		select {
		case <-ctx.Done():
			s.reserves.mu.Lock()
			s.reserves.running = false
			s.reserves.mu.Unlock()
			batch = batch[:0]
			for {
				select {
				case r := <-s.reserves.queue:
					batch = append(batch, r)
					continue
				default:
				}
				break
			}
			s.sendReservations(context.WithoutCancel(ctx), batch)
			return
		case r := <-s.reserves.queue:
			batch = append(batch[:0], r)
		gather:
			for len(batch) < reserveBatchMax {
				select {
				case r := <-s.reserves.queue:
					batch = append(batch, r)
				default:
					break gather
				}
			}
			s.sendReservations(context.WithoutCancel(ctx), batch)
		}
	}
}

// sendReservations makes one reserve.lua call per product of a batch, in one pipeline, and answers
// each purchase. A call without an answer answers each of its purchases with the error: their
// requests compensate as a single one does.
func (s *Service) sendReservations(ctx context.Context, batch []reservation) {
	if len(batch) == 0 {
		return
	}
	byProduct := map[string][]reservation{}
	var order []string
	for _, r := range batch {
		if _, ok := byProduct[r.c.owner]; !ok {
			order = append(order, r.c.owner)
		}
		byProduct[r.c.owner] = append(byProduct[r.c.owner], r)
	}
	cmds := make([]*redis.Cmd, len(order))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, product := range order {
			rs := byProduct[product]
			cs := make([]claim, len(rs))
			for j, r := range rs {
				cs[j] = r.c
			}
			keys, args := s.reserveArgs(product, cs)
			cmds[i] = reserveScript.EvalSha(ctx, p, keys, args...)
		}
		return nil
	})
	for i, product := range order {
		rs := byProduct[product]
		res, err := cmds[i].Int64Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The first call after a store restart: send this product's group again with the script.
			cs := make([]claim, len(rs))
			for j, r := range rs {
				cs[j] = r.c
			}
			keys, args := s.reserveArgs(product, cs)
			res, err = reserveScript.Run(ctx, s.client, keys, args...).Int64Slice()
		}
		out, err := splitReserved(res, err, len(rs))
		for j, r := range rs {
			if err != nil {
				r.reply <- reserved{err: err}
			} else {
				r.reply <- out[j]
			}
		}
	}
}
