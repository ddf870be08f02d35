package waitroom

// Where edgeq reads a visitor's access token, and what of the visitor's credentials reaches the shop
// (docs/reference.md "The queue gate"): edgeq's token in its cookie, an Edgeq-Token request header, or
// Authorization: Bearer only when that is an edgeq token; every other Authorization value is the
// shop's.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
)

// tokenSource is where a request's valid token came from, and so where its renewal goes.
type tokenSource int

const (
	fromCookie      tokenSource = iota // the queue's token cookie
	fromTokenHeader                    // the Edgeq-Token request header (web.Request.ClaimedToken)
	fromBearer                         // Authorization: Bearer, holding an edgeq token
)

// validToken finds the request's token for queueID and checks it: signature, claims, audience, the
// request id inside it, and revocation. The token is taken from, in this order, the queue's cookie,
// the Edgeq-Token request header, and Authorization: Bearer only when that holds an edgeq token
// (token.Verifier.Ours): any other Authorization is the shop's, and is neither
// checked nor remembered by edgeq. from says where the valid one came from.
func (r *Room) validToken(ctx context.Context, req *http.Request, queueID, tokenCookie string) (_ *snapshot, _ token.Claims, from tokenSource, ok bool) {
	s := r.snapshotOf(ctx, queueID)
	if s == nil {
		return nil, token.Claims{}, 0, false
	}
	check := func(raw string) (token.Claims, bool) {
		c, err := r.opts.Verifier.Verify(raw, queueID)
		if err != nil {
			return c, false
		}
		// The request id binds the token to this incarnation of the queue and to its position.
		pos, ok := r.positionOf(queueID, s, c.RequestID)
		if !ok || pos != c.Position || r.isRevoked(queueID, s.Epoch, pos) {
			return c, false
		}
		if c.TurnstileAt > 0 {
			web.RequestFrom(ctx).TurnstileAt = time.Unix(c.TurnstileAt, 0)
		}
		return c, true
	}
	if raw, found := web.CookieValue(req.Header, tokenCookie); found {
		if c, ok := check(raw); ok {
			return s, c, fromCookie, true
		}
	}
	if raw := web.RequestFrom(ctx).ClaimedToken; raw != "" {
		if c, ok := check(raw); ok {
			return s, c, fromTokenHeader, true
		}
	}
	for _, value := range req.Header["Authorization"] {
		if raw, ok := bearer(value); ok && r.opts.Verifier.Ours(raw) {
			if c, ok := check(raw); ok {
				return s, c, fromBearer, true
			}
		}
	}
	return s, token.Claims{}, 0, false
}

// bearer returns the credential of an Authorization value of the Bearer scheme (the scheme's name
// in any letter case, RFC 9110 section 11.1).
func bearer(value string) (string, bool) {
	scheme, credential, ok := strings.Cut(value, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	credential = strings.TrimSpace(credential)
	return credential, credential != ""
}

// dropEdgeqBearer removes from a request bound for the shop every Authorization value that holds an
// edgeq token (token.Verifier.Ours): valid, expired, revoked or of another queue alike. Such a token
// is edgeq's credential, none of the shop's business, and a shop that does not know it may refuse
// the request for it; that it no longer opens the queue does not make it the shop's. Every other
// Authorization value (the shop's own session, say) reaches the shop exactly as the client sent it,
// also when edgeq's token came in the cookie or in Edgeq-Token.
func (r *Room) dropEdgeqBearer(req *http.Request) {
	values := req.Header["Authorization"]
	drop := func(value string) bool {
		raw, ok := bearer(value)
		return ok && r.opts.Verifier.Ours(raw)
	}
	if !slices.ContainsFunc(values, drop) {
		return
	}
	// A new slice: the header's own may be shared.
	kept := slices.DeleteFunc(slices.Clone(values), drop)
	if len(kept) == 0 {
		req.Header.Del("Authorization")
		return
	}
	req.Header["Authorization"] = kept
}
