package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
)

// Every error code edgeq answers with (its name and status: internal/vocab) and the message API
// clients read, in one list (docs/reference.md "Errors" and each step's section). Browser navigations get a page whose text comes
// from the page language files (templates: "msg.CODE", "head.CODE"), so the messages here are the
// English of the JSON body. A code has one definition; a step adds detail with With (JSON fields such
// as "field") and Because (the cause, for the log only). Where one code carries a more precise message
// for one situation, the variant is derived here from the code's definition, so status and code cannot
// drift.
var (
	// Requests edgeq cannot read.
	ErrInvalidRequest   = code(vocab.InvalidRequest, "The request is missing a field or has a malformed one.")
	ErrUnsupportedMedia = code(vocab.UnsupportedMedia, "The request body is not of the expected type.")
	ErrPayloadTooLarge  = code(vocab.PayloadTooLarge, "The request body is too large.")
	ErrNotFound         = code(vocab.NotFound, "There is nothing at this address.")
	ErrMethodNotAllowed = code(vocab.MethodNotAllowed, "This address does not accept that method.")

	// Variants of INVALID_REQUEST.
	ErrInvalidBody   = ErrInvalidRequest.saying("The request body could not be read.")
	ErrInvalidJSON   = ErrInvalidRequest.saying("The JSON body is malformed, has unknown fields or wrong types.")
	ErrMalformedBody = ErrInvalidRequest.saying("The request body is malformed or ended early.")
	// ErrAmbiguousField refuses a request that gives a field more than once: edgeq and the origin
	// could read different copies (Go takes the first form value, PHP and Rails the last).
	ErrAmbiguousField = ErrInvalidRequest.saying("The request gives a field more than once.")
	// ErrAmbiguousID refuses a product or auction id that the shop may read as a guarded id spelled
	// otherwise ("042", "SNEAKER-A"), where the route's admission.id_match does not make it that id.
	ErrAmbiguousID = ErrInvalidRequest.saying("The shop may read this id as another one: send the id as it is listed.")
	// ErrFieldInQuery and ErrFieldInBody refuse a field in the other place than the one edgeq reads it
	// from, whether or not that place has it too: frameworks that merge the two (PHP's $_REQUEST, Go's
	// FormValue) would read a value edgeq did not check.
	ErrFieldInQuery = ErrInvalidRequest.saying("This field belongs in the request body, not in the query string.")
	ErrFieldInBody  = ErrInvalidRequest.saying("This field belongs in the query string, not in the request body.")
	// ErrNotAPageLoad refuses a place in line to a load of the waiting page that is not a visitor
	// opening it (an <img>, <iframe> or fetch from another site, a prefetch).
	ErrNotAPageLoad = ErrInvalidRequest.saying("A place in line is taken by opening the waiting page.")
	// ErrNoVisitor refuses an admission identified by visitor id (user: visitor) to a request that
	// carries none edgeq signed: a client that never loaded a page, or an API client that did not keep
	// the Edgeq-Visitor header.
	ErrNoVisitor = ErrInvalidRequest.saying("This request names no visitor: load one of the shop's pages first, or send the Edgeq-Visitor header edgeq gave you.")

	// The store, the origin, edgeq itself.
	ErrStoreUnavailable  = code(vocab.StoreUnavailable, "This is briefly unavailable. Please try again in a moment.").retryAfter(5 * time.Second)
	ErrOriginUnavailable = code(vocab.OriginUnavailable, "The shop is not answering right now. Please try again in a moment.")
	ErrOriginTimeout     = code(vocab.OriginTimeout, "The shop took too long to answer. Please try again in a moment.")
	ErrInternal          = code(vocab.Internal, "Something went wrong on our side.")
	// ErrNoOriginServer: no server of the request's pool is up, so none is tried: answered at once
	// rather than after a connect timeout (docs/reference.md "Pools of shop servers").
	ErrNoOriginServer = ErrOriginUnavailable.status(http.StatusServiceUnavailable).retryAfter(5 * time.Second)
	// ErrBusy: the route's max_in_flight requests are at the shop and this one's hold ran out while it
	// waited for a slot (docs/reference.md "In-flight limits"); nothing was sent to the shop. Browsers
	// get the busy page, which tries again by itself after Retry-After.
	ErrBusy            = code(vocab.Busy, "The shop is busy with other requests right now. Please try again in a moment.").retryAfter(5 * time.Second)
	ErrGateUnavailable = code(vocab.GateUnavailable, "This page is protected by a check that is not available right now.")
	// ErrTurnstileMissing: a queue asks for Turnstile but no keys are configured (refused at start;
	// kept for queues created through the admin API).
	ErrTurnstileMissing = ErrGateUnavailable.saying("This queue requires a Turnstile check, but Turnstile is not configured.")

	// The waiting room (docs/reference.md "Waiting room").
	ErrQueueNotFound = code(vocab.QueueNotFound, "There is no such queue.")
	// ErrWaitingRoomNotFound is QUEUE_NOT_FOUND as a page a visitor opens answers it (the waiting page,
	// an invitation link): 404, there is nothing at that address.
	ErrWaitingRoomNotFound = ErrQueueNotFound.status(http.StatusNotFound).saying("There is no such waiting room.")
	ErrRequestNotFound     = code(vocab.RequestNotFound, "This place in the queue is unknown.")
	ErrExpired             = code(vocab.Expired, "This place in the queue is no longer valid. Please join the queue again.")
	ErrNotYetServed        = code(vocab.NotYetServed, "Your turn has not come yet.")
	ErrRateLimited         = code(vocab.RateLimited, "Too many requests from your network. Please wait a moment.")
	// ErrTooManyPlaces: the client's address holds queues[].places_per_ip unserved places in the queue
	// already; nothing was taken.
	ErrTooManyPlaces = code(vocab.TooManyPlaces, "Your network already holds as many places in this line as one network may. Please wait for your turn.")
	ErrQueueRequired = code(vocab.QueueRequired, "This page needs a place in the waiting room first.")
	// ErrCrossSite refuses a join (or a token, or a Turnstile check) that a browser sent for another
	// site's page (CrossSite): a no-cors fetch or a hidden form elsewhere would otherwise take places
	// in line from each of that site's visitors.
	ErrCrossSite = code(vocab.CrossSite, "A place in line is taken from the shop's own pages, not from another site.")
	// A scheduled drop (docs/operations.md "Running a drop"): before its pre-queue opens nobody takes a
	// place; once every product of sold_out_with is gone, or after closes_at (or with method reject),
	// nobody new joins.
	ErrNotOpen     = code(vocab.NotOpen, "This sale has not opened yet. Please come back at the opening time.")
	ErrSoldOut     = code(vocab.SoldOut, "Sorry, everything in this sale is sold out.")
	ErrQueueClosed = code(vocab.QueueClosed, "This waiting room is closed: it takes no new visitors.")
	// Invitations (docs/reference.md "Waiting room"): an invite_only queue takes only visitors with one;
	// a code works once.
	ErrInviteRequired = code(vocab.InviteRequired, "This waiting room is by invitation only. Please open the link in your invitation.")
	ErrInviteNotFound = code(vocab.InviteNotFound, "This invitation link is not valid. Please check that it was copied whole.")
	ErrInviteUsed     = code(vocab.InviteUsed, "This invitation has been used already: each invitation works once.")
	ErrInviteExpired  = code(vocab.InviteExpired, "This invitation has expired.")

	// Turnstile (docs/reference.md "Turnstile").
	ErrTurnstileRequired = code(vocab.TurnstileRequired, "A Turnstile check is required: send a cf-turnstile-response field or CF-Turnstile-Response header.")
	ErrInvalidTurnstile  = code(vocab.InvalidTurnstile, "The Turnstile check did not succeed.")
	// ErrCrossSiteCheck: the challenge page's form was posted from another site.
	ErrCrossSiteCheck = ErrCrossSite.saying("A Turnstile check is sent from the shop's own pages, not from another site.")

	// GraphQL routes (docs/reference.md "GraphQL routes"). ErrOperationRefused: the operation selects a
	// root field the route lists in refuse_fields (one that changes a guarded quantity without naming the
	// product). ErrPersistedQueryNotFound: a request names a persisted query by hash that edgeq has not
	// seen; the answer is the one automatic persisted query clients resend the document on (200, the
	// message "PersistedQueryNotFound").
	ErrOperationRefused       = code(vocab.OperationRefused, "This operation is not accepted here during the sale.")
	ErrPersistedQueryNotFound = code(vocab.PersistedQueryNotFound, "PersistedQueryNotFound")

	// The admin API (docs/reference.md "Admin listener").
	// ErrMisdirected: the admin listener was asked for a Host it does not answer to (not an IP literal,
	// localhost or one of admin.allowed_hosts): a DNS rebinding page's request. On the public listener:
	// every route names a host, and none this one (docs/reference.md "Several sites").
	ErrMisdirected  = code(vocab.Misdirected, "This address does not serve that host name.")
	ErrUnauthorized = code(vocab.Unauthorized, "A valid admin API key is required.")
	// ErrNotFromDashboard: a change made with the dashboard's Basic credentials must come from the
	// dashboard itself (its X-Edgeq-Dashboard header), a CSRF guard.
	ErrNotFromDashboard   = code(vocab.Forbidden, "A change made with Basic credentials must come from the dashboard (X-Edgeq-Dashboard header).")
	ErrQueueExists        = code(vocab.QueueExists, "A queue with this id exists.")
	ErrQueueNotFoundAdmin = ErrQueueNotFound.status(http.StatusNotFound) // the admin API answers 404 (section 7)
	// ErrNotOpenAdmin: increment_serving_position before opens_at; nobody is served before it.
	ErrNotOpenAdmin        = ErrNotOpen.status(http.StatusConflict).saying("The queue has not opened: nobody is served before opens_at. Move opens_at to open it now.")
	ErrNotServed           = code(vocab.NotServed, "A waiting visitor cannot complete: it has not been served.")
	ErrAlreadyFinished     = code(vocab.AlreadyFinished, "This visitor's session is already over.")
	ErrDeadLetterNotFound  = ErrNotFound.saying("There is no such dead letter.")
	ErrDeadLetterRetryFail = code(vocab.RetryFailed, "The event failed again; it stays in the dead-letter set.")
)

