package waitroom

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/turnstile"
	"github.com/edgeq/edgeq/internal/web"
)

var errNoSuchWaitingRoom = &web.Error{Status: http.StatusNotFound, Code: "QUEUE_NOT_FOUND", Message: "There is no such waiting room."}

// joinAction is the widget action of the waiting page's join form; the check insists on it, so a
// response solved for another widget cannot be used to join.
const joinAction = "edgeq_join"

// WaitPage is the data of wait.html.
type WaitPage struct {
	web.PageBase
	QueueID string
	Title   string
	// Joined is false while a queue that asks for Turnstile shows its join form.
	Joined       bool
	RequestID    string
	Position     int64
	Ahead        int64
	ETASeconds   int64 // -1 unknown
	Progress     int   // percent of the line served up to the visitor
	UpdatedAt    string
	UpdatedClock string
	// Scripts and links.
	Return, Self, RejoinURL, StatusURL, TokenURL string
	PollMs, HiddenPollMs, MaxPollMs              int64
	RefreshSeconds                               int
	// The join form of a Turnstile queue.
	SiteKey, ScriptURL, Action string
	Failed                     bool
}

// ExpiredPage is the data of expired.html.
type ExpiredPage struct {
	web.PageBase
	Title     string
	RejoinURL string
}

// handleWait serves the waiting page (GET) and the join form of queues that ask for Turnstile (POST).
// It finds the visitor's place from its request cookie or takes a new one; once the visitor is served
// it issues the token and sends the visitor on to return (303). Without JavaScript the page refreshes
// itself; with it, wait.js polls and moves on by itself.
func (r *Room) handleWait(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost && web.CrossSite(req) {
		// The join form is posted from the page itself. A link from another site (an e-mail, an
		// advert) is a GET the visitor follows, and joins below as any page load does.
		r.responder.Error(w, req, web.ErrCrossSite)
		return
	}
	ctx, queueID := req.Context(), req.PathValue("queue_id")
	s, e := r.queueFor(ctx, queueID)
	if e == web.ErrQueueNotFound {
		e = errNoSuchWaitingRoom
	}
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if e := r.allowPoll(req); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	returnTo := web.SafeReturn(req.URL.Query().Get("return"))
	page := r.pageLinks(queueID, returnTo)

	j, ok, e := r.held(ctx, req, queueID, s)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if ok && j.State.Final() {
		// A visitor whose place expired or was given up is told so, and joins again only when asking to;
		// one who completed a visit simply joins again.
		if j.State != StateCompleted && req.URL.Query().Get("rejoin") == "" && req.Method == http.MethodGet {
			r.responder.Page(w, req, http.StatusGone, "expired.html", ExpiredPage{
				PageBase: r.responder.Base(req), Title: s.Title, RejoinURL: page.RejoinURL,
			})
			return
		}
		ok = false
	}
	if ok {
		r.heartbeat(queueID, s, j.Position)
	} else {
		if e := joinableLoad(req); e != nil {
			r.responder.Error(w, req, e)
			return
		}
		var response string
		if s.Turnstile {
			if req.Method != http.MethodPost {
				r.joinForm(w, req, s, page, http.StatusOK, false)
				return
			}
			f, e := bodyFields(req, maxFormBytes, "cf-turnstile-response")
			if e != nil {
				r.responder.Error(w, req, e)
				return
			}
			response = f["cf-turnstile-response"]
		}
		if j, e = r.join(ctx, w, req, queueID, s, !s.Turnstile, response, joinAction); e != nil {
			if e.Code == web.ErrInvalidTurnstile.Code {
				r.joinForm(w, req, s, page, http.StatusForbidden, true)
				return
			}
			r.responder.Error(w, req, e)
			return
		}
	}
	if req.Method == http.MethodPost {
		// Post/redirect/get: the page the visitor reloads is the GET one.
		http.Redirect(w, req, page.Self, http.StatusSeeOther)
		return
	}
	if r.sendOn(ctx, w, req, queueID, s, j, returnTo) {
		return
	}
	r.renderWait(w, req, s, j, page)
}

