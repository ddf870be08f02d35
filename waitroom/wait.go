package waitroom

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// joinAction is the widget action of the waiting page's join form; the check insists on it, so a
// response solved for another widget cannot be used to join.
const joinAction = "edgeq_join"

// WaitPage is the data of wait.html.
type WaitPage struct {
	web.PageBase
	QueueID string
	Title   string
	// Phase is what the page shows (the Phase constants).
	Phase string
	// Joined is false while the visitor has no place: the join form of a queue that asks for
	// Turnstile, or a queue not open yet.
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
	// BeatURL is where the page says it went into the background or is closing (handleBeat).
	BeatURL                         string
	PollMs, HiddenPollMs, MaxPollMs int64
	RefreshSeconds                  int
	// The join form of a queue that asks for a bot check: the provider's widget.
	Check  botcheck.Widget
	Failed bool
	// A scheduled queue: the opening (RFC 3339, and in UTC for pages without JavaScript), seconds to
	// it, seconds until joins start (phase not_open), and whether the pre-queue is drawn by lot.
	OpensAt, OpensClock string
	OpensIn, JoinsIn    int64
	Shuffle, Paused     bool
	Random              bool
}

// Phases of the waiting page.
const (
	PhaseJoin     = "join"     // the bot check's join form
	PhaseNotOpen  = "not_open" // before the pre-queue: no place taken, a countdown
	PhasePrequeue = "prequeue" // a place in the pre-queue, a countdown to the opening
	PhaseWaiting  = "waiting"  // a place in line (paused or not; fifo or random)
	PhaseSoldOut  = "sold_out" // everything of sold_out_with is gone: no polling, the place is kept
)

// notOpenPoll is how often the not-open page looks at the queue's schedule (GET /wait/{queue} asking
// for JSON), so an opening the operator moves is shown before the page's reload at the pre-queue.
const notOpenPoll = 30 * time.Second

// Schedule is the body of GET /wait/{queue} asked for JSON (Accept: application/json, not text/html):
// the queue's opening as the not-open page shows it. Asking takes no place.
type Schedule struct {
	QueueID string `json:"queue_id"`
	// State is the queue's state (QueueStates): the not-open page reloads when it is no longer not_open.
	State string `json:"state"`
	// OpensAt (RFC 3339, UTC) and OpensIn (seconds) are set before a scheduled queue opens; JoinsIn
	// (seconds until the pre-queue lets people in) while it is not open yet.
	OpensAt string `json:"opens_at,omitempty"`
	OpensIn *int64 `json:"opens_in,omitempty"`
	JoinsIn *int64 `json:"joins_in,omitempty"`
}