// ErrDegraded is the cause logged for requests refused because the store counts as unavailable
// (store_health), before any store call was tried.
var ErrDegraded = errors.New("store degraded (store_health)")

// code is the Error of c (its name and status: internal/vocab) with the message API clients read.
func code(c vocab.Code, message string) *Error { return NewError(c, message) }

// NewError is the Error of c with the message API clients read: how an admission kind defines its
// own refusals (with vocab.NewCode), beside the ones above.
func NewError(c vocab.Code, message string) *Error {
	return &Error{Status: c.Status, Code: c.Name, Message: message}
}

// WithRetryAfter is e telling the client to come back after d (Retry-After; at least a second).
func (e *Error) WithRetryAfter(d time.Duration) *Error { return e.retryAfter(max(d, time.Second)) }

// saying is e with a more precise message for one situation.
func (e *Error) saying(message string) *Error {
	c := *e
	c.Message = message
	return &c
}

func (e *Error) status(status int) *Error {
	c := *e
	c.Status = status
	return &c
}

// RateLimited is 429 RATE_LIMITED telling the client to come back after retry (Retry-After).
func RateLimited(retry time.Duration) *Error { return ErrRateLimited.retryAfter(retry) }

func (e *Error) retryAfter(d time.Duration) *Error {
	c := *e
	c.RetryAfter = d
	return &c
}
