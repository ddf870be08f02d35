package waitroom

// The queue admin API (docs/reference.md "Admin queue API"): creating, updating, reading,
// listing and deleting queues, advancing a serving position, ending a visitor's session, counting
// active tokens. The request body and QueueInfo are in settings.go, invitations in invite.go.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

const (
	maxIncrementBy    = 100_000 // bounds the work of one increment_serving_position
	maxAdminBodyBytes = 64 << 10
)

// RegisterAdmin adds the queue API (docs/reference.md "Admin queue API") to the admin mux.
func (r *Room) RegisterAdmin(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/queue", r.adminCreate)
	mux.HandleFunc("PUT /api/queue", r.adminUpdate)
	mux.HandleFunc("GET /api/queue/{id}", r.adminGet)
	mux.HandleFunc("DELETE /api/queue/{id}", r.adminDelete)
	mux.HandleFunc("POST /api/queue/increment_serving_position", r.adminIncrement)
	mux.HandleFunc("POST /api/queue/update_token_status", r.adminUpdateTokenStatus)
	mux.HandleFunc("GET /api/queue/{queue_id}/active_token_num", r.adminActiveTokens)
	mux.HandleFunc("GET /api/queues", r.adminList)
	mux.HandleFunc("POST /api/queue/{id}/invites", r.adminCreateInvites)
	mux.HandleFunc("GET /api/queue/{id}/invites", r.adminListInvites)
	mux.HandleFunc("DELETE /api/queue/{id}/invites/{code}", r.adminDeleteInvite)
}

func (r *Room) adminCreate(w http.ResponseWriter, req *http.Request) {
	var body queueRequest
	if e := fields.DecodeJSON(w, req, maxAdminBodyBytes, &body); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	s, e := body.toSettings(defaultSettings())
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if _, err := r.upsert(req.Context(), "create", s); err != nil {
		r.adminStoreError(w, req, err)
		return
	}
	r.writeQueue(w, req, s.ID)
}

func (r *Room) adminUpdate(w http.ResponseWriter, req *http.Request) {
	var body queueRequest
	if e := fields.DecodeJSON(w, req, maxAdminBodyBytes, &body); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	id := ""
	for _, v := range []*string{body.QueueID, body.ID} {
		if v != nil {
			id = *v
		}
	}
	current, ok := r.adminQueue(w, req, id, r.snapshotOf)
	if !ok {
		return
	}
	s, e := body.toSettings(settingsOfSnapshot(id, current))
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if _, err := r.upsert(req.Context(), "update", s); err != nil {
		r.adminStoreError(w, req, err)
		return
	}
	r.writeQueue(w, req, id)
}

func (r *Room) adminStoreError(w http.ResponseWriter, req *http.Request, err error) {
	switch {
	case errors.Is(err, errQueueExists):
		r.responder.Error(w, req, web.ErrQueueExists)
	case errors.Is(err, errQueueNotFound):
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
	default:
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(err))
	}
}

func (r *Room) writeQueue(w http.ResponseWriter, req *http.Request, id string) {
	s := r.fresh(req.Context(), id)
	if s == nil {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
		return
	}
	web.WriteJSON(w, http.StatusOK, r.info(id, s))
}

func (r *Room) adminGet(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	if !config.ID.MatchString(id) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	r.writeQueue(w, req, id)
}

// adminQueue is the snapshot of the queue id names (get: the last tick's or a fresh one); a malformed
// id is answered 400, an unknown queue 404.
func (r *Room) adminQueue(w http.ResponseWriter, req *http.Request, id string, get func(context.Context, string) *snapshot) (*snapshot, bool) {
	if !config.ID.MatchString(id) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "queue_id"))
		return nil, false
	}
	s := get(req.Context(), id)
	if s == nil {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
		return nil, false
	}
	return s, true
}

// fresh returns a just-refreshed snapshot: the admin API shows the latest, not the last tick.
func (r *Room) fresh(ctx context.Context, id string) *snapshot {
	if q := r.tracked(id); q != nil {
		return r.refresh(ctx, q)
	}
	return r.snapshotOf(ctx, id)
}

