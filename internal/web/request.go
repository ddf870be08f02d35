package web

import (
	"context"
	"log/slog"
	"net/netip"
)

// Request is what edgeq knows about the request being served; the proxy builds it first thing and every
// handler below reads it from the context.
type Request struct {
	CorrelationID string
	ClientIP      netip.Addr // after trusted-proxy processing of X-Forwarded-For
	Secure        bool       // the client's connection was HTTPS (directly, or per a trusted proxy)
	Route         string     // metrics label of the matched route
	Logger        *slog.Logger
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
	return &Request{Logger: slog.Default()}
}
