package waitroom

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store/luascript"
	"github.com/edgeq/edgeq/internal/web"
)

// A heartbeat says a visitor is still there: a poll, or the waiting page telling that it went into the
// background or is closing (beat). The store keeps, per position, when its visitor counts as seen
// until (heartbeat.lua); three things read it: abandon_after (waiters silent for that long are
// skipped), gone_after (a reached place whose visitor went silent frees its capacity) and the report
// (who was still there at sell-out). Heartbeats are written in batches, once a second per replica.
type heartbeatBatch struct {
	mu      sync.Mutex
	pending map[string]map[int64]beat
}

// beat is what a heartbeat says.
type beat byte

const (
	beatPoll   beat = iota // a poll: seen now
	beatHidden             // the page went into the background: seen for config.HiddenGrace
	beatGone               // the page is closing: seen now, and no longer

	// beatReached marks a heartbeat of a place the snapshot shows reached: the script moves its
	// deadline (gone_after) and leaves waiters' alone without reading their state.
	beatReached beat = 4
)

// sampleEvery and sampleWindow thin the heartbeats of visitors not yet reached, when nothing but the
// report needs them: a visitor's polls are written only within a sampleWindow of every sampleEvery
// (offset by its position, so a replica's batches stay even), which a page polling every 4 s (±20 %)
// always hits. The report then knows each waiter's last poll within sampleEvery, at a fifth of the
// writes.
const (
	sampleEvery  = 20
	sampleWindow = 5
)

// presenceWindow is how recent a waiter's heartbeat must be for the report to count it as still
// there (turned away at sell-out, not gone): a sampled visible page writes one every sampleEvery,
// a background page's grace runs ahead of the clock.
const presenceWindow = time.Minute

// heartbeat records a poll of pos.
func (r *Room) heartbeat(queueID string, s *snapshot, pos int64) { r.beat(queueID, s, pos, beatPoll) }

// beat records a heartbeat of pos. A poll of a visitor not yet reached is written every time when the
// queue skips abandoned waiters, sampled otherwise; a reached visitor's (whose place waits for its
// token) and what a page says of itself are always written.
func (r *Room) beat(queueID string, s *snapshot, pos int64, b beat) {
	if s.reached(pos) {
		b |= beatReached
	} else if b == beatPoll && s.AbandonAfter <= 0 && (s.storeNow().Unix()+pos)%sampleEvery >= sampleWindow {
		return
	}
	r.heartbeats.mu.Lock()
	defer r.heartbeats.mu.Unlock()
	set, ok := r.heartbeats.pending[queueID]
	if !ok {
		set = map[int64]beat{}
		r.heartbeats.pending[queueID] = set
	}
	switch was, ok := set[pos]; {
	case ok && b&^beatReached == beatPoll && was&^beatReached == beatHidden:
		return // a poll already on its way as the page was hidden: the page's own word stands
	case ok && b&^beatReached == beatHidden && was&^beatReached == beatGone:
		return // a closing page's last word (a reload's new page polls, which wins)
	}
	set[pos] = b
}

const heartbeatChunk = 5000

func (r *Room) flushHeartbeats(ctx context.Context) {
	r.heartbeats.mu.Lock()
	pending := r.heartbeats.pending
	r.heartbeats.pending = map[string]map[int64]beat{}
	r.heartbeats.mu.Unlock()
	grace := int64(config.HiddenGrace / time.Second)
	for id, set := range pending {
		args := make([]any, 0, 1+min(len(set), heartbeatChunk))
		send := func() {
			if len(args) <= 1 {
				return
			}
			if res := r.scripts.run(ctx, r.client, r.scripts.heartbeat, queueKeys(r.keys, id), args...); res.Err() != nil &&
				!errors.Is(res.Err(), luascript.ErrReply) {
				r.logger.Debug("heartbeat flush failed", "queue", id, "error", res.Err().Error())
			}
			args = args[:1]
		}
		args = append(args, grace)
		for pos, b := range set {
			if b == beatPoll {
				args = append(args, pos)
			} else {
				args = append(args, beatArg(pos, b))
			}
			if len(args) == 1+heartbeatChunk {
				send()
			}
		}
		send()
	}
}

// beatArg is a heartbeat as heartbeat.lua reads it: the position, "h" or "l", and "r" when reached.
func beatArg(pos int64, b beat) string {
	a := strconv.AppendInt(make([]byte, 0, 24), pos, 10)
	switch b &^ beatReached {
	case beatHidden:
		a = append(a, 'h')
	case beatGone:
		a = append(a, 'l')
	}
	if b&beatReached != 0 {
		a = append(a, 'r')
	}
	return string(a)
}

// maxBeatBytes bounds a beat's body: one short field.
const maxBeatBytes = 1 << 10

// handleBeat is POST {prefix}/beat/{queue_id}/{request_id}: the waiting page telling what its polls
// cannot, as it goes into the background (page=hidden: its timers may be throttled or frozen from
// now on) or closes (page=gone), with navigator.sendBeacon. 204, nothing in the body.
func (r *Room) handleBeat(w http.ResponseWriter, req *http.Request) {
	if web.CrossSite(req) {
		r.responder.Error(w, req, web.ErrCrossSite)
		return
	}
	if e := r.allowPoll(req); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	f, e := bodyFields(req, maxBeatBytes, "page")
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	var b beat
	switch f["page"] {
	case "shown":
		b = beatPoll
	case "hidden":
		b = beatHidden
	case "gone":
		b = beatGone
	default:
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "page"))
		return
	}
	queueID, s, pos, e := r.placeFor(req)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	r.beat(queueID, s, pos, b)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// pollBeat is what a status poll says: a page in the background marks its polls (hidden=1), each of
// which renews its grace.
func pollBeat(req *http.Request) beat {
	if req.URL.Query().Get("hidden") == "1" {
		return beatHidden
	}
	return beatPoll
}
