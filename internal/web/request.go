package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"text/template"
	"time"
)

// Request is what edgeq knows about the request being served; the proxy builds it first thing and every
// handler below reads it from the context.
type Request struct {
	CorrelationID string
	ClientIP      netip.Addr // after trusted-proxy processing of X-Forwarded-For
	Secure        bool       // the client's connection was HTTPS (directly, or per a trusted proxy)
	Route         string     // metrics label of the matched route
	// TurnstileAt is when the visitor passed a Turnstile check, as carried by a valid access token
	// (its tsv claim); zero if unknown. The queue step sets it for the Turnstile step.
	TurnstileAt time.Time
	// QueueRequestID is the queue request id of the visitor's valid access token, set by the queue
	// step: admissions with user "token" identify the visitor by it.
	QueueRequestID string
	// VisitorID is the browser's (or API client's) visitor id, from an edgeq_vid cookie or an
	// Edgeq-Visitor header that edgeq signed; "" when the request has none (or visitor ids are off: no
	// route uses them). Admissions with user "visitor" identify the buyer by it.
	VisitorID string
	// ClaimedRequestID is the Edgeq-Request-Id header the client sent: an API client naming its place
	// in line. The header itself is removed like every client-sent Edgeq-* header.
	ClaimedRequestID string
	// ClaimedToken is the Edgeq-Token header the client sent: an app handing edgeq its access token
	// beside the shop's own Authorization header, which then reaches the shop untouched. Like
	// ClaimedRequestID it is set only for exactly one value of bounded length, and the header itself
	// is removed like every client-sent Edgeq-* header.
	ClaimedToken string
	// Store is what steps do when the store cannot be used (on_store_error), decided by the proxy.
	Store StorePolicy
	// Refusal is the matched route's refusal.json template (nil: the standard error body).
	Refusal *template.Template
	// RefusalStatus is the matched route's refusal.status: the status of its 4xx refusals (0: their own).
	RefusalStatus int
	// GraphQL: the matched route is a graphql: route, whose refusals default to a GraphQL-shaped body.
	GraphQL bool
	// CredentialAdded: edgeq put a credential on the answer (one of its cookies, an Edgeq-Token
	// header), so no cache in front may keep the answer: the proxy makes it private, no-store
	// whatever the shop said (docs/reference.md "Proxying").
	CredentialAdded bool
	// Code is the error code edgeq answered the request with (Responder.Error), "" while none.
	Code string
	// TraceID is the request's trace id (32 hex digits) while it is traced and sampled, for the
	// access log and the latency histograms' exemplars; "" otherwise (tracing off, or not sampled).
	TraceID string

	base         *slog.Logger
	logger       *slog.Logger
	outcome      *Outcome // nil unless TrackOutcome was called
	outcomeValue Outcome
}

// NewRequest starts the information of a request whose log lines go to base.
func NewRequest(base *slog.Logger, correlationID string) *Request {
	return &Request{CorrelationID: correlationID, base: base}
}

// Logger returns a logger whose lines carry the correlation id. It is built on first use: most
// requests log nothing but their access line, which adds the id itself.
func (r *Request) Logger() *slog.Logger {
	if r.logger == nil {
		if r.base == nil {
			r.base = slog.Default()
		}
		r.logger = r.base.With("correlation_id", r.CorrelationID)
	}
	return r.logger
}

type requestKey struct{}

// WithRequest stores r in ctx.
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the request information in ctx, or a usable empty one.
func RequestFrom(ctx context.Context) *Request {
	if r, ok := ctx.Value(requestKey{}).(*Request); ok {
		return r
	}
	return &Request{base: slog.Default()}
}

// CorrelationHeader carries the id that ties a request's log lines on edgeq and the origin together.
const CorrelationHeader = "X-Correlation-ID"

var correlationKey = http.CanonicalHeaderKey(CorrelationHeader)

// CorrelationID returns the client's X-Correlation-ID when it is sane (1-128 characters of letters,
// digits and . _ : -), else a new random one. Anything else could inject into logs or headers.
func CorrelationID(h http.Header) string {
	// The header's canonical key, looked up directly: Header.Get would build "X-Correlation-Id" from
	// CorrelationHeader on every request.
	if ids := h[correlationKey]; len(ids) > 0 && saneID(ids[0]) {
		return ids[0]
	}
	var b [16]byte
	var out [32]byte
	rand.Read(b[:])
	hex.Encode(out[:], b[:])
	return string(out[:]) // one allocation (hex.EncodeToString makes two)
}

func saneID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