func (r *Room) adminDelete(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	if !config.ID.MatchString(id) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "id"))
		return
	}
	if q := r.tracked(id); q != nil {
		// Whoever is still in line is turned away: the report counts them before their places go.
		if s := r.refresh(req.Context(), q); s != nil {
			r.takeGone(req.Context(), q, s)
			r.countLine(req.Context(), q, s, report.TurnedAwayClosed)
		}
	}
	existed, err := r.scripts.remove.Run(req.Context(), r.client, queueKeys(r.keys, id)).Int()
	if err != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(err))
		return
	}
	if existed == 0 {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
		return
	}
	r.client.SRem(req.Context(), queueIndexKey(r.keys), id)
	r.untrack(id)
	result := map[string]any{"id": id, "deleted": true}
	if _, fromConfig := (*r.configured.Load())[id]; fromConfig {
		// The configuration file declares it: it comes back empty, with a new epoch.
		r.logger.Warn("queue of the configuration file deleted through the API: it is recreated empty", "queue", id)
		r.track(id)
		r.refresh(req.Context(), r.tracked(id))
		result["recreated_from_config"] = true
	}
	web.WriteJSON(w, http.StatusOK, result)
}

func (r *Room) adminIncrement(w http.ResponseWriter, req *http.Request) {
	f, e := bodyFields(req, maxAdminBodyBytes, "queue_id", "increment_by")
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	id := f["queue_id"]
	n, err := strconv.ParseInt(f["increment_by"], 10, 64)
	if !config.ID.MatchString(id) || err != nil || n < 1 || n > int64(maxIncrementBy) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("problems",
			fmt.Sprintf("queue_id must be a queue id and increment_by an integer 1..%d", maxIncrementBy)))
		return
	}
	res := r.scripts.run(req.Context(), r.client, r.scripts.increment, queueKeys(r.keys, id), n)
	code, serving := res.Int(0), res.Int(1)
	if res.Err() != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(res.Err()))
		return
	}
	switch code {
	case 1:
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
		return
	case 2:
		r.responder.Error(w, req, web.ErrNotOpenAdmin.With("serving_pos", serving))
		return
	case 3:
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(errDrawUnconfirmed))
		return
	}
	if q := r.tracked(id); q != nil {
		r.refresh(req.Context(), q)
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"serving_pos": serving})
}

// UpdateTokenStatus ends a visitor's session: status 1 COMPLETED, 2 ABANDONED (POST
// /api/queue/update_token_status).
func (r *Room) adminUpdateTokenStatus(w http.ResponseWriter, req *http.Request) {
	f, e := bodyFields(req, maxAdminBodyBytes, "queue_id", "request_id", "status")
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	id, requestID := f["queue_id"], f["request_id"]
	var final State
	switch f["status"] {
	case "1":
		final = StateCompleted
	case "2":
		final = StateAbandoned
	default:
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "status"))
		return
	}
	s, ok := r.adminQueue(w, req, id, r.snapshotOf)
	if !ok {
		return
	}
	pos, e := r.requestFor(id, requestID, s)
	if e != nil {
		if e == web.ErrRequestNotFound {
			e = web.ErrRequestNotFound
		}
		r.responder.Error(w, req, e)
		return
	}
	state, err := r.finish(req.Context(), id, s.Epoch, pos, final)
	switch {
	case errors.Is(err, errRequestNotFound):
		r.responder.Error(w, req, web.ErrRequestNotFound)
	case errors.Is(err, errNotServed):
		r.responder.Error(w, req, web.ErrNotServed)
	case errors.Is(err, errAlreadyFinished):
		if state == final {
			web.WriteJSON(w, http.StatusOK, map[string]any{"queue_id": id, "request_id": requestID, "queue_status": state.Status()})
			return
		}
		r.responder.Error(w, req, web.ErrAlreadyFinished.With("queue_status", state.Status()))
	case err != nil:
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(err))
	default:
		web.WriteJSON(w, http.StatusOK, map[string]any{"queue_id": id, "request_id": requestID, "queue_status": state.Status()})
	}
}

func (r *Room) adminActiveTokens(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("queue_id")
	s, ok := r.adminQueue(w, req, id, r.fresh)
	if !ok {
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"active_num": s.Tokens()})
}

// adminList lists the queues sorted by id: every one, or a page of them with page and page_size.
func (r *Room) adminList(w http.ResponseWriter, req *http.Request) {
	page, size, e := web.Paging(req, 0)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	r.discover(req.Context())
	all := []QueueInfo{}
	for _, q := range r.all() {
		if s := q.snap.Load(); s != nil {
			all = append(all, r.info(q.id, s))
		}
	}
	lo, hi, size := web.Window(int64(len(all)), page, size)
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": all[lo:hi], "total_count": len(all), "page": page, "page_size": size})
}

// Queues returns every tracked queue, for the metrics collector and the dashboard.
func (r *Room) Queues(ctx context.Context) []QueueInfo {
	var out []QueueInfo
	for _, q := range r.all() {
		if s := q.snap.Load(); s != nil {
			out = append(out, r.info(q.id, s))
		}
	}
	return out
}
