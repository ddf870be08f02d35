package waitroom

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
)

// Gate is the queue step of the gate chain (the first step: docs/architecture.md
// "A request's way through"): a route with a queue needs a valid access token for that queue. It
// satisfies proxy.Step.
type Gate struct{ room *Room }

// Gate returns the room's gate step.
func (r *Room) Gate() Gate { return Gate{room: r} }

// Requirement is the route setting this step enforces.
func (Gate) Requirement() string { return config.RequireQueue }

// Headers edgeq adds for the origin on gated requests.
const (
	HeaderQueueID   = "Edgeq-Queue-Id"
	HeaderRequestID = "Edgeq-Request-Id"
)

// Wrap returns the route's handler: next when the route has no queue.
func (g Gate) Wrap(route config.Route, next http.Handler) (http.Handler, error) {
	if route.Queue == "" {
		return next, nil
	}
	queueID, r := route.Queue, g.room
	next = r.passOn(next) // with tracing on, the gate's span ends where the request moves on (tracing.go)
	tokenCookie := r.cookieName("tk", queueID)
	sess := session{queueID: queueID}
	for _, text := range route.CompleteOn {
		o, err := config.ParseReleaseOutcome(text)
		if err != nil {
			return nil, err
		}
		sess.completeOn = append(sess.completeOn, o)
		sess.readAnswer = sess.readAnswer || o.Answer != nil
	}
	return r.traceGate(queueID, func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		if r.bypasses(queueID, web.RequestFrom(ctx).ClientIP) {
			// Staff and monitors (bypass_cidrs): no place, no token, no capacity held.
			r.bypassed.WithLabelValues(queueID).Inc()
			r.dropEdgeqBearer(req)
			next.ServeHTTP(w, req)
			return
		}
		// A valid token costs no Redis call: the signature check is cached, the epoch comes from the
		// snapshot and revocations arrive by pub/sub. Renewing it costs none either (renew.go).
		if s, claims, from, ok := r.validToken(ctx, req, queueID, tokenCookie); ok {
			r.renew(w, req, s, queueID, claims, from)
			r.forward(w, req, next, sess, claims)
			return
		}
		if e, degraded := web.RequestFrom(ctx).StoreDegraded(config.RequireQueue); degraded {
			// Visitors with a valid token went on above; nobody can join now.
			if e != nil {
				r.responder.Error(w, req, e)
				return
			}
			r.dropEdgeqBearer(req)
			next.ServeHTTP(w, req)
			return
		}
		if !web.WantsHTML(req) {
			s := r.snapshotOf(ctx, queueID)
			if s != nil {
				if e := s.joinable(); e != nil && e.Code != web.ErrNotOpen.Code {
					// Sold out or closed: nothing to wait for.
					r.responder.Error(w, req, e)
					return
				}
				// A request that names a live place never takes another (docs/reference.md
				// "The queue gate"): the snapshot may be a tick behind the place's own join and still say
				// there is room. The request cookie's place first, then the Edgeq-Request-Id header's, if
				// the cookie's has ended.
				cookieID, pos, ok := r.requestFromCookie(req, queueID, s)
				if ok && r.servePlace(w, req, next, sess, s, cookieID, pos, true) {
					return
				}
				if id, pos, ok := r.claimedPlace(ctx, queueID, s); ok && id != cookieID &&
					r.servePlace(w, req, next, sess, s, id, pos, false) {
					return
				}
				claims, t, placed, refused := r.serveAPIClient(ctx, w, req, queueID, s)
				if refused != nil {
					r.responder.Error(w, req, refused) // the join limit (429 with Retry-After) or places_per_ip
					return
				}
				if t.Raw != "" {
					// Served at once, as a browser is when there is room (docs/reference.md
					// "The queue gate").
					handToken(w, req, t.Raw)
					r.forward(w, req, next, sess, claims)
					return
				}
				if placed {
					// The room filled up since this replica last looked: the place taken is the
					// client's, named in the 403 (and the request cookie).
					r.responder.Error(w, req, r.placeRequired(ctx, req, queueID, s, claims.RequestID, claims.Position))
					return
				}
			}
			r.responder.Error(w, req, r.queueRequired(ctx, req, queueID, s))
			return
		}
		r.admit(w, req, next, sess)
	}), nil
}

