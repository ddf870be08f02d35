package waitroom

// The public waiting-room endpoints under the prefix: joining (join.go takes the place), a visitor's
// position and status, the queue's serving position and waiting count, a served visitor's token, and
// the token keys (JWKS). The wait page is in wait.go, the invitation links in invite.go.

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/ratelimit"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// maxFormBytes bounds the bodies of assign_queue_pos and generate_token: a few short fields.
const maxFormBytes = 16 << 10

// Register adds the public waiting-room endpoints under the prefix to mux.
func (r *Room) Register(mux *http.ServeMux) {
	p := r.opts.Prefix
	mux.HandleFunc("POST "+p+"/assign_queue_pos", r.traced(spanJoin, r.handleAssign))
	mux.HandleFunc("GET "+p+"/queue_pos/{queue_id}/{request_id}", r.traced(spanStatus, r.handleQueuePos))
	mux.HandleFunc("GET "+p+"/serving_pos/{queue_id}", r.handleServingPos)
	mux.HandleFunc("GET "+p+"/waiting_num/{queue_id}", r.handleWaitingNum)
	mux.HandleFunc("POST "+p+"/generate_token", r.traced(spanToken, r.handleGenerateToken))
	mux.HandleFunc("GET "+p+"/status/{queue_id}/{request_id}", r.traced(spanStatus, r.handleStatus))
	mux.HandleFunc("POST "+p+"/beat/{queue_id}/{request_id}", r.handleBeat)
	mux.HandleFunc("GET "+p+"/jwks.json", r.handleJWKS)
	mux.HandleFunc("GET "+p+"/wait/{queue_id}", r.traced(spanWait, r.handleWait))
	mux.HandleFunc("POST "+p+"/wait/{queue_id}", r.traced(spanWait, r.handleWait))
	mux.HandleFunc("GET "+p+"/invite/{queue_id}/{code}", r.handleInvite)
	mux.HandleFunc("POST "+p+"/invite/{queue_id}/{code}", r.handleInvite)
}

// bodyFields reads top-level fields of a form (urlencoded or multipart) or JSON object body of at
// most limit bytes, strictly (a field given twice is refused); a missing field is "".
func bodyFields(req *http.Request, limit int64, names ...string) (map[string]string, *web.Error) {
	f := fields.New(req, limit)
	out := make(map[string]string, len(names))
	for _, n := range names {
		v, _, e := f.Body(n)
		if e != nil {
			return nil, e
		}
		out[n] = v
	}
	return out, nil
}

// queueFor validates a queue id and returns its snapshot.
func (r *Room) queueFor(ctx context.Context, id string) (*snapshot, *web.Error) {
	if !config.ID.MatchString(id) {
		return nil, web.ErrInvalidRequest.With("field", "queue_id")
	}
	s := r.snapshotOf(ctx, id)
	if s == nil {
		return nil, web.ErrQueueNotFound
	}
	r.noteQueue(ctx, id)
	return s, nil
}

// pageQueueFor is queueFor for a page a visitor opens (the waiting page, an invitation link): there an
// unknown queue is 404 web.ErrWaitingRoomNotFound, not the API's 400.
func (r *Room) pageQueueFor(ctx context.Context, id string) (*snapshot, *web.Error) {
	s, e := r.queueFor(ctx, id)
	if e == web.ErrQueueNotFound {
		e = web.ErrWaitingRoomNotFound
	}
	return s, e
}

// requestFor resolves a request id of a queue to its position.
func (r *Room) requestFor(queueID, requestID string, s *snapshot) (int64, *web.Error) {
	if _, ok := parseUUID(requestID); !ok {
		return 0, web.ErrInvalidRequest.With("field", "request_id")
	}
	// A genuine id was minted for an assigned position, even if this replica's snapshot is too old
	// to count it yet; the scripts check positions against the store.
	pos, ok := r.positionOf(queueID, s, requestID)
	if !ok {
		return 0, web.ErrRequestNotFound
	}
	return pos, nil
}

// placeFor is the queue and the place in it that a request's path names (queue_id, request_id):
// queueFor, then requestFor.
func (r *Room) placeFor(req *http.Request) (queueID string, s *snapshot, pos int64, e *web.Error) {
	queueID = req.PathValue("queue_id")
	if s, e = r.queueFor(req.Context(), queueID); e != nil {
		return queueID, nil, 0, e
	}
	pos, e = r.requestFor(queueID, req.PathValue("request_id"), s)
	return queueID, s, pos, e
}

