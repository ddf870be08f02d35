package waitroom

// Taking a place in a queue: the place a visitor's request cookie holds already (assign_queue_pos is
// idempotent per browser), and a new one behind the checks a join passes first, in order: the store
// is up, the queue takes joins and not by invitation only, the per-IP join limit, the queue's
// Turnstile check; then the place itself (assign.lua, through the assigner) and the request cookie.

import (
	"context"
	"net/http"
	"time"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/ratelimit"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// requestCookieLife is how long a request cookie lasts: long enough for any wait.
const requestCookieLife = 24 * time.Hour

// allowJoin applies limits.join_per_ip_per_minute on Redis, shared by every replica. A join attempt
// counts whether or not it ends with a place: it is taken before the queue's Turnstile check, so a
// client sending junk responses is refused before any of them costs a siteverify call.
func (r *Room) allowJoin(ctx context.Context, req *http.Request) *web.Error {
	limit := ratelimit.PerMinute(r.limits.JoinPerIPPerMinute)
	key := joinLimitKey(r.keys, ratelimit.ClientKey(web.RequestFrom(req.Context()).ClientIP))
	ok, retry, err := r.joins.Allow(ctx, key, limit)
	if err != nil {
		return web.ErrStoreUnavailable.Because(err)
	}
	if !ok {
		r.rateLimited.WithLabelValues("join").Inc()
		return web.RateLimited(retry)
	}
	return nil
}

// joined is a visitor's place.
type joined struct {
	RequestID string
	Position  int64
	State     State
	IssuedAt  int64 // set when the join was served at once with claim
	Expires   int64
	TSV       int64 // Turnstile time the place was taken with
}

// held returns the place the visitor's request cookie holds, with its state, when the cookie is
// genuine for the queue. ok is false without such a cookie.
func (r *Room) held(ctx context.Context, req *http.Request, queueID string, s *snapshot) (j joined, ok bool, e *web.Error) {
	id, pos, ok := r.requestFromCookie(req, queueID, s)
	if !ok {
		return joined{}, false, nil
	}
	st := StateWaiting
	if s.reached(pos) {
		var err error
		if st, err = r.lookup(ctx, queueID, s.Epoch, pos); err != nil {
			return joined{}, false, web.ErrStoreUnavailable.Because(err)
		}
	}
	return joined{RequestID: id, Position: pos, State: st}, true, nil
}

// live returns the unfinished place the visitor's request cookie holds: assign_queue_pos is
// idempotent per browser.
func (r *Room) live(ctx context.Context, req *http.Request, queueID string, s *snapshot) (joined, bool, *web.Error) {
	j, ok, e := r.held(ctx, req, queueID, s)
	if e != nil || !ok || j.State.Final() {
		return joined{}, false, e
	}
	r.heartbeat(queueID, s, j.Position)
	return j, true, nil
}

// join takes a new place in the queue for the visitor, in this order: the per-IP join limit
// (limits.join_per_ip_per_minute), the queue's Turnstile check when it asks for one (response, solved
// for the widget action; see verifyJoin), the place itself, which the store refuses past the queue's
// places_per_ip (places.go). Each step that refuses answers and nothing after it runs: a join refused
// before the Turnstile check spends no response (one refused for places_per_ip has spent it), no
// refused join takes a place, and a join counts once against the limit. With claim, a visitor served by
// this very call also gets its token.
func (r *Room) join(ctx context.Context, w http.ResponseWriter, req *http.Request, queueID string, s *snapshot, claim bool, sol botcheck.Solution, action string) (joined, *web.Error) {
	j, e := r.tryJoin(ctx, w, req, queueID, s, claim, sol, action)
	if e != nil {
		r.refusedJoin(queueID, e)
	}
	return j, e
}

// tryJoin is join without the report's count of its refusals.
func (r *Room) tryJoin(ctx context.Context, w http.ResponseWriter, req *http.Request, queueID string, s *snapshot, claim bool, sol botcheck.Solution, action string) (joined, *web.Error) {
	if web.RequestFrom(ctx).Store.Degraded {
		// Nobody can join while the store is down; a Turnstile response is not spent on it.
		return joined{}, web.ErrStoreUnavailable.Because(web.ErrDegraded)
	}
	if e := s.joinable(); e != nil {
		// Not open yet, sold out or closed: no place, no Turnstile response spent (assign.lua checks
		// again on the store's clock).
		return joined{}, e
	}
	if s.InviteOnly {
		// Invited visitors join through their invitation link (handleInvite).
		return joined{}, web.ErrInviteRequired
	}
	if e := r.allowJoin(ctx, req); e != nil {
		return joined{}, e
	}
	if !s.Turnstile {
		return r.assign(ctx, w, req, queueID, claim, 0, nil)
	}
	v, e := r.verifyJoin(ctx, req, queueID, sol, action)
	if e != nil {
		r.queueReport(queueID).Add(report.TurnstileFailed, 1)
		return joined{}, e
	}
	var pending *botcheck.Verdict
	if v.Claim != nil {
		pending = &v
	}
	tsv := v.At.Unix()
	if r.dropCheckTimes.Load() {
		tsv = 0
	}
	j, e := r.assign(ctx, w, req, queueID, claim, tsv, pending)
	if e != nil && e.Code == web.ErrInvalidTurnstile.Code {
		r.queueReport(queueID).Add(report.TurnstileFailed, 1) // a replay, found with the place
		return joined{}, e
	}
	r.queueReport(queueID).Add(report.TurnstilePassed, 1)
	return j, e
}

// assign takes a new place in the queue and hands the request cookie over (join runs the checks
// first). With claim, a visitor served by this very call also gets its token. tsv is the time of the
// bot check passed to join, 0 if none. pending is a passed check whose single-use record the call
// writes with the place (nil for none): a record there already takes no place, and the check is
// settled as a replay (403 INVALID_TURNSTILE_TOKEN).
func (r *Room) assign(ctx context.Context, w http.ResponseWriter, req *http.Request, queueID string, claim bool, tsv int64, pending *botcheck.Verdict) (joined, *web.Error) {
	// The call does not end with the visitor's connection: it may carry other visitors' joins.
	places := r.placesKey(queueID, web.RequestFrom(ctx).ClientIP)
	ar := assignReq{claim: claim, tsv: tsv, places: places}
	if pending != nil {
		c := pending.Claim
		ar.record, ar.recordBit, ar.recordUntil = checkRecordKey(r.keys, queueID, c.Series), c.Bit, c.Expires.UnixMilli()+1000
	}
	a, err := r.assigner.Do(context.WithoutCancel(ctx), queueID, ar)
	if err != nil {
		return joined{}, web.ErrStoreUnavailable.Because(err)
	}
	if pending != nil && (a.code == 0 || a.code == codeClaimed) {
		if v := r.opts.Check.Settle(*pending, a.code == 0); !v.OK {
			return joined{}, v.Refusal()
		}
	}
	pos, epoch, st, iat, exp := a.pos, a.epoch, a.state, a.iat, a.exp
	switch a.code {
	case 1:
		return joined{}, web.ErrQueueNotFound
	case 2:
		return joined{}, web.ErrNotOpen
	case 3:
		return joined{}, web.ErrQueueClosed
	case 4:
		return joined{}, web.ErrSoldOut
	case codeTooManyPlaces:
		r.rateLimited.WithLabelValues("places").Inc()
		return joined{}, web.ErrTooManyPlaces
	case codeClaimed:
		return joined{}, web.ErrInvalidTurnstile // settled above
	}
	r.queueReport(queueID).Add(report.Joined, 1)
	if st == StateToken {
		r.tokenIssued(queueID, epoch, pos)
	}
	id := r.ids.make(queueID, epoch, pos)
	r.opts.Cookies.Set(w, req, r.cookieName("rq", queueID), id, requestCookieLife)
	return joined{RequestID: id, Position: pos, State: st, IssuedAt: iat, Expires: exp, TSV: tsv}, nil
}

// verifyJoin runs the join-time bot check of a queue that asks for one (queues[].turnstile): the
// verdict, refused with 403 INVALID_TURNSTILE_TOKEN when it did not pass. No place is taken before it
// passes; a verdict with a Claim has its single-use record written with the place (assign).
func (r *Room) verifyJoin(ctx context.Context, req *http.Request, queueID string, sol botcheck.Solution, action string) (botcheck.Verdict, *web.Error) {
	if r.opts.Check == nil {
		return botcheck.Verdict{}, web.ErrTurnstileMissing
	}
	v := r.opts.Check.Verify(ctx, botcheck.Submission{
		Solution: sol, Scope: botcheck.Scope{Kind: "queue", Name: queueID}, Request: req, Action: action, Deferred: true,
	})
	if !v.OK {
		return v, v.Refusal()
	}
	return v, nil
}
