package waitroom

// Those who were never served, for the report: who left before their turn (gave_up) and who was still
// waiting, and still there, when the queue sold out or was deleted (turned away), each with their wait
// up to that moment. The scripts note who left after being reached (the gone string, lib.lua); the
// waiters still in line at the end are read once from the positions' states and heartbeats.

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/report"
)

// waitFrom is when a visitor's wait starts: when it took its place, or the opening when it joined the
// pre-queue. ok is false when the join time is unknown (a replica that never saw it handed out).
func (q *queue) waitFrom(s *snapshot, pos, nowMs int64) (int64, bool) {
	at, ok := q.joins.joinedAt(s.Epoch, pos, nowMs)
	if !ok {
		return 0, false
	}
	if !s.OpensAt.IsZero() {
		at = max(at, s.OpensAt.UnixMilli())
	}
	return at, true
}

// countLeavers runs after each report flush: it takes the scripts' notes of visitors who left once
// reached (written while the report's gave_up counter moved), and counts the line of a queue that sold
// out since the last tick.
func (r *Room) countLeavers(ctx context.Context) {
	for _, q := range r.all() {
		s := q.snap.Load()
		if s == nil {
			continue
		}
		if s.ReportMoves {
			r.takeGone(ctx, q, s)
		}
		switch ended, _ := q.ended.Load().(string); {
		case s.SoldOut && ended != s.Epoch:
			r.countLine(ctx, q, s, report.TurnedAwaySoldOut)
		case !s.SoldOut && ended != "":
			q.ended.Store("") // restocked: advance.lua cleared r_end, a new sell-out is counted again
		}
	}
}

// takeGone counts the waits of the visitors the scripts noted as gone: from waitFrom to when each was
// last seen.
func (r *Room) takeGone(ctx context.Context, q *queue, s *snapshot) {
	key := r.keys.Queue(q.id, "gone")
	var get *redis.StringCmd
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		p.Del(ctx, key)
		return nil
	})
	if err != nil {
		if !errors.Is(err, redis.Nil) && ctx.Err() == nil {
			r.logger.Debug("reading the visitors who left failed", "queue", q.id, "error", err.Error())
		}
		return
	}
	notes := []byte(get.Val())
	sc := r.queueReport(q.id)
	now := s.storeNow().UnixMilli()
	for i := 0; i+9 <= len(notes); i += 9 {
		//nolint:gosec // 5 bytes: below 2^40
		pos := int64(be(notes[i : i+5]))
		seen := int64(be(notes[i+5:i+9])) * 1000 //nolint:gosec // 4 bytes: below 2^32
		if from, ok := q.waitFrom(s, pos, now); ok {
			sc.WaitUnserved(time.Duration(seen-from) * time.Millisecond)
		}
	}
}

// lineChunk is how many positions countLine reads per store call: 64 KiB of states and 256 KiB of
// heartbeats.
const lineChunk = 1 << 16

// countLine counts, once per sell-out (a restock starts over) or deletion, the visitors still waiting:
// those heard from within presenceWindow are turned away (series), their wait running to now; the
// others gave up, their wait running to their last heartbeat. One replica counts it: the first to set
// the queue's r_end.
func (r *Room) countLine(ctx context.Context, q *queue, s *snapshot, series string) {
	meta := r.keys.Queue(q.id, "meta")
	claimed, err := r.client.HSetNX(ctx, meta, "r_end", s.Epoch).Result()
	if err != nil {
		return // the next tick tries again
	}
	q.ended.Store(s.Epoch)
	if !claimed {
		return
	}
	sc := r.queueReport(q.id)
	now := s.storeNow()
	nowMs, cutoff := now.UnixMilli(), now.Add(-presenceWindow).Unix()
	var turned, gave int64
	for lo := int64(1); lo <= s.Counter; lo += lineChunk {
		hi := min(lo+lineChunk-1, s.Counter)
		states, hbs, err := r.readLine(ctx, q.id, lo, hi)
		if err != nil {
			r.logger.Warn("counting the line at the end of the queue failed", "queue", q.id, "error", err.Error())
			break
		}
		for pos := lo; pos <= hi; pos++ {
			i := pos - lo
			if i < int64(len(states)) && states[i] != byte(StateWaiting) {
				continue
			}
			seen := int64(0)
			if 4*i+4 <= int64(len(hbs)) {
				//nolint:gosec // 4 bytes: below 2^32
				seen = int64(be(hbs[4*i : 4*i+4]))
			}
			from, known := q.waitFrom(s, pos, nowMs)
			if seen >= cutoff {
				turned++
				if known {
					sc.WaitUnserved(time.Duration(nowMs-from) * time.Millisecond)
				}
				continue
			}
			gave++
			if known && seen > 0 {
				sc.WaitUnserved(time.Duration(seen*1000-from) * time.Millisecond)
			}
		}
	}
	sc.Add(series, turned)
	sc.Add(report.GaveUp, gave)
}

// readLine reads the states and heartbeats of positions lo..hi in one round trip.
func (r *Room) readLine(ctx context.Context, queueID string, lo, hi int64) (states, hbs []byte, err error) {
	var st, hb *redis.StringCmd
	_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		st = p.GetRange(ctx, r.keys.Queue(queueID, "state"), lo, hi)
		hb = p.GetRange(ctx, r.keys.Queue(queueID, "hb"), 4*lo, 4*hi+3)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, err
	}
	return []byte(st.Val()), []byte(hb.Val()), nil
}

// be reads a big-endian unsigned number.
func be(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