// namedPlace returns the place a request names: its request cookie's, else that of its
// Edgeq-Request-Id header (claimedPlace). The place may have ended since.
func (r *Room) namedPlace(ctx context.Context, req *http.Request, queueID string, s *snapshot) (string, int64, bool) {
	if id, pos, ok := r.requestFromCookie(req, queueID, s); ok {
		return id, pos, true
	}
	return r.claimedPlace(ctx, queueID, s)
}

// claimedPlace returns the place an API client names in its Edgeq-Request-Id header
// (web.Request.ClaimedRequestID), if the id is genuine for the queue's current epoch.
func (r *Room) claimedPlace(ctx context.Context, queueID string, s *snapshot) (string, int64, bool) {
	claimed := web.RequestFrom(ctx).ClaimedRequestID
	if claimed == "" {
		return "", 0, false
	}
	pos, ok := r.positionOf(queueID, s, claimed)
	if !ok {
		return "", 0, false
	}
	return claimed, pos, true
}

// servePlace answers an API request without a valid token that names a place (its request
// cookie's, cookie true, or its Edgeq-Request-Id header's), without ever taking another. A place the
// serving position has reached gets its token now, as admit gives a browser's: in the Edgeq-Token
// response header, as every API client served gets it, and also in the token cookie when the place
// came from the request cookie (that client keeps cookies, so its next requests carry the token as
// a browser's do); the request goes on to the shop. A place not reached yet is kept, and the 403
// names it (placeRequired). done is false, and nothing is answered, only when the store says the
// place has ended (completed, abandoned, expired, skipped) or never was: that is no live place, and
// the gate goes on as for a request that names none.
func (r *Room) servePlace(w http.ResponseWriter, req *http.Request, next http.Handler, sess session, s *snapshot, id string, pos int64, cookie bool) (done bool) {
	ctx, queueID := req.Context(), sess.queueID
	if s.reached(pos) {
		t, e := r.issueToken(ctx, queueID, s, id, pos)
		switch {
		case e == nil:
			handToken(w, req, t.Raw)
			if cookie {
				r.setTokenCookie(w, req, queueID, t)
			}
			r.forward(w, req, next, sess, token.Claims{RequestID: id, Position: pos})
			return true
		case e.Code == web.ErrExpired.Code || e.Code == web.ErrRequestNotFound.Code:
			return false
		}
		// Not served after all (a draw this snapshot saw ahead of the store), or the store failed:
		// the place is kept, as admit keeps a browser's.
	}
	r.responder.Error(w, req, r.placeRequired(ctx, req, queueID, s, id, pos))
	return true
}

// serveAPIClient serves a request of an app or API client at once when the queue has room and
// nobody waits (and no Turnstile check or invitation is needed), as browsers are: a place and a
// token, handed over in the Edgeq-Token header (and the request cookie). Not a browser's load of a
// subresource (an <img>, <script> or frame: Sec-Fetch-Dest other than "empty"), a prefetch, or a
// request a browser sent for another site's page: those would take places from visitors who never
// see the shop. The token is empty when the client was not served; placed then says whether it took
// a place in line all the same (the queue filled up since the snapshot), named by the claims.
// refused is the 429 of the join limit or of places_per_ip (per client address, as for joins through
// the API): the client is told so, not pointed at a join that would refuse it too.
func (r *Room) serveAPIClient(ctx context.Context, w http.ResponseWriter, req *http.Request, queueID string, s *snapshot) (c token.Claims, t issued, placed bool, refused *web.Error) {
	if !s.hasRoom() || s.Turnstile || s.InviteOnly || !apiCall(req) {
		return c, t, false, nil
	}
	j, e := r.join(ctx, w, req, queueID, s, true, nil, "")
	if e != nil {
		if e.Code == web.ErrRateLimited.Code || e.Code == web.ErrTooManyPlaces.Code {
			return c, t, false, e
		}
		return c, t, false, nil
	}
	c = token.Claims{RequestID: j.RequestID, Position: j.Position}
	if j.State != StateToken || j.Expires == 0 {
		return c, t, true, nil
	}
	t, e = r.sign(queueID, s.Epoch, j.RequestID, j.Position, j.IssuedAt, j.Expires, 0)
	return c, t, e == nil, nil
}