// allowPoll applies limits.status_per_ip_per_minute, in process: polls must never cost a Redis call.
func (r *Room) allowPoll(req *http.Request) *web.Error {
	limit := ratelimit.PerMinute(r.limits.StatusPerIPPerMinute)
	ok, retry := r.polls.Allow(ratelimit.ClientKey(web.RequestFrom(req.Context()).ClientIP), limit)
	if !ok {
		r.rateLimited.WithLabelValues("status").Inc()
		return web.RateLimited(retry)
	}
	return nil
}

// lookup reads the state of a position that the serving position has reached.
func (r *Room) lookup(ctx context.Context, queueID, epoch string, pos int64) (State, error) {
	res := r.scripts.run(ctx, r.client, r.scripts.lookup, queueKeys(r.keys, queueID), pos, epoch)
	code, st := res.Int(0), State(res.Int(1))
	if res.Err() != nil {
		return 0, res.Err()
	}
	if code == 1 {
		return 0, errRequestNotFound
	}
	return st, nil
}

func (r *Room) handleAssign(w http.ResponseWriter, req *http.Request) {
	if web.CrossSite(req) {
		r.responder.Error(w, req, web.ErrCrossSite)
		return
	}
	f, e := bodyFields(req, maxFormBytes, append([]string{"queue_id"}, r.checkFields()...)...)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if e, degraded := web.RequestFrom(req.Context()).StoreDegraded("join"); degraded {
		// Nobody can join while the store is down; a Turnstile token is not spent on it. An endpoint
		// matches no route, so its policy is closed: this is 503.
		r.responder.Error(w, req, e)
		return
	}
	s, e := r.queueFor(req.Context(), f["queue_id"])
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	ctx, queueID := req.Context(), f["queue_id"]
	j, ok, e := r.live(ctx, req, queueID, s)
	if e == nil && !ok {
		j, e = r.join(ctx, w, req, queueID, s, false, r.checkSolution(f, req), "")
	}
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"request_id": j.RequestID})
}

func (r *Room) handleQueuePos(w http.ResponseWriter, req *http.Request) {
	if e := r.allowPoll(req); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	queueID, s, pos, e := r.placeFor(req)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if s.reached(pos) {
		st, err := r.lookup(req.Context(), queueID, s.Epoch, pos)
		if err != nil {
			r.responder.Error(w, req, web.ErrStoreUnavailable.Because(err))
			return
		}
		if st.Final() {
			r.responder.Error(w, req, web.ErrExpired.With("queue_status", st.Status()))
			return
		}
	}
	r.heartbeat(queueID, s, pos)
	// The place in serving order, as status's queue_position: what a client compares
	// with serving_pos. It is the arrival position except after a lottery, whose pre-queue is served
	// in the drawn order.
	web.WriteJSON(w, http.StatusOK, map[string]any{"position": s.Lottery.rank(pos)})
}

func (r *Room) handleServingPos(w http.ResponseWriter, req *http.Request) {
	r.answerQueue(w, req, func(s *snapshot) map[string]any { return map[string]any{"position": s.Serving} })
}

func (r *Room) handleWaitingNum(w http.ResponseWriter, req *http.Request) {
	r.answerQueue(w, req, func(s *snapshot) map[string]any { return map[string]any{"waiting_num": s.Waiting()} })
}

// answerQueue answers a public read of the path's queue (its snapshot, no store call) with what of
// makes of it.
func (r *Room) answerQueue(w http.ResponseWriter, req *http.Request, of func(*snapshot) map[string]any) {
	id := req.PathValue("queue_id")
	s, e := r.queueFor(req.Context(), id)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	r.touch(req, id, s)
	web.WriteJSON(w, http.StatusOK, of(s))
}

// touch records a heartbeat for the visitor of the request cookie, if any.
func (r *Room) touch(req *http.Request, queueID string, s *snapshot) {
	if _, pos, ok := r.requestFromCookie(req, queueID, s); ok {
		r.heartbeat(queueID, s, pos)
	}
}

