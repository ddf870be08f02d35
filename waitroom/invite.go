package waitroom

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// Invitations (docs/reference.md "Waiting room"). An operator creates single-use codes for a queue;
// visiting {prefix}/invite/{queue}/{code} takes a place in line (an invite_only queue takes nobody
// else), and a front invitation is served at once. The store keeps only the SHA-256 of each code: 128
// random bits cannot be found from it, so a copy of the store hands out no invitation.

// inviteCode is the shape of a code: 16 random bytes, base64url without padding.
var inviteCode = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// inviteHash is the stored name of a code.
func inviteHash(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

func newInviteCode() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// InviteReferrerPolicy is the Referrer-Policy of every answer at an invitation link.
const InviteReferrerPolicy = "strict-origin"

// MaxInvites is the most invitations one call creates.
const MaxInvites = 10_000

// InvitePage is the data of invite.html: the visit of an invitation link shows a form that posts it
// (a script submits it at once), so a mail scanner that fetches the link does not use the invitation.
type InvitePage struct {
	web.PageBase
	Title  string
	Action string
}

func (r *Room) inviteURL(queueID, code string) string {
	return r.opts.Prefix + "/invite/" + queueID + "/" + code
}

// handleInvite serves an invitation link: GET shows the page that posts it, POST uses it.
func (r *Room) handleInvite(w http.ResponseWriter, req *http.Request) {
	ctx, queueID, code := req.Context(), req.PathValue("queue_id"), req.PathValue("code")
	// The code is in the URL: what the page and the answers to its post lead to (the post itself,
	// the shop page after it, whose document.referrer a shop's analytics script sends away) gets the
	// origin only, on every answer: an invitation the line could not take yet stays valid. Not
	// no-referrer: with it a browser posts "Origin: null", refused as cross-site where no
	// Sec-Fetch-Site comes (plain HTTP).
	w.Header().Set("Referrer-Policy", InviteReferrerPolicy)
	s, e := r.pageQueueFor(ctx, queueID)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if !inviteCode.MatchString(code) {
		r.invites.WithLabelValues(queueID, "unknown").Inc()
		r.responder.Error(w, req, web.ErrInviteNotFound)
		return
	}
	returnTo := web.SafeReturn(req.URL.Query().Get("return"))
	if req.Method != http.MethodPost {
		action := r.inviteURL(queueID, code)
		if returnTo != "/" {
			action += "?return=" + url.QueryEscape(returnTo)
		}
		page := InvitePage{PageBase: r.responder.Base(req), Title: s.Title, Action: action}
		w.Header().Set("Cache-Control", "no-store")
		r.responder.Page(w, req, http.StatusOK, "invite.html", page)
		return
	}
	if web.CrossSite(req) {
		r.responder.Error(w, req, web.ErrCrossSite)
		return
	}
	if e, degraded := web.RequestFrom(ctx).StoreDegraded("invite"); degraded {
		// An endpoint matches no route, so its policy is closed: this is 503.
		r.responder.Error(w, req, e)
		return
	}
	// The per-IP join limit also bounds guessing.
	if e := r.allowJoin(ctx, req); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	floor := ""
	if q := r.tracked(queueID); q != nil {
		floor = q.floorArg()
	}
	keys := queueKeys(r.keys, queueID)
	res, ackErr := r.runAcked(ctx, r.scripts.invite, keys, inviteHash(code), floor)
	result, pos, epoch, st, iat, exp := res.Int(0), res.Int(1), res.Str(3), State(res.Int(4)), res.Int(5), res.Int(6)
	if res.Err() != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(res.Err()))
		return
	}
	if result == 0 && errors.Is(ackErr, errNotAcked) {
		// The store's replicas did not confirm the use: a failover now could lose it and let the code
		// be used again. It is undone, and the visitor tries the link again in a moment.
		undo := r.scripts.run(context.WithoutCancel(ctx), r.client, r.scripts.invites, keys, "unuse", inviteHash(code), pos)
		if undo.Err() != nil {
			r.logger.Warn("undoing an invitation's unconfirmed use failed", "queue", queueID, "error", undo.Err().Error())
		}
		r.invites.WithLabelValues(queueID, "unconfirmed").Inc()
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(ackErr))
		return
	}
	if result == 0 {
		r.saw(queueID, epoch, pos)
		r.queueReport(queueID).Add(report.Joined, 1)
	}
	refuse := func(label string, e *web.Error) {
		r.invites.WithLabelValues(queueID, label).Inc()
		r.responder.Error(w, req, e)
	}
	switch result {
	case 0:
	case 1:
		r.responder.Error(w, req, web.ErrWaitingRoomNotFound)
		return
	case 2:
		e := web.ErrNotOpen
		if j := s.joinable(); j != nil && j.Code == e.Code {
			e = j // with opens_at, opens_in and joins_from, as a join is told
		}
		refuse("refused", e)
		return
	case 3:
		refuse("refused", web.ErrQueueClosed)
		return
	case 4:
		refuse("refused", web.ErrSoldOut)
		return
	case 6:
		// Used: by this very browser (a second click, the back button) it goes where the first visit went.
		if _, held, ok := r.requestFromCookie(req, queueID, s); ok && held == pos && epoch == s.Epoch {
			http.Redirect(w, req, r.waitURL(queueID, returnTo), http.StatusSeeOther)
			return
		}
		refuse("used", web.ErrInviteUsed)
		return
	case 7:
		refuse("expired", web.ErrInviteExpired)
		return
	default:
		refuse("unknown", web.ErrInviteNotFound)
		return
	}
	id := r.ids.make(queueID, epoch, pos)
	r.opts.Cookies.Set(w, req, r.cookieName("rq", queueID), id, requestCookieLife)
	if st == StateToken && exp > 0 {
		r.tokenIssued(queueID, epoch, pos)
		if t, e := r.sign(queueID, epoch, id, pos, iat, exp, 0); e == nil {
			r.invites.WithLabelValues(queueID, "served").Inc()
			r.setTokenCookie(w, req, queueID, t)
			http.Redirect(w, req, returnTo, http.StatusSeeOther)
			return
		}
	}
	r.invites.WithLabelValues(queueID, "joined").Inc()
	if q := r.tracked(queueID); q != nil {
		r.refresh(ctx, q) // the waiting page reads the new place from the snapshot
	}
	http.Redirect(w, req, r.waitURL(queueID, returnTo), http.StatusSeeOther)
}

