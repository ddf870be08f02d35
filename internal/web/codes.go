package web

import (
	"errors"
	"net/http"
	"time"
)

// Every error code edgeq answers with, its status and the message API clients read, in one list
// (docs/reference.md "Errors" and each step's section). Browser navigations get a page whose text comes
// from the page language files (templates: "msg.CODE", "head.CODE"), so the messages here are the
// English of the JSON body. A code has one definition; a step adds detail with With (JSON fields such
// as "field") and Because (the cause, for the log only). Where one code carries a more precise message
// for one situation, the variant is derived here from the code's definition, so status and code cannot
// drift.
var (
	// Requests edgeq cannot read.
	ErrInvalidRequest   = code(http.StatusBadRequest, "INVALID_REQUEST", "The request is missing a field or has a malformed one.")
	ErrUnsupportedMedia = code(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "The request body is not of the expected type.")
	ErrPayloadTooLarge  = code(http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "The request body is too large.")
	ErrNotFound         = code(http.StatusNotFound, "NOT_FOUND", "There is nothing at this address.")
	ErrMethodNotAllowed = code(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "This address does not accept that method.")

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
	ErrStoreUnavailable  = code(http.StatusServiceUnavailable, "STORE_UNAVAILABLE", "This is briefly unavailable. Please try again in a moment.").retryAfter(5 * time.Second)
	ErrOriginUnavailable = code(http.StatusBadGateway, "ORIGIN_UNAVAILABLE", "The shop is not answering right now. Please try again in a moment.")
	ErrOriginTimeout     = code(http.StatusGatewayTimeout, "ORIGIN_TIMEOUT", "The shop took too long to answer. Please try again in a moment.")
	ErrInternal          = code(http.StatusInternalServerError, "INTERNAL", "Something went wrong on our side.")
	// ErrNoOriginServer: no server of the request's pool is up, so none is tried: answered at once
	// rather than after a connect timeout (docs/reference.md "Pools of shop servers").
	ErrNoOriginServer = ErrOriginUnavailable.status(http.StatusServiceUnavailable).retryAfter(5 * time.Second)
	// ErrBusy: the route's max_in_flight requests are at the shop and this one's hold ran out while it
	// waited for a slot (docs/reference.md "In-flight limits"); nothing was sent to the shop. Browsers
	// get the busy page, which tries again by itself after Retry-After.
	ErrBusy            = code(http.StatusServiceUnavailable, "BUSY", "The shop is busy with other requests right now. Please try again in a moment.").retryAfter(5 * time.Second)
	ErrGateUnavailable = code(http.StatusServiceUnavailable, "GATE_UNAVAILABLE", "This page is protected by a check that is not available right now.")
	// ErrTurnstileMissing: a queue asks for Turnstile but no keys are configured (refused at start;
	// kept for queues created through the admin API).
	ErrTurnstileMissing = ErrGateUnavailable.saying("This queue requires a Turnstile check, but Turnstile is not configured.")

	// The waiting room (docs/reference.md "Waiting room").
	ErrQueueNotFound = code(http.StatusBadRequest, "QUEUE_NOT_FOUND", "There is no such queue.")
	// ErrWaitingRoomNotFound is QUEUE_NOT_FOUND as a page a visitor opens answers it (the waiting page,
	// an invitation link): 404, there is nothing at that address.
	ErrWaitingRoomNotFound = ErrQueueNotFound.status(http.StatusNotFound).saying("There is no such waiting room.")
	ErrRequestNotFound     = code(http.StatusNotFound, "REQUEST_NOT_FOUND", "This place in the queue is unknown.")
	ErrExpired             = code(http.StatusGone, "EXPIRED", "This place in the queue is no longer valid. Please join the queue again.")
	ErrNotYetServed        = code(http.StatusAccepted, "NOT_YET_SERVED", "Your turn has not come yet.")
	ErrRateLimited         = code(http.StatusTooManyRequests, "RATE_LIMITED", "Too many requests from your network. Please wait a moment.")
	// ErrTooManyPlaces: the client's address holds queues[].places_per_ip unserved places in the queue
	// already; nothing was taken.
	ErrTooManyPlaces = code(http.StatusTooManyRequests, "TOO_MANY_PLACES", "Your network already holds as many places in this line as one network may. Please wait for your turn.")
	ErrQueueRequired = code(http.StatusForbidden, "QUEUE_REQUIRED", "This page needs a place in the waiting room first.")
	// ErrCrossSite refuses a join (or a token, or a Turnstile check) that a browser sent for another
	// site's page (CrossSite): a no-cors fetch or a hidden form elsewhere would otherwise take places
	// in line from each of that site's visitors.
	ErrCrossSite = code(http.StatusForbidden, "CROSS_SITE_REQUEST", "A place in line is taken from the shop's own pages, not from another site.")
	// A scheduled drop (docs/operations.md "Running a drop"): before its pre-queue opens nobody takes a
	// place; once every product of sold_out_with is gone, or after closes_at (or with method reject),
	// nobody new joins.
	ErrNotOpen     = code(http.StatusForbidden, "QUEUE_NOT_OPEN", "This sale has not opened yet. Please come back at the opening time.")
	ErrSoldOut     = code(http.StatusGone, "SOLD_OUT", "Sorry, everything in this sale is sold out.")
	ErrQueueClosed = code(http.StatusGone, "QUEUE_CLOSED", "This waiting room is closed: it takes no new visitors.")
	// Invitations (docs/reference.md "Waiting room"): an invite_only queue takes only visitors with one;
	// a code works once.
	ErrInviteRequired = code(http.StatusForbidden, "INVITE_REQUIRED", "This waiting room is by invitation only. Please open the link in your invitation.")
	ErrInviteNotFound = code(http.StatusNotFound, "INVITE_NOT_FOUND", "This invitation link is not valid. Please check that it was copied whole.")
	ErrInviteUsed     = code(http.StatusGone, "INVITE_USED", "This invitation has been used already: each invitation works once.")
	ErrInviteExpired  = code(http.StatusGone, "INVITE_EXPIRED", "This invitation has expired.")

	// Turnstile (docs/reference.md "Turnstile").
	ErrTurnstileRequired = code(http.StatusForbidden, "TURNSTILE_REQUIRED", "A Turnstile check is required: send a cf-turnstile-response field or CF-Turnstile-Response header.")
	ErrInvalidTurnstile  = code(http.StatusForbidden, "INVALID_TURNSTILE_TOKEN", "The Turnstile check did not succeed.")
	// ErrCrossSiteCheck: the challenge page's form was posted from another site.
	ErrCrossSiteCheck = ErrCrossSite.saying("A Turnstile check is sent from the shop's own pages, not from another site.")

	// Stock admission (docs/reference.md "Stock admission").
	ErrInsufficientStock  = code(http.StatusConflict, "INSUFFICIENT_STOCK", "Sorry, this item is sold out.")
	ErrProductNotFound    = code(http.StatusNotFound, "PRODUCT_NOT_FOUND", "There is no such product.")
	ErrPurchaseInProgress = code(http.StatusConflict, "PURCHASE_IN_PROGRESS", "Another purchase of yours is being processed. Please wait for it to finish.")
	ErrAlreadyPurchased   = code(http.StatusConflict, "ALREADY_PURCHASED", "You have already bought as many of this item as one person may.")

	// Bid admission (docs/reference.md "Bid admission").
	ErrAuctionNotFound = code(http.StatusNotFound, "AUCTION_NOT_FOUND", "There is no such auction.")
	ErrAuctionEnded    = code(http.StatusConflict, "AUCTION_ENDED", "This auction has ended.")
	ErrSelfBid         = code(http.StatusForbidden, "SELF_BID", "You cannot bid on your own auction.")
	ErrInvalidBid      = code(http.StatusBadRequest, "INVALID_BID", "A bid is a positive amount with at most two decimals, at least the starting price.")
	ErrBidTooLow       = code(http.StatusConflict, "BID_TOO_LOW", "Your bid must beat the highest bid by at least the minimum increment.")
	// ErrAuctionsSourceUnavailable: a bid names an auction edgeq does not know, and the shop could not
	// be asked about it (auctions_source failing, or its circuit breaker open). Nothing
	// was taken and the shop's bid endpoint was not called. AuctionsSourceUnavailable sets Retry-After.
	ErrAuctionsSourceUnavailable = code(http.StatusServiceUnavailable, "AUCTIONS_SOURCE_UNAVAILABLE", "This auction's details cannot be fetched from the shop right now. Please try again in a moment.").retryAfter(time.Second)

	// GraphQL routes (docs/reference.md "GraphQL routes"). ErrOperationRefused: the operation selects a
	// root field the route lists in refuse_fields (one that changes a guarded quantity without naming the
	// product). ErrPersistedQueryNotFound: a request names a persisted query by hash that edgeq has not
	// seen; the answer is the one automatic persisted query clients resend the document on (200, the
	// message "PersistedQueryNotFound").
	ErrOperationRefused       = code(http.StatusForbidden, "OPERATION_REFUSED", "This operation is not accepted here during the sale.")
	ErrPersistedQueryNotFound = code(http.StatusOK, "PERSISTED_QUERY_NOT_FOUND", "PersistedQueryNotFound")

	// The admin API (docs/reference.md "Admin listener").
	// ErrMisdirected: the admin listener was asked for a Host it does not answer to (not an IP literal,
	// localhost or one of admin.allowed_hosts): a DNS rebinding page's request. On the public listener:
	// every route names a host, and none this one (docs/reference.md "Several sites").
	ErrMisdirected  = code(http.StatusMisdirectedRequest, "MISDIRECTED_REQUEST", "This address does not serve that host name.")
	ErrUnauthorized = code(http.StatusUnauthorized, "UNAUTHORIZED", "A valid admin API key is required.")
	// ErrNotFromDashboard: a change made with the dashboard's Basic credentials must come from the
	// dashboard itself (its X-Edgeq-Dashboard header), a CSRF guard.
	ErrNotFromDashboard   = code(http.StatusForbidden, "FORBIDDEN", "A change made with Basic credentials must come from the dashboard (X-Edgeq-Dashboard header).")
	ErrQueueExists        = code(http.StatusConflict, "QUEUE_EXISTS", "A queue with this id exists.")
	ErrQueueNotFoundAdmin = ErrQueueNotFound.status(http.StatusNotFound) // the admin API answers 404 (section 7)
	// ErrNotOpenAdmin: increment_serving_position before opens_at; nobody is served before it.
	ErrNotOpenAdmin        = ErrNotOpen.status(http.StatusConflict).saying("The queue has not opened: nobody is served before opens_at. Move opens_at to open it now.")
	ErrNotServed           = code(http.StatusConflict, "NOT_SERVED", "A waiting visitor cannot complete: it has not been served.")
	ErrAlreadyFinished     = code(http.StatusConflict, "ALREADY_FINISHED", "This visitor's session is already over.")
	ErrProductExists       = code(http.StatusConflict, "PRODUCT_EXISTS", "A product with this id exists.")
	ErrAdmissionNotFound   = code(http.StatusNotFound, "ADMISSION_NOT_FOUND", "There is no such admission.")
	ErrAlreadyGivenBack    = code(http.StatusConflict, "ALREADY_GIVEN_BACK", "This admission's units were given back already: it was released or cancelled.")
	ErrDeadLetterNotFound  = ErrNotFound.saying("There is no such dead letter.")
	ErrDeadLetterRetryFail = code(http.StatusConflict, "RETRY_FAILED", "The event failed again; it stays in the dead-letter set.")
)

// ErrDegraded is the cause logged for requests refused because the store counts as unavailable
// (store_health), before any store call was tried.
var ErrDegraded = errors.New("store degraded (store_health)")

func code(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

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

// AuctionsSourceUnavailable is 503 AUCTIONS_SOURCE_UNAVAILABLE telling the client to come back after
// retry (Retry-After; at least a second).
func AuctionsSourceUnavailable(retry time.Duration) *Error {
	return ErrAuctionsSourceUnavailable.retryAfter(max(retry, time.Second))
}

func (e *Error) retryAfter(d time.Duration) *Error {
	c := *e
	c.RetryAfter = d
	return &c
}
