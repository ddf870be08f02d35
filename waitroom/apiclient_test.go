package waitroom

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// apiHeader is what an app or a page's script sends to a gated API route.
var apiHeader = http.Header{"Accept": {"application/json"}}

// placeHolder is a visitor waiting in line and how its API calls name its place: by the request
// cookie (a page's script, a client that keeps cookies), or, for an app without cookies, by the
// Edgeq-Request-Id header.
type placeHolder struct {
	v        *visitor
	id       string
	position int64
	header   http.Header
}

// holder joins queue through assign_queue_pos as a browser does, and returns how its API calls
// will name the place: the request cookie, or with byHeader an app's cookie-less client that names
// it in Edgeq-Request-Id.
func (h *harness) holder(rp *replica, queue string, byHeader bool) placeHolder {
	h.t.Helper()
	v := h.visitor(rp)
	a := v.assign(queue)
	if a.status != http.StatusOK {
		h.t.Fatalf("join: %d %s", a.status, a.body)
	}
	p := placeHolder{v: v, id: str(a.json["request_id"]), header: apiHeader.Clone()}
	snap := rp.room.snapshotOf(h.t.Context(), queue)
	p.position, _ = rp.room.ids.position(queue, snap.Epoch, p.id)
	if byHeader {
		p.v = h.visitor(rp)
		p.v.client.Jar = nil
		p.header["Edgeq-Request-Id"] = []string{p.id}
	}
	return p
}

func (p placeHolder) call(path string) answer { return p.v.do("GET", path, nil, p.header) }

// waitingNum is the queue's waiting_num as the public endpoint answers it.
func (h *harness) waitingNum(rp *replica, queue string) int64 {
	h.t.Helper()
	a := h.visitor(rp).do("GET", "/_edgeq/waiting_num/"+queue, nil, nil)
	if a.status != http.StatusOK {
		h.t.Fatalf("waiting_num: %d %s", a.status, a.body)
	}
	return num(a.json["waiting_num"])
}

// As docs/reference.md "The queue gate" says, a request that names a live place never takes
// another. Six visitors join a queue that lets two in, and the two served take their tokens. Each of
// the four waiting then calls a gated API route, all at once and within the tick in which they took
// their places (the replica's snapshot still says the queue has room: the defect showed only then, when
// such a call took a new place at the back and handed its cookie over), and again after the next tick.
// Two keep their place in the request cookie; two are apps without cookies naming it in
// Edgeq-Request-Id. No call takes a place: waiting_num stays 4, no request cookie is handed out,
// each 403 names the caller's own place, and nothing reaches the shop.
func TestAPIClient_ANamedPlaceNeverTakesAnother(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := buildHarness(t, s, []config.Queue{testQueue("drop", 2)}, []config.Route{{Name: "api", Match: "/api/", Queue: "drop"}})
		h.tick = time.Hour // the test's tickAll stands for the tick
		rp := h.addReplica()
		for range 2 {
			served := h.holder(rp, "drop", false)
			if a := served.v.generate("drop", served.id); a.status != http.StatusOK {
				t.Fatalf("served visitor's token: %d %s", a.status, a.body)
			}
		}
		var waiting []placeHolder
		for i := range 4 {
			waiting = append(waiting, h.holder(rp, "drop", i%2 == 1))
		}
		if snap := rp.room.snapshotOf(t.Context(), "drop"); !snap.hasRoom() {
			t.Fatal("the snapshot already counts the joins: the test no longer calls within their tick")
		}
		calls := func(when string) {
			t.Helper()
			var wg sync.WaitGroup
			for _, p := range waiting {
				wg.Go(func() {
					a := p.call("/api/cart")
					if a.status != http.StatusForbidden || a.json["error"] != "QUEUE_REQUIRED" || a.json["request_id"] != p.id ||
						num(a.json["queue_position"]) != p.position || a.json["queue_status"] != "waiting" {
						t.Errorf("%s, place %d (Edgeq-Request-Id %v): %d %s", when, p.position, p.header["Edgeq-Request-Id"] != nil, a.status, a.body)
					}
					if c := cookieOf(a.header, "edgeq_rq_drop"); c != nil {
						t.Errorf("%s, place %d: a new place was handed over (request cookie %s)", when, p.position, c.Value)
					}
				})
			}
			wg.Wait()
		}
		calls("within the tick of the joins")
		rp.room.tickAll(t.Context())
		if n := h.waitingNum(rp, "drop"); n != 4 {
			t.Fatalf("waiting_num %d after the calls, want the 4 waiting", n)
		}
		calls("after the next tick")
		// A made-up id names no place: the plain 403.
		forged := withHeaders("Edgeq-Request-Id", "00000001-0000-8000-8000-000000000000")
		if a := h.app(rp).do("GET", "/api/cart", nil, forged); a.status != http.StatusForbidden || a.json["request_id"] != nil ||
			a.json["join_url"] == nil {
			t.Fatalf("a forged request id: %d %s", a.status, a.body)
		}
		rp.room.tickAll(t.Context())
		if n := h.waitingNum(rp, "drop"); n != 4 {
			t.Fatalf("waiting_num %d after the second calls, want the 4 waiting", n)
		}
		if n := h.hits.Load(); n != 0 {
			t.Fatalf("%d waiting requests reached the shop", n)
		}
	})
}