// apiCall reports whether a request comes from an app or a script's fetch, not from a browser
// loading a subresource or prefetching, nor sent for another site's page.
func apiCall(req *http.Request) bool {
	if purpose := req.Header.Get("Sec-Purpose"); strings.Contains(purpose, "prefetch") || strings.Contains(purpose, "prerender") {
		return false
	}
	if dest := req.Header.Get("Sec-Fetch-Dest"); dest != "" && dest != "empty" {
		return false
	}
	return !web.CrossSite(req)
}

// queueRequired is the 403 of an API request without a valid token: where to wait (wait_url, the
// page) and to join (queue_id, join_url: the assign endpoint), and, when the request names a live
// place (the request cookie, or an Edgeq-Request-Id header), where it stands. On an invite_only
// queue a request that names no place gets 403 INVITE_REQUIRED instead (a join would be refused).
func (r *Room) queueRequired(ctx context.Context, req *http.Request, queueID string, s *snapshot) *web.Error {
	if s == nil {
		return r.placeRequired(ctx, req, queueID, nil, "", 0)
	}
	id, pos, ok := r.namedPlace(ctx, req, queueID, s)
	if !ok && s.InviteOnly {
		// Joining would be refused: the client needs an invitation, not the join endpoint.
		return web.ErrInviteRequired.With("queue_id", queueID)
	}
	return r.placeRequired(ctx, req, queueID, s, id, pos) // id "" when none
}

// placeRequired is queueRequired for the place id (at pos) the request holds, "" for none: the
// status fields are added while the place is live.
func (r *Room) placeRequired(ctx context.Context, req *http.Request, queueID string, s *snapshot, id string, pos int64) *web.Error {
	e := web.ErrQueueRequired.With("wait_url", r.waitURL(queueID, req.URL.RequestURI())).
		With("queue_id", queueID).With("join_url", r.opts.Prefix+"/assign_queue_pos")
	if s == nil || id == "" {
		return e
	}
	st, err := r.status(ctx, queueID, id, pos, s)
	if err != nil || (st.QueueStatus != "waiting" && st.QueueStatus != "prequeue" && st.QueueStatus != "served") {
		return e
	}
	return e.With("request_id", id).With("queue_status", st.QueueStatus).With("queue_position", st.QueuePosition).
		With("ahead", st.Ahead).With("estimated_wait_time", st.EstimatedWaitTime)
}

// forward sends a request with a valid token on, telling the origin who it is, and acts on an
// Edgeq-Command the origin answers with.
// session is what the gate of one route knows: its queue, and the origin outcomes that complete the
// visitor's session (complete_on).
type session struct {
	queueID    string
	completeOn []config.ReleaseOutcome
	readAnswer bool // an answer: entry in completeOn
}

// ends reports how the origin's answer ends the visitor's session: an Edgeq-Command ("complete",
// "abandon") first, else an outcome listed in complete_on; ok is false when the session goes on.
func (g session) ends(req *http.Request) (final State, why string, ok bool) {
	o := web.OutcomeFrom(req.Context())
	if o == nil {
		return 0, "", false
	}
	if o.Command != "" {
		switch strings.ToLower(strings.TrimSpace(o.Command)) {
		case "complete":
			return StateCompleted, "Edgeq-Command", true
		case "abandon":
			return StateAbandoned, "Edgeq-Command", true
		}
		web.RequestFrom(req.Context()).Logger().Warn("origin sent an unknown Edgeq-Command", "command", o.Command)
		return 0, "", false
	}
	if o.Forwarded {
		for _, want := range g.completeOn {
			if o.Matches(want) {
				return StateCompleted, "complete_on", true
			}
		}
	}
	return 0, "", false
}

func (r *Room) forward(w http.ResponseWriter, req *http.Request, next http.Handler, g session, c token.Claims) {
	// Wherever the valid token came from, an edgeq token in Authorization stays with edgeq.
	r.dropEdgeqBearer(req)
	vals := []string{g.queueID, c.RequestID} // one allocation for both headers (Header.Set makes one each)
	req.Header[HeaderQueueID] = vals[0:1:1]
	req.Header[HeaderRequestID] = vals[1:2:2]
	web.RequestFrom(req.Context()).QueueRequestID = c.RequestID
	if o := web.OutcomeFrom(req.Context()); o != nil && g.readAnswer {
		o.KeepAnswer().Want = true // complete_on reads the shop's answer
	}
	// Deferred: the origin's answer ends the session even when the copy of the response to the
	// visitor aborts (http.ErrAbortHandler).
	defer r.afterOrigin(req, g, c)
	next.ServeHTTP(w, req)
}

