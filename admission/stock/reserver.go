package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeq/edgeq/admission"
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

// Reserved is reserve.lua's answer to one purchase: its code (0 admitted, 1 insufficient stock, ...),
// the stock left and the product's per-user limit.
type Reserved struct {
	Code, Remaining, Limit int64
	// NotAcked: admitted on the master, but the replicas did not confirm it within redis.wait_timeout.
	NotAcked bool
}

// newReserver groups the purchases of each product into reserve.lua calls (package group).
func (k *stockKind) newReserver() *group.Batcher[string, admission.Claim, Reserved] {
	return group.New(reserveBatchMax, k.reserveNow)
}

// reserveArgs are reserve.lua's KEYS and ARGV for purchases of one product, and the commits among
// cs (claims with commit set: they go first, in one list).
func (k *stockKind) reserveArgs(product string, cs []admission.Claim) ([]string, []any) {
	s := k.s
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
	args = append(args, s.ClaimTTL().Milliseconds(), k.recordsExpireAt(latest, time.Now()), admission.Flag(s.Ledger() != nil), commits)
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
func (k *stockKind) reserveNow(ctx context.Context, product string, cs []admission.Claim) ([]Reserved, error) {
	s := k.s
	keys, args := k.reserveArgs(product, cs)
	cmd, err := s.Store().RunAcked(ctx, reserveScript, keys, args...)
	if errors.Is(err, store.ErrNotAcked) && cmd.Err() != nil {
		// The master refused to write (NOREPLICAS): nothing was taken; each purchase is answered as
		// unconfirmed, and its give-back leaves a tombstone.
		out := make([]Reserved, len(cs))
		for i := range out {
			out[i].NotAcked = true
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
	out := make([]Reserved, len(cs))
	for i, j := 0, 0; i < len(cs); i++ {
		if cs[i].Commit {
			continue // committed (a commit the replicas did not confirm in time is sent again after a failover: admission/replay.go)
		}
		out[i] = got[j]
		out[i].NotAcked = notAcked && out[i].Code == 0
		j++
	}
	return out, nil
}

func splitReserved(res []int64, err error, n int) ([]Reserved, error) {
	if err == nil && len(res) != 3*n {
		err = fmt.Errorf("reserve answered %v for %d purchases", res, n)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Reserved, n)
	for i := range out {
		out[i] = Reserved{Code: res[3*i], Remaining: res[3*i+1], Limit: res[3*i+2]}
	}
	return out, nil
}

// reserveOne reserves one purchase: grouped with others of its product when the reserver runs.
func (k *stockKind) reserveOne(ctx context.Context, c admission.Claim) (Reserved, error) {
	return k.reserves.Do(ctx, c.Owner, c)
}