// inviteRequest is the body of POST /api/queue/{id}/invites.
type inviteRequest struct {
	Count     *int64 `json:"count"`
	TTLSecond *int64 `json:"ttl_second"`
	Front     bool   `json:"front"`
}

// InviteCreated is one new invitation: its code is shown here and never again.
type InviteCreated struct {
	Code      string `json:"code"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
}

// Invite is an invitation as GET /api/queue/{id}/invites lists it: the code itself is not kept, id is
// its SHA-256 (DELETE takes either).
type Invite struct {
	ID        string `json:"id"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
	Front     bool   `json:"front"`
	Used      bool   `json:"used"`
	UsedAt    string `json:"used_at,omitempty"`
	Position  int64  `json:"position,omitempty"`
	Expired   bool   `json:"expired"`
}

// maxInviteTTL bounds how long an invitation may stay valid.
const maxInviteTTL = 365 * 24 * time.Hour

func (r *Room) adminCreateInvites(w http.ResponseWriter, req *http.Request) {
	queueID := req.PathValue("id")
	var body inviteRequest
	if e := fields.DecodeJSON(w, req, maxAdminBodyBytes, &body); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	count, ttl := int64(1), int64(7*24*3600)
	if body.Count != nil {
		count = *body.Count
	}
	if body.TTLSecond != nil {
		ttl = *body.TTLSecond
	}
	if count < 1 || count > MaxInvites {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "count").With("problems", "count must be 1 to "+strconv.Itoa(MaxInvites)))
		return
	}
	if ttl < 1 || ttl > int64(maxInviteTTL/time.Second) {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "ttl_second").With("problems", "ttl_second must be 1 to "+strconv.FormatInt(int64(maxInviteTTL/time.Second), 10)))
		return
	}
	now := time.Now()
	expires := now.Add(time.Duration(ttl) * time.Second)
	front := "0"
	if body.Front {
		front = "1"
	}
	items := make([]InviteCreated, count)
	args := make([]any, 0, 3+count)
	args = append(args, now.Unix(), expires.Unix(), front)
	for i := range items {
		code := newInviteCode()
		items[i] = InviteCreated{Code: code, URL: r.inviteURL(queueID, code), ExpiresAt: formatTime(expires)}
		args = append(args, inviteHash(code))
	}
	res := r.scripts.run(req.Context(), r.client, r.scripts.invites, queueKeys(r.keys, queueID), append([]any{"add"}, args...)...)
	if res.Err() != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(res.Err()))
		return
	}
	if res.Int(0) == 1 {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
		return
	}
	r.refreshTracked(req.Context(), queueID)
	web.RequestFrom(req.Context()).Logger().Info("invitations created", "queue", queueID, "count", count, "front", body.Front, "expires_at", formatTime(expires))
	web.WriteJSON(w, http.StatusCreated, map[string]any{"items": items})
}

