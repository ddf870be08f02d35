package waitroom

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

const (
	maxIncrementBy    = 100_000 // bounds the work of one increment_serving_position
	maxAdminBodyBytes = 64 << 10
)

// RegisterAdmin adds the queue API of CONTRACT section 7 (seed 004's private API) to the admin mux.
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

// queueRequest is the JSON body of POST/PUT /api/queue. Pointers tell absent fields from zero: on PUT
// only the fields present change; on POST absent fields take the configuration defaults.
type queueRequest struct {
	ID                        *string `json:"id"`
	QueueID                   *string `json:"queue_id"`
	Title                     *string `json:"title"`
	Capacity                  *int64  `json:"capacity"`
	ReleasePerMinute          *int64  `json:"release_per_minute"`
	TokenValiditySecond       *int64  `json:"token_validity_second"`
	EnableQueuePositionExpiry *bool   `json:"enable_queue_position_expiry"`
	PositionExpirySecond      *int64  `json:"position_expiry_second"`
	AbandonAfterSecond        *int64  `json:"abandon_after_second"`
	Turnstile                 *bool   `json:"turnstile"`
	Paused                    *bool   `json:"paused"`
	// A drop (CONTRACT 10.2): opens_at and closes_at RFC 3339 ("" none).
	OpensAt        *string   `json:"opens_at"`
	PrequeueSecond *int64    `json:"prequeue_second"`
	Shuffle        *bool     `json:"shuffle"`
	ClosesAt       *string   `json:"closes_at"`
	Method         *string   `json:"method"`
	SoldOutWith    *[]string `json:"sold_out_with"`
	// Sessions and invitations (CONTRACT 10.2).
	SessionRenewal   *bool  `json:"session_renewal"`
	MaxSessionSecond *int64 `json:"max_session_second"`
	InviteOnly       *bool  `json:"invite_only"`
	// PlacesPerIP (CONTRACT 11.1): 0 no limit; lowering it takes no place away.
	PlacesPerIP *int64 `json:"places_per_ip"`
}

// QueueInfo is a queue as the admin API shows it: seed 004's fields, edgeq's settings and live counters.
type QueueInfo struct {
	ID                        string   `json:"id"`
	QueueID                   string   `json:"queue_id"`
	Title                     string   `json:"title"`
	Capacity                  int64    `json:"capacity"`
	ReleasePerMinute          int64    `json:"release_per_minute"`
	TokenValiditySecond       int64    `json:"token_validity_second"`
	EnableQueuePositionExpiry bool     `json:"enable_queue_position_expiry"`
	PositionExpirySecond      int64    `json:"position_expiry_second"`
	AbandonAfterSecond        int64    `json:"abandon_after_second"`
	Turnstile                 bool     `json:"turnstile"`
	Paused                    bool     `json:"paused"`
	FromConfig                bool     `json:"from_config"`
	ServingPos                int64    `json:"serving_pos"`
	AssignedPos               int64    `json:"assigned_pos"`
	WaitingNum                int64    `json:"waiting_num"`
	ActiveNum                 int64    `json:"active_num"`
	ServingRate               float64  `json:"serving_rate_per_second"`
	OpensAt                   string   `json:"opens_at"`
	PrequeueSecond            int64    `json:"prequeue_second"`
	Shuffle                   bool     `json:"shuffle"`
	ClosesAt                  string   `json:"closes_at"`
	Method                    string   `json:"method"`
	SoldOutWith               []string `json:"sold_out_with"`
	// State is the queue as a whole: not_open, prequeue, open, paused, sold_out or closed (State).
	State string `json:"state"`
	// Lottery is the pre-queue's draw, once the queue opened with shuffle: its size and the SHA-256 of
	// its seed (the same as logged at the opening).
	Lottery *LotteryInfo `json:"lottery,omitempty"`
	// Sessions and invitations (CONTRACT 10.2).
	SessionRenewal   bool        `json:"session_renewal"`
	MaxSessionSecond int64       `json:"max_session_second"`
	InviteOnly       bool        `json:"invite_only"`
	Invites          InviteCount `json:"invites"`
	// PlacesPerIP is the unserved places one client address may hold (CONTRACT 11.1); 0 no limit.
	PlacesPerIP int64 `json:"places_per_ip"`
}

// InviteCount is how many of a queue's invitations exist, and how many of them were used.
type InviteCount struct {
	Total  int64 `json:"total"`
	Used   int64 `json:"used"`
	Unused int64 `json:"unused"`
}

