package waitroom

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
)

// Sliding sessions (queues[].session_renewal; docs/reference.md "Waiting room"). A token used in the
// last half of its life is re-issued on the request path with a later exp, the same iat (the session's
// start, which max_session counts from), sub and pos, and a new jti. The gate makes no store call for
// it: the new deadlines reach the store in batches on the tick (renew.lua), well before the old ones
// pass.

// HeaderToken is edgeq's token header. As a response header it hands a token over to an API client:
// one served at once or whose place was reached (gate.go), and a renewed one to a client that sent
// its token in the Edgeq-Token request header or in Authorization: Bearer. As a request header it
// carries an app's token beside the shop's own Authorization (web.Request.ClaimedToken).
const HeaderToken = "Edgeq-Token"

// handToken hands a token over in the Edgeq-Token response header. The answer then carries a
// credential, which no cache in front may keep (web.Request.CredentialAdded).
func handToken(w http.ResponseWriter, req *http.Request, raw string) {
	web.RequestFrom(req.Context()).CredentialAdded = true
	w.Header().Set(HeaderToken, raw)
}

// renewalBatch holds the sessions renewed since the last flush. Requests of one visitor in the same
// second renew to the same exp and share one signature.
type renewalBatch struct {
	mu      sync.Mutex
	pending map[renewalKey]renewed
}

type renewalKey struct {
	queue, epoch string
	position     int64
}

type renewed struct {
	iat, exp, tsv int64
	raw           string
}

// renewBy is when a token is renewed: once less than half of the queue's token_ttl is left.
func renewBy(s *snapshot, c token.Claims, now int64) (exp int64, ok bool) {
	ttl := int64(s.TokenTTL / time.Second)
	if !s.SessionRenewal || c.Expires-now > ttl/2 {
		return 0, false
	}
	exp = min(now+ttl, c.IssuedAt+int64(s.MaxSession/time.Second))
	return exp, exp > c.Expires
}

// renew re-issues a valid token that is due for it, handing it over where the old one came from: the
// cookie, or the Edgeq-Token response header for a client that sent it in a header (Edgeq-Token or
// Authorization: Bearer).
func (r *Room) renew(w http.ResponseWriter, req *http.Request, s *snapshot, queueID string, c token.Claims, from tokenSource) {
	exp, ok := renewBy(s, c, time.Now().Unix())
	if !ok {
		return
	}
	key := renewalKey{queue: queueID, epoch: s.Epoch, position: c.Position}
	r.renewals.mu.Lock()
	t, found := r.renewals.pending[key]
	r.renewals.mu.Unlock()
	if !found || t.exp != exp {
		raw, e := r.sign(queueID, s.Epoch, c.RequestID, c.Position, c.IssuedAt, exp, c.TurnstileAt)
		if e != nil {
			return // the old token is still valid; the next request tries again
		}
		t = renewed{iat: c.IssuedAt, exp: exp, tsv: c.TurnstileAt, raw: raw.Raw}
		r.renewals.mu.Lock()
		if r.renewals.pending == nil {
			r.renewals.pending = map[renewalKey]renewed{}
		}
		if old, ok := r.renewals.pending[key]; !ok || old.exp < exp {
			r.renewals.pending[key] = t
			r.sessionsRenewed.WithLabelValues(queueID).Inc()
		}
		r.renewals.mu.Unlock()
	}
	if from != fromCookie {
		handToken(w, req, t.raw)
		return
	}
	r.setTokenCookie(w, req, queueID, issued{Raw: t.raw, Expires: time.Unix(t.exp, 0)})
}

// renewalChunk bounds one renew.lua call (four arguments per session).
const renewalChunk = 2000

// flushRenewals writes the renewed sessions' deadlines to the store. A failed write is tried again on
// the next tick, until the old deadline has passed.
func (r *Room) flushRenewals(ctx context.Context) {
	r.renewals.mu.Lock()
	pending := r.renewals.pending
	r.renewals.pending = nil
	r.renewals.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	type batch struct {
		queue, epoch string
		args         []any
	}
	batches := map[[2]string]*batch{}
	for k, v := range pending {
		b := batches[[2]string{k.queue, k.epoch}]
		if b == nil {
			b = &batch{queue: k.queue, epoch: k.epoch, args: []any{k.epoch}}
			batches[[2]string{k.queue, k.epoch}] = b
		}
		b.args = append(b.args, k.position, v.iat, v.exp, v.tsv)
	}
	now := time.Now().Unix()
	for _, b := range batches {
		for start := 1; start < len(b.args); start += 4 * renewalChunk {
			end := min(len(b.args), start+4*renewalChunk)
			args := append([]any{b.epoch}, b.args[start:end]...)
			res := r.scripts.run(ctx, r.client, r.scripts.renew, queueKeys(r.keys, b.queue), args...)
			if res.Err() == nil {
				continue
			}
			r.logger.Warn("storing renewed sessions failed; trying again on the next tick", "queue", b.queue, "error", res.Err().Error())
			r.renewals.mu.Lock()
			if r.renewals.pending == nil {
				r.renewals.pending = map[renewalKey]renewed{}
			}
			for i := 0; i+4 <= len(args)-1; i += 4 {
				pos, v := args[1+i].(int64), renewed{iat: args[2+i].(int64), exp: args[3+i].(int64), tsv: args[4+i].(int64)}
				k := renewalKey{queue: b.queue, epoch: b.epoch, position: pos}
				if old, ok := r.renewals.pending[k]; v.exp > now && (!ok || old.exp < v.exp) {
					r.renewals.pending[k] = v
				}
			}
			r.renewals.mu.Unlock()
		}
	}
}