// tokenCookieIn is the value of the queue's token cookie an answer sets, "" if none.
func tokenCookieIn(a answer, queue string) string {
	if c := cookieOf(a.header, "edgeq_tk_"+queue); c != nil {
		return c.Value
	}
	return ""
}

// A place the serving position has reached gets its token on the client's next API call, as a
// browser's does on its next page: in Edgeq-Token, and in the token cookie too when the place came
// from the request cookie; the call goes on to the shop, and the token opens the next ones. A place
// that has ended is no longer live: its holder is treated as a newcomer (served at once only when
// the queue has room and nobody waits).
func TestAPIClient_AReachedPlaceGetsItsToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := buildHarness(t, s, []config.Queue{testQueue("drop", 1)}, []config.Route{{Name: "api", Match: "/api/", Queue: "drop"}})
		h.tick = time.Hour
		rp := h.addReplica()
		ctx := t.Context()
		first := h.holder(rp, "drop", false)
		if a := first.v.generate("drop", first.id); a.status != http.StatusOK {
			t.Fatalf("first visitor's token: %d %s", a.status, a.body)
		}
		page, app := h.holder(rp, "drop", false), h.holder(rp, "drop", true)
		complete := func(p placeHolder) {
			t.Helper()
			if a := h.adminForm(rp, "/api/queue/update_token_status", url.Values{
				"queue_id": {"drop"}, "request_id": {p.id}, "status": {"1"}}); a.status != http.StatusOK {
				t.Fatalf("complete place %d: %d %s", p.position, a.status, a.body)
			}
			rp.room.tickAll(ctx)
		}

		// The page's script: the place in its request cookie.
		if a := page.call("/api/cart"); a.status != http.StatusForbidden || a.json["request_id"] != page.id {
			t.Fatalf("waiting: %d %s", a.status, a.body)
		}
		complete(first)
		a := page.call("/api/cart")
		tok := a.header.Get(HeaderToken)
		if a.status != http.StatusOK || a.body != "origin /api/cart queue=drop request="+page.id || tok == "" || tokenCookieIn(a, "drop") != tok {
			t.Fatalf("reached, by cookie: %d %s, Edgeq-Token %q, token cookie %q", a.status, a.body, tok, tokenCookieIn(a, "drop"))
		}
		if a := page.call("/api/cart"); a.status != http.StatusOK || a.header.Get(HeaderToken) != "" || tokenCookieIn(a, "drop") != "" {
			t.Fatalf("with the token cookie: %d %s", a.status, a.body)
		}

		// The app: the place in Edgeq-Request-Id, the token in the header only.
		if a := app.call("/api/cart"); a.status != http.StatusForbidden || a.json["request_id"] != app.id {
			t.Fatalf("app waiting: %d %s", a.status, a.body)
		}
		complete(page)
		a = app.call("/api/cart")
		tok = a.header.Get(HeaderToken)
		if a.status != http.StatusOK || a.body != "origin /api/cart queue=drop request="+app.id || tok == "" || len(a.header.Values("Set-Cookie")) != 0 {
			t.Fatalf("reached, by Edgeq-Request-Id: %d %s, Edgeq-Token %q, Set-Cookie %q", a.status, a.body, tok, a.header.Values("Set-Cookie"))
		}
		withToken := apiHeader.Clone()
		withToken.Set(HeaderToken, tok)
		if a := app.v.do("GET", "/api/cart", nil, withToken); a.status != http.StatusOK || a.header.Get(HeaderToken) != "" {
			t.Fatalf("with the token in Edgeq-Token: %d %s", a.status, a.body)
		}

		// The page's place has ended: while the app holds the capacity, its holder gets the plain
		// 403 (no place named, none taken); once the queue has room, it is served at once anew.
		hits := h.hits.Load()
		a = page.call("/api/cart")
		if a.status != http.StatusForbidden || a.json["request_id"] != nil || cookieOf(a.header, "edgeq_rq_drop") != nil {
			t.Fatalf("ended place, queue full: %d %s", a.status, a.body)
		}
		complete(app)
		a = page.call("/api/cart")
		renewed := cookieOf(a.header, "edgeq_rq_drop")
		if a.status != http.StatusOK || a.header.Get(HeaderToken) == "" || renewed == nil || renewed.Value == page.id {
			t.Fatalf("ended place, room: %d %s", a.status, a.body)
		}
		if n := h.hits.Load() - hits; n != 1 {
			t.Fatalf("%d requests reached the shop, want the one served", n)
		}

		// An ended place in the cookie does not hide a live one named in Edgeq-Request-Id.
		later := h.holder(rp, "drop", true)
		hdr := later.header.Clone()
		hdr.Set("Cookie", "edgeq_rq_drop="+page.id)
		if a := later.v.do("GET", "/api/cart", nil, hdr); a.status != http.StatusForbidden || a.json["request_id"] != later.id ||
			len(a.header.Values("Set-Cookie")) != 0 {
			t.Fatalf("ended cookie, live Edgeq-Request-Id: %d %s", a.status, a.body)
		}
	})
}
