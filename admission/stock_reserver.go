package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeq/edgeq/internal/group"
	"github.com/edgeq/edgeq/internal/store"
)

// Reservations in groups. Stock admissions of one product all touch the product's keys, so the
// reserver (package group) sends, per product, whatever purchases queued up while its last call was
// on its way as one reserve.lua call; each purchase is still decided atomically, in arrival order. A
// call without an answer answers each of its purchases with the error: their requests compensate as
// a single one does.

// reserveBatchMax bounds one call.
const reserveBatchMax = 128

type reserved struct {
	code, remaining, limit int64
	// notAcked: admitted on the master, but the replicas did not confirm it within redis.wait_timeout.
	notAcked bool
}

// newReserver groups the purchases of each product into reserve.lua calls (package group).
func (s *Service) newReserver() *group.Batcher[string, Claim, reserved] {
	return group.New(reserveBatchMax, s.reserveNow)
}

// reserveArgs are reserve.lua's KEYS and ARGV for purchases of one product, and the commits among
// cs (claims with commit set: they go first, in one list).
func (s *Service) reserveArgs(product string, cs []Claim) ([]string, []any) {
	keys := make([]string, 0, 6+len(cs))
	keys = append(keys, infoKey(s.Keys(), product), stockKey(s.Keys(), product), buyersKey(s.Keys(), product), admitsKey(s.Keys(), product),
		unsettledKey(s.Keys(), product), claimsKey(s.Keys(), product))
	commits, latest := 0, ""
	for _, c := range cs {
		if c.Commit {
			commits++
		} else {
			latest = c.ID // the records' expiry follows the latest purchase, not a commit's older id
		}
	}
	args := make([]any, 0, 4+2*commits+4*(len(cs)-commits))
	args = append(args, s.ClaimTTL().Milliseconds(), s.recordsExpireAt(latest, time.Now()), Flag(s.Ledger() != nil), commits)
	for _, c := range cs {
		if c.Commit {
			args = append(args, c.ID, c.User)
		}
	}
	for _, c := range cs {
		if !c.Commit {
			keys = append(keys, recordsKey(s.Keys(), product, c.ID))
			args = append(args, c.ID, c.User, c.Value, c.Route)
		}
	}
	return keys, args
}

// reserveNow runs reserve.lua for purchases of one product (and the commits that ride with them),
// now, in one call, and with redis.wait_replicas waits for the replicas once for the whole call
// (store.RunAcked): when they do not confirm it in time, every purchase it admitted is answered
// notAcked (the caller gives it back). A commit is answered code 0; notAcked when the master refused
// to write (nothing was committed: the caller commits it another way).
func (s *Service) reserveNow(ctx context.Context, product string, cs []Claim) ([]reserved, error) {
	keys, args := s.reserveArgs(product, cs)
	cmd, err := s.Store().RunAcked(ctx, reserveScript, keys, args...)
	if errors.Is(err, store.ErrNotAcked) && cmd.Err() != nil {
		// The master refused to write (NOREPLICAS): nothing was taken; each purchase is answered as
		// unconfirmed, and its give-back leaves a tombstone.
		out := make([]reserved, len(cs))
		for i := range out {
			out[i].notAcked = true
		}
		return out, nil
	}
	notAcked := errors.Is(err, store.ErrNotAcked)
	if notAcked {
		err = nil
	}
	var res []int64
	if err == nil {
		res, err = cmd.Int64Slice()
	}
	purchases := 0
	for _, c := range cs {
		if !c.Commit {
			purchases++
		}
	}
	got, err := splitReserved(res, err, purchases)
	if err != nil {
		return nil, err
	}
	out := make([]reserved, len(cs))
	for i, j := 0, 0; i < len(cs); i++ {
		if cs[i].Commit {
			continue // committed (a commit the replicas did not confirm in time is sent again after a failover: replay.go)
		}
		out[i] = got[j]
		out[i].notAcked = notAcked && out[i].code == 0
		j++
	}
	return out, nil
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

// reserveOne reserves one purchase: grouped with others of its product when the reserver runs.
func (k *stockKind) reserveOne(ctx context.Context, c Claim) (reserved, error) {
	return k.reserves.Do(ctx, c.Owner, c)
}