// sendOn issues the token of a served visitor and redirects it to returnTo.
func (r *Room) sendOn(ctx context.Context, w http.ResponseWriter, req *http.Request, queueID string, s *snapshot, j joined, returnTo string) bool {
	var t issued
	switch {
	case j.State == StateToken && j.Expires > 0: // served by the join itself
		var e *web.Error
		if t, e = r.sign(queueID, s.Epoch, j.RequestID, j.Position, j.IssuedAt, j.Expires, j.TSV); e != nil {
			return false
		}
	case j.State == StateServed || j.State == StateToken:
		var e *web.Error
		if t, e = r.issueToken(ctx, queueID, s, j.RequestID, j.Position); e != nil {
			return false
		}
	default:
		return false
	}
	r.setTokenCookie(w, req, queueID, t)
	http.Redirect(w, req, returnTo, http.StatusSeeOther)
	return true
}

// pageLinks are the URLs a waiting page links to.
func (r *Room) pageLinks(queueID, returnTo string) WaitPage {
	p := r.opts.Prefix
	self := p + "/wait/" + url.PathEscape(queueID) + "?return=" + url.QueryEscape(returnTo)
	return WaitPage{
		QueueID: queueID, Return: returnTo, Self: self, RejoinURL: self + "&rejoin=1",
		TokenURL: p + "/generate_token",
	}
}

func (r *Room) renderWait(w http.ResponseWriter, req *http.Request, s *snapshot, j joined, page WaitPage) {
	now := time.Now().UTC()
	poll, hidden, maxPoll := r.pollIntervals(s)
	page.PageBase = r.responder.Base(req)
	page.Title, page.Joined = s.Title, true
	page.RequestID, page.Position = j.RequestID, j.Position
	page.Ahead = max(0, j.Position-s.Serving-1)
	page.ETASeconds = s.eta(j.Position - s.Serving)
	page.Progress = int(min(100, max(0, 100*s.Serving/max(1, j.Position))))
	page.UpdatedAt, page.UpdatedClock = now.Format(time.RFC3339), now.Format("15:04:05 UTC")
	page.StatusURL = r.opts.Prefix + "/status/" + url.PathEscape(page.QueueID) + "/" + j.RequestID
	page.PollMs, page.HiddenPollMs, page.MaxPollMs = poll.Milliseconds(), hidden.Milliseconds(), maxPoll.Milliseconds()
	page.RefreshSeconds = int(poll / time.Second)
	w.Header().Set("Cache-Control", "no-store")
	r.responder.Page(w, req, http.StatusOK, "wait.html", page)
}

func (r *Room) joinForm(w http.ResponseWriter, req *http.Request, s *snapshot, page WaitPage, status int, failed bool) {
	if r.opts.Turnstile == nil {
		r.responder.Error(w, req, web.ErrTurnstileMissing)
		return
	}
	page.PageBase = r.responder.Base(req)
	page.Title = s.Title
	page.SiteKey, page.ScriptURL, page.Action, page.Failed = r.opts.Turnstile.SiteKey(), r.opts.Turnstile.ScriptURL(), joinAction, failed
	r.responder.PageCSP(w, req, status, "wait.html", page, turnstile.PageCSP(r.opts.Turnstile.ScriptURL()))
}

// pollIntervals are the waiting page's polling periods: in view, hidden, and the longest back-off. All
// stay at a third of abandon_after or less, so a visitor who keeps the page open, even in a background
// tab, is never taken for gone.
func (r *Room) pollIntervals(s *snapshot) (poll, hidden, maxPoll time.Duration) {
	poll, hidden, maxPoll = 4*time.Second, 15*time.Second, 30*time.Second
	if s.AbandonAfter > 0 {
		limit := s.AbandonAfter / 3
		poll, hidden, maxPoll = min(poll, limit), min(hidden, limit), min(maxPoll, limit)
	}
	return max(poll, time.Second), max(hidden, time.Second), max(maxPoll, time.Second)
}

// joinableLoad allows joining from a top-level page load (Sec-Fetch-Dest "document", or no
// Sec-Fetch-Dest from browsers and clients that do not send it) and from the shop's own pages
// (Sec-Fetch-Site "same-origin": script-driven navigation such as Hotwire Turbo, a service worker),
// and refuses other sites' embeds and fetches and any prefetch or prerender.
func joinableLoad(req *http.Request) *web.Error {
	if purpose := req.Header.Get("Sec-Purpose"); strings.Contains(purpose, "prefetch") || strings.Contains(purpose, "prerender") {
		return web.ErrNotAPageLoad
	}
	if dest := req.Header.Get("Sec-Fetch-Dest"); dest == "" || dest == "document" {
		return nil
	}
	if req.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return nil
	}
	return web.ErrNotAPageLoad
}