// afterOrigin completes or abandons the visitor's session when the origin's answer says so.
func (r *Room) afterOrigin(req *http.Request, g session, c token.Claims) {
	final, why, ok := g.ends(req)
	if !ok {
		return
	}
	queueID := g.queueID
	s := r.snapshotOf(req.Context(), queueID)
	if s == nil {
		return
	}
	// The visitor's response is on its way; finishing must not die with the visitor's connection.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 5*time.Second)
	defer cancel()
	if _, err := r.finish(ctx, queueID, s.Epoch, c.Position, final); err != nil && err != errAlreadyFinished {
		web.RequestFrom(req.Context()).Logger().Warn("ending the visitor's session failed", "by", why, "error", err.Error())
	}
}

// errNoSnapshot is the cause logged when a gated queue's state cannot be read from the store.
var errNoSnapshot = errors.New("queue state unavailable from the store")

// admit handles a browser navigation without a valid token: a visitor already served (its request
// cookie says where it stands) gets its token now; when the queue has room and nobody waits, a
// newcomer opening the page itself (not a frame or prefetch: see joinableLoad) is served at once;
// everyone else goes to the waiting page.
func (r *Room) admit(w http.ResponseWriter, req *http.Request, next http.Handler, sess session) {
	ctx, queueID := req.Context(), sess.queueID
	s := r.snapshotOf(ctx, queueID)
	if s == nil {
		// The queue's state could not be read (Apply wrote every configured queue at start).
		if e := web.RequestFrom(ctx).StoreFailed(config.RequireQueue, errNoSnapshot); e != nil {
			r.responder.Error(w, req, e)
			return
		}
		r.dropEdgeqBearer(req)
		next.ServeHTTP(w, req)
		return
	}
	returnTo := req.URL.RequestURI()
	if id, pos, ok := r.requestFromCookie(req, queueID, s); ok && s.reached(pos) {
		if t, e := r.issueToken(ctx, queueID, s, id, pos); e == nil {
			r.setTokenCookie(w, req, queueID, t)
			r.forward(w, req, next, sess, token.Claims{RequestID: id, Position: pos})
			return
		}
	}
	if s.hasRoom() && !s.Turnstile && joinableLoad(req) == nil {
		if _, _, held := r.requestFromCookie(req, queueID, s); !held {
			j, e := r.join(ctx, w, req, queueID, s, true, nil, "")
			if e != nil && e.Code == web.ErrStoreUnavailable.Code {
				if e := web.RequestFrom(ctx).StoreFailed(config.RequireQueue, e.Cause); e != nil {
					r.responder.Error(w, req, e)
					return
				}
				r.dropEdgeqBearer(req)
				next.ServeHTTP(w, req)
				return
			}
			if e == nil && j.State == StateToken && j.Expires > 0 {
				t, e := r.sign(queueID, s.Epoch, j.RequestID, j.Position, j.IssuedAt, j.Expires, 0)
				if e == nil {
					r.setTokenCookie(w, req, queueID, t)
					r.forward(w, req, next, sess, token.Claims{RequestID: j.RequestID, Position: j.Position})
					return
				}
			}
		}
	}
	//nolint:gosec // this site's waiting page; return is the request's own path
	http.Redirect(w, req, r.waitURL(queueID, returnTo), http.StatusFound)
}

// TokenRequestID returns the queue request id of the request's valid access token for queueID (its
// cookie, the Edgeq-Token header, or an edgeq token in Authorization: Bearer), found and checked as
// the gate does (validToken): for edgeq's own endpoints that
// identify a visitor the way a route with admission user "token" does (GET {prefix}/auctions/mine).
// Nothing is issued, renewed or joined.
func (r *Room) TokenRequestID(req *http.Request, queueID string) (string, bool) {
	_, c, _, ok := r.validToken(req.Context(), req, queueID, r.cookieName("tk", queueID))
	return c.RequestID, ok
}