// LotteryInfo describes a queue's pre-queue lottery.
type LotteryInfo struct {
	Size       int64  `json:"size"`
	SeedSHA256 string `json:"seed_sha256"`
}

// state names a queue's state for operators: the first that applies of sold_out, closed, not_open
// (before the pre-queue), prequeue, paused, open.
func (s *snapshot) state() string {
	if s.SoldOut {
		return "sold_out"
	}
	e := s.joinable()
	if e != nil && e.Code == web.ErrQueueClosed.Code {
		return "closed"
	}
	if !s.open() {
		if e != nil {
			return "not_open"
		}
		return "prequeue"
	}
	if s.Paused {
		return "paused"
	}
	return "open"
}

// QueueStates lists every value of QueueInfo.State.
var QueueStates = []string{"not_open", "prequeue", "open", "paused", "sold_out", "closed"}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (r *Room) info(id string, s *snapshot) QueueInfo {
	_, fromConfig := (*r.configured.Load())[id]
	return QueueInfo{
		ID: id, QueueID: id, Title: s.Title, Capacity: s.Capacity, ReleasePerMinute: s.ReleasePerMinute,
		TokenValiditySecond: int64(s.TokenTTL / time.Second), EnableQueuePositionExpiry: s.PositionExpiry > 0,
		PositionExpirySecond: int64(s.PositionExpiry / time.Second), AbandonAfterSecond: int64(s.AbandonAfter / time.Second),
		Turnstile: s.Turnstile, Paused: s.Paused, FromConfig: fromConfig, ServingPos: s.Serving, AssignedPos: s.Counter,
		WaitingNum: s.Waiting(), ActiveNum: s.Tokens(), ServingRate: s.ServingRate,
		OpensAt: formatTime(s.OpensAt), PrequeueSecond: prequeueOf(s), Shuffle: s.Shuffle,
		ClosesAt: formatTime(s.ClosesAt), Method: s.Method, SoldOutWith: append([]string{}, s.SoldOutWith...),
		State: s.state(), Lottery: s.lotteryInfo(),
		SessionRenewal: s.SessionRenewal, MaxSessionSecond: int64(s.MaxSession / time.Second), InviteOnly: s.InviteOnly,
		Invites:     InviteCount{Total: s.Invites, Used: s.InvitesUsed, Unused: max(0, s.Invites-s.InvitesUsed)},
		PlacesPerIP: s.PlacesPerIP,
	}
}

func prequeueOf(s *snapshot) int64 {
	if s.OpensAt.IsZero() || s.JoinFrom.IsZero() {
		return 0
	}
	return int64(s.OpensAt.Sub(s.JoinFrom) / time.Second)
}

func (s *snapshot) lotteryInfo() *LotteryInfo {
	if s.Lottery.n == 0 {
		return nil
	}
	sum := sha256.Sum256([]byte(s.Lottery.seed))
	return &LotteryInfo{Size: s.Lottery.n, SeedSHA256: hex.EncodeToString(sum[:])}
}

