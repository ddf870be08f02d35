package waitroom

import (
	"context"
	"fmt"
	"slices"

	"github.com/edgeq/edgeq/internal/group"
)

// Joins in groups. Every join of a queue runs assign.lua on the queue's keys, so the replica's
// assigner (package group) sends the joins of a queue that queued up while its last call was on its
// way as one call: places are taken in arrival order and the inlet runs once for the group. Under a
// drop's arrival rate that is one script call and one round trip for many joins. places_per_ip holds
// per join inside a group: each join is counted against its own address, after those before it.

// assignBatchMax bounds one call.
const assignBatchMax = 256

// assignStride is the number of assign.lua's ARGV per join.
const assignStride = 6

// assignReq is one join: claim asks for the token at once if the new place is served by the call
// (the gate's served-at-once path); tsv is the time of the Turnstile check passed to join, 0 if none;
// places is the key of the places the client's address holds (placesKey), "" for a join not counted.
// record, recordBit and recordUntil place a passed bot check's single-use record: bit recordBit of
// the bitmap record (checkRecordKey), kept until recordUntil (unix ms); record "" for none.
type assignReq struct {
	claim       bool
	tsv         int64
	places      string
	record      string
	recordBit   int64
	recordUntil int64
}

// codeTooManyPlaces is placed.code for a join refused by places_per_ip: its address holds that many
// unserved places already. assign.lua's codes 1..4 refuse a whole call; this one a single join.
const codeTooManyPlaces = 5

// codeClaimed is placed.code for a join whose bot check's single-use record was there already: a
// replayed solution, no place taken.
const codeClaimed = 6

// placed is assign.lua's answer for one join: code 0 with a place, else why none was taken.
type placed struct {
	code, pos, serving int64
	epoch              string
	state              State
	iat, exp           int64
}

func (r *Room) newAssigner() *group.Batcher[string, assignReq, placed] {
	return group.New(assignBatchMax, r.assignNow)
}

// assignNow runs assign.lua for joins of one queue, now, in one call. After the store's master changed
// it first waits for the positions to be settled (failover.go); a call that crossed a change is made
// again once they are, so no join takes a place another replica handed out before the failover.
func (r *Room) assignNow(ctx context.Context, queueID string, reqs []assignReq) ([]placed, error) {
	for attempt := 0; ; attempt++ {
		if r.afterFailover() {
			r.settleFailover(ctx)
		}
		gen := r.opts.Store.Generation()
		out, err := r.assignOnce(ctx, queueID, reqs)
		if err != nil || r.opts.Store.Generation() == gen || attempt == 1 {
			return out, err
		}
	}
}

func (r *Room) assignOnce(ctx context.Context, queueID string, reqs []assignReq) ([]placed, error) {
	floor := ""
	q := r.tracked(queueID)
	if q != nil {
		floor = q.floorArg()
	}
	// The keys of the addresses joining, each once, and of the checks' single-use records, after the
	// queue's (assign.lua's KEYS past lib.lua's); a join names its address's and its record's by
	// index, 0 for none.
	keys := queueKeys(r.keys, queueID)
	args := make([]any, 0, 2+assignStride*len(reqs))
	args = append(args, floor, placesTTL.Milliseconds())
	for _, q := range reqs {
		address, record := 0, 0
		if q.places != "" {
			if address = slices.Index(keys, q.places) + 1; address == 0 {
				keys = append(keys, q.places)
				address = len(keys)
			}
		}
		if q.record != "" {
			if record = slices.Index(keys, q.record) + 1; record == 0 {
				keys = append(keys, q.record)
				record = len(keys)
			}
		}
		args = append(args, flag(q.claim), q.tsv, address, record, q.recordBit, q.recordUntil)
	}
	ctx, cancel := r.opts.Store.Bound(ctx)
	defer cancel()
	res := r.scripts.run(ctx, r.client, r.scripts.assign, keys, args...)
	code, serving, epoch := res.Int(0), res.Int(1), res.Str(2)
	if res.Err() != nil {
		return nil, res.Err()
	}
	out := make([]placed, len(reqs))
	for i := range out {
		out[i] = placed{code: code, serving: serving, epoch: epoch}
		if code == 0 {
			base := 3 + 4*i
			out[i].pos, out[i].state, out[i].iat, out[i].exp = res.Int(base), State(res.Int(base+1)), res.Int(base+2), res.Int(base+3)
			switch out[i].pos {
			case 0:
				out[i].code = codeTooManyPlaces
			case -1:
				out[i].code, out[i].pos = codeClaimed, 0
			}
		}
	}
	if res.Err() != nil {
		return nil, fmt.Errorf("assign: %w", res.Err())
	}
	for _, p := range out {
		if p.code == 0 {
			r.saw(queueID, epoch, p.pos)
		}
	}
	return out, nil
}
