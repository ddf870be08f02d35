package waitroom

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/internal/web"
)

// A visitor's session, for the endpoints and the gate alike: the request cookie that holds its place,
// the access token it is issued, and the end of it (finish), which revokes the token on every replica.

// Handler helpers shared by the endpoints and the gate.

func (r *Room) cookieName(kind, queueID string) string { return "edgeq_" + kind + "_" + queueID }

func (r *Room) waitURL(queueID, returnTo string) string {
	return r.opts.Prefix + "/wait/" + queueID + "?return=" + url.QueryEscape(returnTo)
}

// requestFromCookie returns the visitor's position in queueID from the request cookie, if the cookie
// holds a genuine request id of the queue's current epoch.
func (r *Room) requestFromCookie(req *http.Request, queueID string, s *snapshot) (id string, pos int64, ok bool) {
	c, err := req.Cookie(r.cookieName("rq", queueID))
	if err != nil {
		return "", 0, false
	}
	pos, ok = r.positionOf(queueID, s, c.Value)
	if !ok {
		return "", 0, false
	}
	return c.Value, pos, true
}

// issued is a token ready to hand out.
type issued struct {
	Raw     string
	Expires time.Time
}

// issueToken runs token.lua for a position and signs the token it describes. A position not reached
// yet gives web.ErrNotYetServed, a finished one web.ErrExpired.
func (r *Room) issueToken(ctx context.Context, queueID string, s *snapshot, requestID string, pos int64) (issued, *web.Error) {
	res := r.scripts.run(ctx, r.client, r.scripts.token, queueKeys(r.keys, queueID), pos, s.Epoch)
	code, st, iat, exp, tsv, fresh := res.Int(0), State(res.Int(1)), res.Int(2), res.Int(3), res.Int(4), res.Int(5)
	if res.Err() != nil {
		return issued{}, web.ErrStoreUnavailable.Because(res.Err())
	}
	switch code {
	case 1:
		return issued{}, web.ErrRequestNotFound
	case 2:
		// The place in serving order, as status and queue_pos name it.
		return issued{}, web.ErrNotYetServed.With("queue_position", s.Lottery.rank(pos)).With("serving_position", s.Serving)
	case 3:
		return issued{}, web.ErrExpired.With("queue_status", st.Status())
	}
	if fresh == 1 {
		r.tokenIssued(queueID, s.Epoch, pos)
	}
	return r.sign(queueID, s.Epoch, requestID, pos, iat, exp, tsv)
}

// sign builds the token of a position. Its claims depend only on stored values, and Ed25519 is
// deterministic, so issuing again while the token is live returns the very same token.
func (r *Room) sign(queueID, epoch, requestID string, pos, iat, exp, tsv int64) (issued, *web.Error) {
	raw, err := r.opts.Keyring.Sign(token.Claims{
		Issuer: r.opts.Issuer, Queue: queueID, RequestID: requestID, Position: pos,
		IssuedAt: iat, NotBefore: iat, Expires: exp, ID: tokenID(queueID, epoch, pos, iat, exp), TurnstileAt: tsv,
	})
	if err != nil {
		return issued{}, web.ErrInternal.Because(err)
	}
	return issued{Raw: raw, Expires: time.Unix(exp, 0)}, nil
}

// tokenID is a token's jti: unique per queue incarnation, position, issue time and expiry (a renewed
// token keeps iat and gets a later exp).
func tokenID(queueID, epoch string, pos, iat, exp int64) string {
	h := sha256.New()
	h.Write([]byte(queueID + "\x00" + epoch + "\x00"))
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(pos))   //nolint:gosec // the bits of the int64, hashed
	binary.BigEndian.PutUint64(b[8:16], uint64(iat))  //nolint:gosec // the bits of the int64, hashed
	binary.BigEndian.PutUint64(b[16:24], uint64(exp)) //nolint:gosec // the bits of the int64, hashed
	h.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// setTokenCookie hands a token to a browser.
func (r *Room) setTokenCookie(w http.ResponseWriter, req *http.Request, queueID string, t issued) {
	r.opts.Cookies.Set(w, req, r.cookieName("tk", queueID), t.Raw, time.Until(t.Expires))
}

// revocation names one revoked token: the queue, the queue's epoch and the position.
type revocation struct {
	queue, epoch string
	position     int64
}

// finish ends a visitor's session (COMPLETED or ABANDONED) and, when that revokes a token, tells every
// replica at once.
func (r *Room) finish(ctx context.Context, queueID, epoch string, pos int64, final State) (_ State, err error) {
	// With redis.wait_replicas a revocation counts once the replicas hold it (failover.go): one a
	// failover lost would make the token good again where no replica remembers it.
	res, ackErr := r.runAcked(ctx, r.scripts.finish, queueKeys(r.keys, queueID), pos, epoch, int(final),
		(r.opts.MaxTokenTTL + time.Minute).Milliseconds())
	code, state, revokedAt := res.Int(0), State(res.Int(1)), res.Int(2)
	if res.Err() != nil {
		return 0, res.Err()
	}
	if ackErr != nil && (code == 0 || code == 3) {
		defer func() { err = ackErr }() // said after the replicas here heard of it: they keep it either way
	}
	switch code {
	case 1:
		return 0, errRequestNotFound
	case 2:
		return state, errNotServed
	case 3:
		return state, errAlreadyFinished
	}
	r.finished(queueID, state, revokedAt > 0)
	if revokedAt > 0 {
		rev := revocation{queue: queueID, epoch: epoch, position: pos}
		r.revoked.Add(rev, struct{}{})
		if err := r.client.Publish(ctx, revocationChannel(r.keys), formatRevocation(rev)).Err(); err != nil {
			r.logger.Warn("revocation publish failed; replicas will learn it from their next tick", "error", err.Error())
		}
	}
	if q := r.tracked(queueID); q != nil {
		r.refresh(ctx, q)
	}
	return state, nil
}

var (
	errRequestNotFound = errors.New("waitroom: request not found")
	errNotServed       = errors.New("waitroom: not served yet")
	errAlreadyFinished = errors.New("waitroom: already finished")
)

// isRevoked reports whether the token of a position has been completed or abandoned.
func (r *Room) isRevoked(queueID, epoch string, pos int64) bool {
	return r.revoked.Contains(revocation{queue: queueID, epoch: epoch, position: pos})
}

// subscribeRevocations listens for finished tokens announced by any replica. Messages lost while
// disconnected are caught up by the inlet tick, which reads the queue's revocation set.
func (r *Room) subscribeRevocations(ctx context.Context) {
	store.Follow(ctx, r.client, revocationChannel(r.keys), func(payload string) {
		if rev, ok := parseRevocation(payload); ok {
			r.revoked.Add(rev, struct{}{})
		}
	})
}

func formatRevocation(rev revocation) string {
	return rev.queue + " " + rev.epoch + " " + strconv.FormatInt(rev.position, 10)
}

func parseRevocation(s string) (revocation, bool) {
	parts := strings.Split(s, " ")
	if len(parts) != 3 {
		return revocation{}, false
	}
	pos, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !config.ID.MatchString(parts[0]) {
		return revocation{}, false
	}
	return revocation{queue: parts[0], epoch: parts[1], position: pos}, true
}