func (r *Room) handleGenerateToken(w http.ResponseWriter, req *http.Request) {
	if web.CrossSite(req) {
		// A token takes a served visitor's capacity; only the shop's own pages ask for one.
		r.responder.Error(w, req, web.ErrCrossSite)
		return
	}
	f, e := bodyFields(req, maxFormBytes, "queue_id", "request_id")
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	queueID := f["queue_id"]
	s, e := r.queueFor(req.Context(), queueID)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	pos, e := r.requestFor(queueID, f["request_id"], s)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	r.heartbeat(queueID, s, pos)
	t, e := r.issueToken(req.Context(), queueID, s, f["request_id"], pos)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	r.setTokenCookie(w, req, queueID, t)
	web.WriteJSON(w, http.StatusOK, map[string]any{
		"access_token": t.Raw, "token_type": "Bearer", "expires_in": max(0, int64(time.Until(t.Expires)/time.Second)),
	})
}

// Status is the body of GET status (docs/reference.md "Waiting room").
type Status struct {
	QueueID           string `json:"queue_id"`
	RequestID         string `json:"request_id"`
	QueueStatus       string `json:"queue_status"` // waiting, served, ..., prequeue, sold_out
	QueuePosition     int64  `json:"queue_position"`
	ServingPosition   int64  `json:"serving_position"`
	Ahead             int64  `json:"ahead"`
	TotalInWaiting    int64  `json:"total_in_waiting"`
	TotalInActive     int64  `json:"total_in_active"`
	EstimatedWaitTime int64  `json:"estimated_wait_time"` // seconds; -1 unknown
	// Paused: nobody new is served for now; places are kept.
	Paused bool `json:"paused"`
	// Method is how waiters are served (fifo, random, passthrough, reject).
	Method string `json:"method"`
	// OpensAt and OpensIn (seconds) are set before a scheduled queue opens.
	OpensAt string `json:"opens_at,omitempty"`
	OpensIn *int64 `json:"opens_in,omitempty"`
}

// status describes a visitor's place. Waiting visitors are answered from the snapshot alone; only a
// visitor the serving rank (or a draw) has reached costs a lookup. queue_position is the visitor's
// place in serving order: its arrival order, except after a lottery.
func (r *Room) status(ctx context.Context, queueID, requestID string, pos int64, s *snapshot) (Status, error) {
	rank := s.Lottery.rank(pos)
	st := Status{
		QueueID: queueID, RequestID: requestID, QueueStatus: StateWaiting.Status(), QueuePosition: rank,
		ServingPosition: s.Serving, Ahead: s.ahead(pos), TotalInWaiting: s.Waiting(),
		TotalInActive: s.Active, EstimatedWaitTime: s.eta(s.togo(pos)), Paused: s.Paused, Method: s.Method,
	}
	if s.reached(pos) {
		state, err := r.lookup(ctx, queueID, s.Epoch, pos)
		if err != nil {
			return st, err
		}
		st.QueueStatus = state.Status()
		st.Ahead, st.EstimatedWaitTime = 0, 0
		return st, nil
	}
	if !s.open() {
		in := secondsUntil(s.storeNow(), s.OpensAt)
		st.QueueStatus, st.OpensAt, st.OpensIn = "prequeue", vocab.FormatTime(s.OpensAt), &in
		st.EstimatedWaitTime = -1
	}
	if s.SoldOut {
		st.QueueStatus, st.EstimatedWaitTime = "sold_out", -1
	}
	if s.Paused {
		st.EstimatedWaitTime = -1 // nobody is served while paused: no wait can be promised
	}
	return st, nil
}

func (r *Room) handleStatus(w http.ResponseWriter, req *http.Request) {
	if e := r.allowPoll(req); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	queueID, requestID := req.PathValue("queue_id"), req.PathValue("request_id")
	s, e := r.queueFor(req.Context(), queueID)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	pos, e := r.requestFor(queueID, requestID, s)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	st, err := r.status(req.Context(), queueID, requestID, pos, s)
	if err != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(err))
		return
	}
	r.beat(queueID, s, pos, pollBeat(req))
	code := http.StatusOK
	switch st.QueueStatus {
	case "waiting", "served", "prequeue", "sold_out":
		// A place that is kept (sold_out: a restock reopens the queue).
	default:
		code = http.StatusGone
	}
	web.WriteJSON(w, code, st)
}

func (r *Room) handleJWKS(w http.ResponseWriter, req *http.Request) {
	body := r.opts.Keyring.JWKS()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