// wantsSchedule reports whether req is a script asking for the queue's schedule rather than the page:
// a GET accepting application/json and not text/html.
func wantsSchedule(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	accept := strings.Join(req.Header.Values("Accept"), ",")
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

// scheduleOf is the schedule of queue s as it stands (the replica's snapshot; no store call).
func scheduleOf(queueID string, s *snapshot) Schedule {
	out := Schedule{QueueID: queueID, State: s.state()}
	if !s.OpensAt.IsZero() && !s.open() {
		now := s.storeNow()
		in := secondsUntil(now, s.OpensAt)
		out.OpensAt, out.OpensIn = vocab.FormatTime(s.OpensAt), &in
		if out.State == "not_open" {
			joins := secondsUntil(now, s.JoinFrom)
			out.JoinsIn = &joins
		}
	}
	return out
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
	s, e := r.pageQueueFor(ctx, queueID)
	if e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if e := r.allowPoll(req); e != nil {
		r.responder.Error(w, req, e)
		return
	}
	if wantsSchedule(req) {
		// The not-open page's slow look at the opening: no place is taken, no page rendered.
		web.WriteJSON(w, http.StatusOK, scheduleOf(queueID, s))
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
		if e := s.joinable(); e != nil {
			r.notJoinable(w, req, s, page, e)
			return
		}
		var sol botcheck.Solution
		if s.Turnstile {
			if req.Method != http.MethodPost {
				r.joinForm(w, req, s, page, http.StatusOK, false)
				return
			}
			f, e := bodyFields(req, maxFormBytes, r.checkFields()...)
			if e != nil {
				r.responder.Error(w, req, e)
				return
			}
			sol = r.checkSolution(f, req)
		}
		if j, e = r.join(ctx, w, req, queueID, s, !s.Turnstile, sol, joinAction); e != nil {
			switch e.Code {
			case web.ErrInvalidTurnstile.Code:
				r.joinForm(w, req, s, page, http.StatusForbidden, true)
			case web.ErrNotOpen.Code, web.ErrSoldOut.Code, web.ErrQueueClosed.Code:
				r.notJoinable(w, req, s, page, e) // changed since the snapshot
			default:
				r.responder.Error(w, req, e)
			}
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
	//nolint:gosec // returnTo went through web.SafeReturn: a path on this site
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

// notJoinable answers a newcomer who cannot take a place now: the not-open-yet page (with the time
// joins start), or the sold-out or closed page.
func (r *Room) notJoinable(w http.ResponseWriter, req *http.Request, s *snapshot, page WaitPage, e *web.Error) {
	switch e.Code {
	case web.ErrNotOpen.Code:
		r.scheduled(&page, s)
		page.PageBase, page.Title, page.Phase = r.responder.Base(req), s.Title, PhaseNotOpen
		page.JoinsIn = secondsUntil(s.storeNow(), s.JoinFrom)
		// Without JavaScript the page reloads itself when joins start, or every minute until then; with
		// it, the page looks at the schedule every notOpenPoll and reloads when joins start.
		page.RefreshSeconds = int(min(60, max(1, page.JoinsIn)))
		page.PollMs = notOpenPoll.Milliseconds()
		w.Header().Set("Cache-Control", "no-store")
		r.responder.Page(w, req, http.StatusOK, "wait.html", page)
	case web.ErrSoldOut.Code:
		base := r.responder.Base(req)
		// queue_title: the page names the drop, as the waiting page does (admission's refusals have none).
		r.responder.Page(w, req, e.Status, "soldout.html", web.RefusalPage{
			ErrorPage: web.ErrorPage{PageBase: base, Status: e.Status, Code: e.Code, Message: base.Text.T("msg.SOLD_OUT")},
			Fields:    map[string]any{"queue_title": s.Title},
			Back:      "/",
		})
	default:
		r.responder.Error(w, req, e)
	}
}

// scheduled fills in the opening of a scheduled queue.
func (r *Room) scheduled(page *WaitPage, s *snapshot) {
	if s.OpensAt.IsZero() {
		return
	}
	page.OpensAt = vocab.FormatTime(s.OpensAt)
	page.OpensClock = s.OpensAt.UTC().Format("2006-01-02 15:04 UTC")
	page.OpensIn = secondsUntil(s.storeNow(), s.OpensAt)
	page.Shuffle = s.Shuffle
}

func (r *Room) renderWait(w http.ResponseWriter, req *http.Request, s *snapshot, j joined, page WaitPage) {
	now := time.Now().UTC()
	poll, hidden, maxPoll := r.pollIntervals(s)
	page.PageBase = r.responder.Base(req)
	page.Title, page.Joined, page.Phase = s.Title, true, PhaseWaiting
	page.RequestID, page.Position = j.RequestID, s.Lottery.rank(j.Position)
	page.Ahead = s.ahead(j.Position)
	page.ETASeconds = s.eta(s.togo(j.Position))
	page.Progress = int(min(100, max(0, 100*s.Serving/max(1, page.Position))))
	page.Paused, page.Random = s.Paused, s.Method == config.MethodRandom
	if s.Paused {
		page.ETASeconds = -1
	}
	switch {
	case s.SoldOut:
		page.Phase, page.ETASeconds = PhaseSoldOut, -1
	case !s.open():
		r.scheduled(&page, s)
		page.Phase, page.ETASeconds = PhasePrequeue, -1
	}
	page.UpdatedAt, page.UpdatedClock = vocab.FormatTime(now), now.Format("15:04:05 UTC")
	page.StatusURL = r.opts.Prefix + "/status/" + url.PathEscape(page.QueueID) + "/" + j.RequestID
	page.BeatURL = r.opts.Prefix + "/beat/" + url.PathEscape(page.QueueID) + "/" + j.RequestID
	page.PollMs, page.HiddenPollMs, page.MaxPollMs = poll.Milliseconds(), hidden.Milliseconds(), maxPoll.Milliseconds()
	page.RefreshSeconds = int(poll / time.Second)
	w.Header().Set("Cache-Control", "no-store")
	r.responder.Page(w, req, http.StatusOK, "wait.html", page)
}

func (r *Room) joinForm(w http.ResponseWriter, req *http.Request, s *snapshot, page WaitPage, status int, failed bool) {
	if r.opts.Check == nil {
		r.responder.Error(w, req, web.ErrTurnstileMissing)
		return
	}
	page.PageBase = r.responder.Base(req)
	page.Title, page.Phase, page.Failed = s.Title, PhaseJoin, failed
	page.Check = r.opts.Check.Widget(botcheck.Page{
		Request: req, Text: page.Text, Scope: botcheck.Scope{Kind: "queue", Name: page.QueueID}, Action: joinAction,
	})
	r.responder.PageCSP(w, req, status, "wait.html", page, page.Check.CSP)
}

// checkFields are the fields a join's solution travels in; none without a check.
func (r *Room) checkFields() []string {
	if r.opts.Check == nil {
		return nil
	}
	return r.opts.Check.FieldNames()
}

// checkSolution takes a join's solution from its fields and headers.
func (r *Room) checkSolution(f map[string]string, req *http.Request) botcheck.Solution {
	if r.opts.Check == nil {
		return nil
	}
	return r.opts.Check.Pick(f, req.Header)
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