func (r *Room) adminListInvites(w http.ResponseWriter, req *http.Request) {
	queueID := req.PathValue("id")
	page, size, e := web.Paging(req, web.MaxPageSize)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	used := req.URL.Query().Get("used")
	if used != "" && used != "true" && used != "false" {
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "used"))
		return
	}
	ctx := req.Context()
	if s := r.snapshotOf(ctx, queueID); s == nil {
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
		return
	}
	all, err := r.client.HGetAll(ctx, r.keys.Queue(queueID, "inv")).Result()
	if err != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(err))
		return
	}
	now := time.Now()
	items := make([]Invite, 0, len(all))
	for hash, v := range all {
		inv, ok := parseInvite(hash, v, now)
		if !ok || (used == "true" && !inv.Used) || (used == "false" && inv.Used) {
			continue
		}
		items = append(items, inv)
	}
	slices.SortFunc(items, func(a, b Invite) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	lo, hi, size := web.Window(int64(len(items)), page, size)
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items[lo:hi], "total_count": len(items), "page": page, "page_size": size})
}

// parseInvite reads a stored invitation, "created:expires:front:position:used".
func parseInvite(hash, v string, now time.Time) (Invite, bool) {
	parts := strings.Split(v, ":")
	if len(parts) != 5 {
		return Invite{}, false
	}
	n := make([]int64, 5)
	for i, p := range parts {
		var err error
		if n[i], err = strconv.ParseInt(p, 10, 64); err != nil {
			return Invite{}, false
		}
	}
	inv := Invite{
		ID: hash, CreatedAt: formatTime(time.Unix(n[0], 0)), ExpiresAt: formatTime(time.Unix(n[1], 0)),
		Front: n[2] == 1, Used: n[3] > 0, Position: n[3],
	}
	if inv.Used {
		inv.UsedAt = formatTime(time.Unix(n[4], 0))
	} else {
		inv.Expired = !now.Before(time.Unix(n[1], 0))
	}
	return inv, true
}

var errInviteNotFound = errors.New("waitroom: invitation not found")

func (r *Room) adminDeleteInvite(w http.ResponseWriter, req *http.Request) {
	queueID, ref := req.PathValue("id"), req.PathValue("code")
	hash := strings.ToLower(ref)
	switch {
	case inviteCode.MatchString(ref):
		hash = inviteHash(ref)
	case len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "":
		r.responder.Error(w, req, web.ErrInvalidRequest.With("field", "code"))
		return
	}
	res := r.scripts.run(req.Context(), r.client, r.scripts.invites, queueKeys(r.keys, queueID), "delete", hash)
	if res.Err() != nil {
		r.responder.Error(w, req, web.ErrStoreUnavailable.Because(res.Err()))
		return
	}
	switch res.Int(0) {
	case 1:
		r.responder.Error(w, req, web.ErrQueueNotFoundAdmin)
		return
	case 2:
		r.responder.Error(w, req, web.ErrInviteNotFound.Because(errInviteNotFound))
		return
	}
	r.refreshTracked(req.Context(), queueID)
	web.RequestFrom(req.Context()).Logger().Info("invitation deleted", "queue", queueID, "id", hash)
	w.WriteHeader(http.StatusNoContent)
}

// refreshTracked takes a new snapshot of a tracked queue now (counts the admin API shows).
func (r *Room) refreshTracked(ctx context.Context, queueID string) {
	if q := r.tracked(queueID); q != nil {
		r.refresh(ctx, q)
	}
}
