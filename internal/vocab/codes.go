package vocab

import (
	"net/http"
	"slices"
)

// Code is an error code edgeq answers with and its HTTP status. internal/web gives each code its
// message and answers with it; internal/config renders a route's refusal template with every one.
type Code struct {
	Status int
	Name   string
}

// codes is every Code, in the order they are made: those declared below, then those of the
// admission kinds (NewCode, from their init).
var codes []Code

func code(status int, name string) Code { return NewCode(status, name) }

// NewCode makes a code edgeq answers with: the ones below, and each admission kind's own, made once
// from the kind's files. A name made twice panics: a code has one definition.
func NewCode(status int, name string) Code {
	if slices.ContainsFunc(codes, func(c Code) bool { return c.Name == name }) {
		panic("vocab: the code " + name + " is made twice")
	}
	c := Code{Status: status, Name: name}
	codes = append(codes, c)
	return c
}

// Codes returns every code edgeq answers with, in the order they were made.
func Codes() []Code { return slices.Clone(codes) }

// Every code edgeq answers with and its status, in one list (docs/reference.md "Errors"). A code whose
// status differs in one situation (QUEUE_NOT_FOUND as a page: 404) keeps this status here; the
// variant is derived where it is answered (internal/web).
var (
	// Requests edgeq cannot read.
	InvalidRequest   = code(http.StatusBadRequest, "INVALID_REQUEST")
	UnsupportedMedia = code(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE")
	PayloadTooLarge  = code(http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
	NotFound         = code(http.StatusNotFound, "NOT_FOUND")
	MethodNotAllowed = code(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")

	// The store, the origin, edgeq itself.
	StoreUnavailable  = code(http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
	OriginUnavailable = code(http.StatusBadGateway, "ORIGIN_UNAVAILABLE")
	OriginTimeout     = code(http.StatusGatewayTimeout, "ORIGIN_TIMEOUT")
	Internal          = code(http.StatusInternalServerError, "INTERNAL")
	Busy              = code(http.StatusServiceUnavailable, "BUSY")
	GateUnavailable   = code(http.StatusServiceUnavailable, "GATE_UNAVAILABLE")

	// The waiting room.
	QueueNotFound   = code(http.StatusBadRequest, "QUEUE_NOT_FOUND")
	RequestNotFound = code(http.StatusNotFound, "REQUEST_NOT_FOUND")
	Expired         = code(http.StatusGone, "EXPIRED")
	NotYetServed    = code(http.StatusAccepted, "NOT_YET_SERVED")
	RateLimited     = code(http.StatusTooManyRequests, "RATE_LIMITED")
	TooManyPlaces   = code(http.StatusTooManyRequests, "TOO_MANY_PLACES")
	QueueRequired   = code(http.StatusForbidden, "QUEUE_REQUIRED")
	CrossSite       = code(http.StatusForbidden, "CROSS_SITE_REQUEST")
	NotOpen         = code(http.StatusForbidden, "QUEUE_NOT_OPEN")
	SoldOut         = code(http.StatusGone, "SOLD_OUT")
	QueueClosed     = code(http.StatusGone, "QUEUE_CLOSED")
	InviteRequired  = code(http.StatusForbidden, "INVITE_REQUIRED")
	InviteNotFound  = code(http.StatusNotFound, "INVITE_NOT_FOUND")
	InviteUsed      = code(http.StatusGone, "INVITE_USED")
	InviteExpired   = code(http.StatusGone, "INVITE_EXPIRED")

	// Turnstile.
	TurnstileRequired = code(http.StatusForbidden, "TURNSTILE_REQUIRED")
	InvalidTurnstile  = code(http.StatusForbidden, "INVALID_TURNSTILE_TOKEN")

	// GraphQL routes.
	OperationRefused       = code(http.StatusForbidden, "OPERATION_REFUSED")
	PersistedQueryNotFound = code(http.StatusOK, "PERSISTED_QUERY_NOT_FOUND")

	// The admin API.
	Misdirected     = code(http.StatusMisdirectedRequest, "MISDIRECTED_REQUEST")
	Unauthorized    = code(http.StatusUnauthorized, "UNAUTHORIZED")
	Forbidden       = code(http.StatusForbidden, "FORBIDDEN")
	QueueExists     = code(http.StatusConflict, "QUEUE_EXISTS")
	NotServed       = code(http.StatusConflict, "NOT_SERVED")
	AlreadyFinished = code(http.StatusConflict, "ALREADY_FINISHED")
	RetryFailed     = code(http.StatusConflict, "RETRY_FAILED")
)

// RefusalFields returns every JSON field a refusal can carry: the keys internal/web's Error.With is
// given across edgeq, which a route's refusal template may read (internal/config renders it with each).
func RefusalFields() []string { return slices.Clone(refusalFields) }

var refusalFields = []string{
	"ahead", "error", "estimated_wait_time", "field", "highest_amount", "join_url", "joins_from", "opens_at",
	"opens_in", "per_user_limit", "problems", "queue_id", "queue_position", "queue_status", "remaining_stock",
	"request_id", "serving_pos", "serving_position", "starting_price", "state", "wait_url",
}
