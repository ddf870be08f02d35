package waitroom

// A queue's settings in the admin API's two shapes and the conversions between them: the body of
// POST/PUT /api/queue (queueRequest), merged over the stored settings of a new queue or of a live
// one and validated with the configuration file's rules (toSettings), and the queue as the API shows
// it (QueueInfo: settings, state and live counters, from a snapshot).

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

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
	GoneAfterSecond           *int64  `json:"gone_after_second"`
	Turnstile                 *bool   `json:"turnstile"`
	Paused                    *bool   `json:"paused"`
	// A drop (docs/operations.md "Running a drop"): opens_at and closes_at RFC 3339 ("" none).
	OpensAt        *string   `json:"opens_at"`
	PrequeueSecond *int64    `json:"prequeue_second"`
	Shuffle        *bool     `json:"shuffle"`
	ClosesAt       *string   `json:"closes_at"`
	Method         *string   `json:"method"`
	SoldOutWith    *[]string `json:"sold_out_with"`
	// Sessions and invitations (docs/operations.md "Sessions, invitations and staff").
	SessionRenewal   *bool  `json:"session_renewal"`
	MaxSessionSecond *int64 `json:"max_session_second"`
	InviteOnly       *bool  `json:"invite_only"`
	// PlacesPerIP: 0 no limit; lowering it takes no place away.
	PlacesPerIP *int64 `json:"places_per_ip"`
}

// QueueInfo is a queue as the admin API shows it (docs/reference.md "Admin queue API"): its fields,
// edgeq's settings and live counters.
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
	GoneAfterSecond           int64    `json:"gone_after_second"`
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
	// Sessions and invitations (docs/operations.md "Sessions, invitations and staff").
	SessionRenewal   bool        `json:"session_renewal"`
	MaxSessionSecond int64       `json:"max_session_second"`
	InviteOnly       bool        `json:"invite_only"`
	Invites          InviteCount `json:"invites"`
	// PlacesPerIP is the unserved places one client address may hold; 0 no limit.
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
	return vocab.FormatTime(t)
}

func (r *Room) info(id string, s *snapshot) QueueInfo {
	_, fromConfig := (*r.configured.Load())[id]
	return QueueInfo{
		ID: id, QueueID: id, Title: s.Title, Capacity: s.Capacity, ReleasePerMinute: s.ReleasePerMinute,
		TokenValiditySecond: int64(s.TokenTTL / time.Second), EnableQueuePositionExpiry: s.PositionExpiry > 0,
		PositionExpirySecond: int64(s.PositionExpiry / time.Second), AbandonAfterSecond: int64(s.AbandonAfter / time.Second),
		GoneAfterSecond: int64(s.GoneAfter / time.Second), Turnstile: s.Turnstile, Paused: s.Paused, FromConfig: fromConfig, ServingPos: s.Serving, AssignedPos: s.Counter,
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
	set(&s.GoneAfter, q.GoneAfterSecond)
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
		AbandonAfter: time.Duration(s.AbandonAfter) * time.Second, GoneAfter: time.Duration(s.GoneAfter) * time.Second,
		Turnstile: s.Turnstile, OpensAt: formatTime(msTime(s.OpensAt)), ClosesAt: formatTime(msTime(s.ClosesAt)),
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

func settingsOfSnapshot(id string, s *snapshot) settings {
	return settings{
		ID: id, Title: s.Title, Capacity: s.Capacity, ReleasePerMinute: s.ReleasePerMinute,
		TokenTTL: int64(s.TokenTTL / time.Second), PositionExpiry: int64(s.PositionExpiry / time.Second),
		AbandonAfter: int64(s.AbandonAfter / time.Second), GoneAfter: int64(s.GoneAfter / time.Second), Turnstile: s.Turnstile,
		OpensAt: unixMs(s.OpensAt), ClosesAt: unixMs(s.ClosesAt), Prequeue: prequeueOf(s), Shuffle: s.Shuffle,
		Method: s.Method, SoldOutWith: s.SoldOutWith,
		SessionRenewal: s.SessionRenewal, MaxSession: int64(s.MaxSession / time.Second), InviteOnly: s.InviteOnly,
		PlacesPerIP: s.PlacesPerIP,
	}
}
