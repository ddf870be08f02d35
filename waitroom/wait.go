package waitroom

import (
	"net/http"
	"time"

	"github.com/edgeq/edgeq/internal/web"
)

var errNoSuchWaitingRoom = &web.Error{Status: http.StatusNotFound, Code: "QUEUE_NOT_FOUND", Message: "There is no such waiting room."}

// WaitPage is the data of wait.html.
type WaitPage struct {
	web.PageBase
	QueueID        string
	Title          string
	Position       int64
	Ahead          int64
	ETASeconds     int64 // -1 unknown
	RefreshSeconds int
	Self           string // this page, to refresh
}

// handleWait serves the waiting page: it joins the visitor (or finds the place its request cookie
// holds), and once the visitor is served issues the token and sends them on to return. Without
// JavaScript the page refreshes itself.
func (r *Room) handleWait(w http.ResponseWriter, req *http.Request) {
	queueID := req.PathValue("queue_id")
	returnTo := SafeReturn(req.URL.Query().Get("return"))
	s, e := r.queueFor(req.Context(), queueID)
	if e == ErrQueueNotFound {
		e = errNoSuchWaitingRoom
	}
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if s.Turnstile {
		r.responder.Error(w, req, ErrTurnstileMissing)
		return
	}
	if e := r.allowPoll(req); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	j, e := r.join(req.Context(), w, req, queueID, s, true)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if j.State == StateToken && j.Expires > 0 {
		t, e := r.sign(queueID, s.Epoch, j.RequestID, j.Position, j.IssuedAt, j.Expires, 0)
		if e == nil {
			r.setTokenCookie(w, req, queueID, t)
			http.Redirect(w, req, returnTo, http.StatusSeeOther)
			return
		}
	}
	if j.State == StateServed || j.State == StateToken {
		t, e := r.issueToken(req.Context(), queueID, s, j.RequestID, j.Position)
		if e == nil {
			r.setTokenCookie(w, req, queueID, t)
			http.Redirect(w, req, returnTo, http.StatusSeeOther)
			return
		}
		if e.Status >= 500 {
			r.responder.Error(w, req, e)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	r.responder.Page(w, req, http.StatusOK, "wait.html", WaitPage{
		PageBase: r.responder.Base(req), QueueID: queueID, Title: s.Title, Position: j.Position,
		Ahead: max(0, j.Position-s.Serving-1), ETASeconds: s.eta(j.Position - s.Serving),
		RefreshSeconds: r.refreshSeconds(s), Self: req.URL.RequestURI(),
	})
}

// refreshSeconds is the no-JavaScript page's refresh period: every 5 s, and always well inside
// abandon_after so a visitor who keeps the page open is never taken for gone.
func (r *Room) refreshSeconds(s *snapshot) int {
	refresh := 5 * time.Second
	if s.AbandonAfter > 0 {
		refresh = min(refresh, s.AbandonAfter/3)
	}
	return max(1, int(refresh/time.Second))
}