// toSettings merges a request over base and validates the result with the configuration's rules.
func (q queueRequest) toSettings(base settings) (settings, *web.Error) {
	id := base.ID
	for _, v := range []*string{q.QueueID, q.ID} {
		if v != nil {
			if id != "" && *v != id {
				return base, web.ErrInvalidRequest.Because(errors.New("id and queue_id differ"))
			}
			id = *v
		}
	}
	s := base
	s.ID = id
	if q.Title != nil {
		s.Title = *q.Title
	}
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Capacity, q.Capacity)
	set(&s.ReleasePerMinute, q.ReleasePerMinute)
	set(&s.TokenTTL, q.TokenValiditySecond)
	set(&s.PositionExpiry, q.PositionExpirySecond)
	set(&s.AbandonAfter, q.AbandonAfterSecond)
	set(&s.PlacesPerIP, q.PlacesPerIP)
	if q.EnableQueuePositionExpiry != nil && !*q.EnableQueuePositionExpiry {
		s.PositionExpiry = 0
	}
	if q.Turnstile != nil {
		s.Turnstile = *q.Turnstile
	}
	if q.Paused != nil {
		s.Pause = "0"
		if *q.Paused {
			s.Pause = "1"
		}
	}
	if s.Title == "" {
		s.Title = s.ID
	}
	// The same rules as the configuration file, reported with the API's field names.
	cq := config.Queue{
		ID: s.ID, Title: s.Title, Capacity: int(s.Capacity), ReleasePerMinute: int(s.ReleasePerMinute),
		TokenTTL: time.Duration(s.TokenTTL) * time.Second, PositionExpiry: time.Duration(s.PositionExpiry) * time.Second,
		AbandonAfter: time.Duration(s.AbandonAfter) * time.Second, Turnstile: s.Turnstile,
		OpensAt: formatTime(msTime(s.OpensAt)), ClosesAt: formatTime(msTime(s.ClosesAt)),
		Prequeue: time.Duration(s.Prequeue) * time.Second, Shuffle: s.Shuffle, Method: s.Method, SoldOutWith: s.SoldOutWith,
		SessionRenewal: s.SessionRenewal, MaxSession: time.Duration(s.MaxSession) * time.Second, InviteOnly: s.InviteOnly,
		PlacesPerIP: int(s.PlacesPerIP),
	}
	if cq.MaxSession < cq.TokenTTL && q.MaxSessionSecond == nil {
		cq.MaxSession = max(cq.TokenTTL, config.DefaultQueue().MaxSession) // a queue written before sessions existed
	}
	if q.SessionRenewal != nil {
		cq.SessionRenewal = *q.SessionRenewal
	}
	if q.MaxSessionSecond != nil {
		cq.MaxSession = time.Duration(*q.MaxSessionSecond) * time.Second
	}
	if q.InviteOnly != nil {
		cq.InviteOnly = *q.InviteOnly
	}
	if q.OpensAt != nil {
		cq.OpensAt = *q.OpensAt
	}
	if q.ClosesAt != nil {
		cq.ClosesAt = *q.ClosesAt
	}
	if q.PrequeueSecond != nil {
		cq.Prequeue = time.Duration(*q.PrequeueSecond) * time.Second
	}
	if q.Shuffle != nil {
		cq.Shuffle = *q.Shuffle
	}
	if q.Method != nil {
		cq.Method = *q.Method
	}
	if q.SoldOutWith != nil {
		cq.SoldOutWith = *q.SoldOutWith
	}
	if err := config.ValidateQueue(cq); err != nil {
		return s, web.ErrInvalidRequest.With("problems", config.OneLine(err)).Because(err)
	}
	// Validated: the times parse.
	drop := settingsOf(cq)
	s.OpensAt, s.ClosesAt, s.Prequeue, s.Shuffle, s.Method, s.SoldOutWith = drop.OpensAt, drop.ClosesAt, drop.Prequeue, drop.Shuffle, drop.Method, drop.SoldOutWith
	s.SessionRenewal, s.MaxSession, s.InviteOnly = drop.SessionRenewal, drop.MaxSession, drop.InviteOnly
	return s, nil
}

func defaultSettings() settings { return settingsOf(config.DefaultQueue()) }

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
	if !config.ID.MatchString(id) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "queue_id"))
		return
	}
	current := r.snapshotOf(req.Context(), id)
	if current == nil {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
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

func settingsOfSnapshot(id string, s *snapshot) settings {
	return settings{
		ID: id, Title: s.Title, Capacity: s.Capacity, ReleasePerMinute: s.ReleasePerMinute,
		TokenTTL: int64(s.TokenTTL / time.Second), PositionExpiry: int64(s.PositionExpiry / time.Second),
		AbandonAfter: int64(s.AbandonAfter / time.Second), Turnstile: s.Turnstile,
		OpensAt: unixMs(s.OpensAt), ClosesAt: unixMs(s.ClosesAt), Prequeue: prequeueOf(s), Shuffle: s.Shuffle,
		Method: s.Method, SoldOutWith: s.SoldOutWith,
		SessionRenewal: s.SessionRenewal, MaxSession: int64(s.MaxSession / time.Second), InviteOnly: s.InviteOnly,
		PlacesPerIP: s.PlacesPerIP,
	}
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
	code, serving := res.int(0), res.int(1)
	if res.err != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(res.err))
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

// UpdateTokenStatus ends a visitor's session: status 1 COMPLETED, 2 ABANDONED (seed 004).
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
	if !config.ID.MatchString(id) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "queue_id"))
		return
	}
	s := r.snapshotOf(req.Context(), id)
	if s == nil {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
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
	if !config.ID.MatchString(id) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "queue_id"))
		return
	}
	s := r.fresh(req.Context(), id)
	if s == nil {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
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
