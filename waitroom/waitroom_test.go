package waitroom

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/report"
)

// Concurrent joins get exactly positions 1..n, no gaps, no duplicates.
func TestAssign_ConcurrentJoinsGetGapFreePositions(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 0)}, nil)
		rp := h.replicas[0]
		const n = 1000
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				a := h.visitor(rp).assign("drop")
				if a.status != 200 {
					t.Errorf("assign %d: %d %s", i, a.status, a.body)
					return
				}
				ids[i] = str(a.json["request_id"])
			})
		}
		wg.Wait()
		snap := rp.room.snapshotOf(context.Background(), "drop")
		positions := make([]int64, 0, n)
		for _, id := range ids {
			pos, ok := rp.room.ids.position("drop", snap.Epoch, id)
			if !ok {
				t.Fatalf("request id %q does not verify", id)
			}
			positions = append(positions, pos)
		}
		slices.Sort(positions)
		for i, p := range positions {
			if p != int64(i+1) {
				t.Fatalf("positions are not exactly 1..%d: index %d holds %d", n, i, p)
			}
		}
		// queue_pos agrees with the id, for a sample.
		v := h.visitor(rp)
		for _, id := range ids[:20] {
			pos, _ := rp.room.ids.position("drop", snap.Epoch, id)
			a := v.do("GET", "/_edgeq/queue_pos/drop/"+id, nil, nil)
			if a.status != 200 || num(a.json["position"]) != pos {
				t.Fatalf("queue_pos of %s: %d %s, want %d", id, a.status, a.body, pos)
			}
		}
	})
}

// A browser's second join (its request cookie still live) gets the same request id, never a second
// position.
func TestAssign_IdempotentPerBrowser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 0)}, nil)
		v := h.visitor(h.replicas[0])
		first, second := v.assign("drop"), v.assign("drop")
		if first.status != 200 || first.json["request_id"] != second.json["request_id"] {
			t.Fatalf("first %s, second %s", first.body, second.body)
		}
		other := h.visitor(h.replicas[0]).assign("drop")
		if other.json["request_id"] == first.json["request_id"] {
			t.Fatal("another browser got the same request id")
		}
		if c := cookieOf(first.header, "edgeq_rq_drop"); c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
			t.Fatalf("request cookie %+v", c)
		}
	})
}

func cookieOf(h http.Header, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Capacity 3 and 10 visitors; completing one serves the fourth; the completed token is
// refused on a second replica.
func TestCapacity_CompletingOneServesTheNextAndRevokesEverywhere(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 3)},
			[]config.Route{{Name: "checkout", Match: "POST /checkout/{p}", Queue: "drop"}})
		first := h.replicas[0]
		second := h.addReplica()
		visitors := make([]*visitor, 10)
		ids := make([]string, 10)
		for i := range visitors {
			visitors[i] = h.visitor(first)
			a := visitors[i].assign("drop")
			if a.status != 200 {
				t.Fatal(a.body)
			}
			ids[i] = str(a.json["request_id"])
		}
		tokens := make([]string, 3)
		for i := range 3 {
			a := visitors[i].generate("drop", ids[i])
			if a.status != 200 || str(a.json["token_type"]) != "Bearer" || num(a.json["expires_in"]) < 590 {
				t.Fatalf("visitor %d: %d %s", i+1, a.status, a.body)
			}
			tokens[i] = str(a.json["access_token"])
		}
		for i := 3; i < 10; i++ {
			if a := visitors[i].generate("drop", ids[i]); a.status != http.StatusAccepted || str(a.json["error"]) != "NOT_YET_SERVED" {
				t.Fatalf("visitor %d: %d %s", i+1, a.status, a.body)
			}
		}
		// The token opens the gated route, on both replicas, by cookie and by Authorization header.
		if a := visitors[0].do("POST", "/checkout/1", nil, nil); a.status != 200 || !strings.Contains(a.body, "queue=drop") {
			t.Fatalf("checkout with the token cookie: %d %s", a.status, a.body)
		}
		bearer := http.Header{"Authorization": {"Bearer " + tokens[0]}}
		onSecond := h.visitor(second)
		if a := onSecond.do("POST", "/checkout/1", nil, bearer); a.status != 200 {
			t.Fatalf("checkout on the second replica: %d %s", a.status, a.body)
		}
		// Complete visitor 1 through the admin API of the first replica.
		if a := h.adminForm(first, "/api/queue/update_token_status", url.Values{
			"queue_id": {"drop"}, "request_id": {ids[0]}, "status": {"1"}}); a.status != 200 || a.json["queue_status"] != "completed" {
			t.Fatalf("update_token_status: %d %s", a.status, a.body)
		}
		start := time.Now()
		eventually(t, 2*time.Second, "visitor 4 served", func() bool { return visitors[3].generate("drop", ids[3]).status == 200 })
		t.Logf("visitor 4 served %s after the completion", time.Since(start).Round(time.Millisecond))
		eventually(t, time.Second, "completed token refused on the second replica", func() bool {
			return onSecond.do("POST", "/checkout/1", nil, bearer).status == http.StatusForbidden
		})
		// Within that second the revocation may still be on its way (pub/sub); once refused, it stays so.
		hitsBefore := h.hits.Load()
		a := onSecond.do("POST", "/checkout/1", nil, bearer)
		if str(a.json["error"]) != "QUEUE_REQUIRED" || !strings.HasPrefix(str(a.json["wait_url"]), "/_edgeq/wait/drop?return=") {
			t.Fatalf("refusal: %s", a.body)
		}
		if h.hits.Load() != hitsBefore {
			t.Fatal("a refused request reached the origin")
		}
		// Visitor 5 is still waiting: capacity holds.
		if a := visitors[4].generate("drop", ids[4]); a.status != http.StatusAccepted {
			t.Fatalf("visitor 5: %d", a.status)
		}
		if a := visitors[0].generate("drop", ids[0]); a.status != http.StatusGone || a.json["queue_status"] != "completed" {
			t.Fatalf("a completed visitor asking again: %d %s", a.status, a.body)
		}
	})
}

// The origin ends a session with Edgeq-Command; the header never reaches the visitor.
func TestOriginCommandCompletesTheSession(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 1)},
			[]config.Route{{Name: "checkout", Match: "POST /checkout/{p}", Queue: "drop"}})
		rp := h.replicas[0]
		a, b := h.visitor(rp), h.visitor(rp)
		idA, idB := str(a.assign("drop").json["request_id"]), str(b.assign("drop").json["request_id"])
		if r := a.generate("drop", idA); r.status != 200 {
			t.Fatal(r.body)
		}
		if r := b.generate("drop", idB); r.status != http.StatusAccepted {
			t.Fatalf("capacity 1, second visitor: %d", r.status)
		}
		h.command.Store("complete")
		r := a.do("POST", "/checkout/9", nil, nil)
		h.command.Store("")
		if r.status != 200 || r.header.Get("Edgeq-Command") != "" {
			t.Fatalf("checkout: %d, Edgeq-Command forwarded: %q", r.status, r.header.Get("Edgeq-Command"))
		}
		eventually(t, 2*time.Second, "second visitor served", func() bool { return b.generate("drop", idB).status == 200 })
		if r := a.do("POST", "/checkout/9", nil, nil); r.status != http.StatusForbidden {
			t.Fatalf("the completed token still opens the route: %d", r.status)
		}
	})
}

// A served visitor who does not claim a token within position_expiry gets 410, and the
// slot goes to the next.
func TestPositionExpiryFreesTheSlot(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		q := testQueue("drop", 1)
		q.PositionExpiry = time.Second
		h := newHarness(t, s, []config.Queue{q}, nil)
		rp := h.replicas[0]
		a, b := h.visitor(rp), h.visitor(rp)
		idA, idB := str(a.assign("drop").json["request_id"]), str(b.assign("drop").json["request_id"])
		if r := b.generate("drop", idB); r.status != http.StatusAccepted {
			t.Fatalf("b before a expired: %d", r.status)
		}
		// a never claims its token; b is served once a's position expires.
		eventually(t, 5*time.Second, "b served after a expired", func() bool { return b.generate("drop", idB).status == 200 })
		r := a.generate("drop", idA)
		if r.status != http.StatusGone || r.json["queue_status"] != "expired" {
			t.Fatalf("a after expiry: %d %s", r.status, r.body)
		}
		if r := a.do("GET", "/_edgeq/queue_pos/drop/"+idA, nil, nil); r.status != http.StatusGone {
			t.Fatalf("queue_pos after expiry: %d", r.status)
		}
		if r := a.do("GET", "/_edgeq/status/drop/"+idA, nil, nil); r.status != http.StatusGone || r.json["queue_status"] != "expired" {
			t.Fatalf("status after expiry: %d %s", r.status, r.body)
		}
	})
}

// A waiter who stopped polling for abandon_after is skipped when reached, and takes no
// capacity; one who kept polling is served.
func TestAbandonedWaiterIsSkipped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		q := testQueue("drop", 1)
		q.AbandonAfter = 10 * time.Second
		h := newHarness(t, s, []config.Queue{q}, nil)
		rp := h.replicas[0]
		vs := make([]*visitor, 3)
		ids := make([]string, 3)
		for i := range vs {
			vs[i] = h.visitor(rp)
			ids[i] = str(vs[i].assign("drop").json["request_id"])
		}
		if r := vs[0].generate("drop", ids[0]); r.status != 200 {
			t.Fatal(r.body)
		}
		// Visitor 2 went quiet 30 s ago, visitor 3 polled just now. Make the past happen by writing the
		// heartbeats and the abandon-enabled time the scripts compare with.
		ctx := context.Background()
		keys := queueKeys(s.Keys, "drop")
		redisNow, err := s.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		past := redisNow.Add(-30 * time.Second).Unix()
		if err := s.Client.HSet(ctx, keys[0], "abandon_since", past).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Client.SetRange(ctx, keys[5], 2*4, string(pack32(past))).Err(); err != nil {
			t.Fatal(err)
		}
		if r := vs[2].do("GET", "/_edgeq/status/drop/"+ids[2], nil, nil); r.status != 200 {
			t.Fatal(r.body)
		}
		rp.room.flushHeartbeats(ctx)
		// Visitor 1 finishes: the slot must skip visitor 2 and go to visitor 3.
		if r := h.adminForm(rp, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {ids[0]}, "status": {"1"}}); r.status != 200 {
			t.Fatal(r.body)
		}
		eventually(t, 2*time.Second, "visitor 3 served", func() bool { return vs[2].generate("drop", ids[2]).status == 200 })
		r := vs[1].generate("drop", ids[1])
		if r.status != http.StatusGone || r.json["queue_status"] != "abandoned" {
			t.Fatalf("the quiet waiter: %d %s", r.status, r.body)
		}
		snap := rp.room.refresh(ctx, rp.room.tracked("drop"))
		if snap.Serving != 3 || snap.Tokens() != 1 {
			t.Fatalf("serving %d, live tokens %d; want 3 and 1 (the skipped waiter holds no capacity)", snap.Serving, snap.Tokens())
		}
		// The report: the skipped place is one given up (abandon_after), the finished session completed.
		// The room's own tick writes it (a flush called from here could find the counts taken by a tick
		// whose write has not landed yet).
		var sum report.Summary
		want := report.Summary{Joined: 3, Served: 2, GaveUp: 1, Completed: 1, Revoked: 1}
		eventually(t, 5*time.Second, "the report: 3 joined, 2 served, 1 given up, 1 completed (revoking its token)", func() bool {
			rep, err := report.Reader{Client: s.Client, Keys: s.Keys, Retention: time.Hour}.Read(ctx,
				report.Query{Queue: "drop", From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			sum = rep.Summary
			return sum.Joined == want.Joined && sum.Served == want.Served && sum.GaveUp == want.GaveUp &&
				sum.Completed == want.Completed && sum.Revoked == want.Revoked
		})
		if sum.Abandoned != 0 || sum.Expired != 0 {
			t.Fatalf("report %+v: want 3 joined, 2 served, 1 given up, 1 completed (revoking its token), nothing else", sum)
		}
	})
}

func pack32(n int64) []byte {
	return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

// generate_token is idempotent while the token lives: the same token comes back.
func TestGenerateToken_IdempotentWhileLive(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 5)}, nil)
		v := h.visitor(h.replicas[0])
		id := str(v.assign("drop").json["request_id"])
		a, b := v.generate("drop", id), v.generate("drop", id)
		if a.status != 200 || a.json["access_token"] != b.json["access_token"] {
			t.Fatalf("first %s\nsecond %s", a.body, b.body)
		}
		// On another replica too.
		other := h.visitor(h.addReplica())
		if c := other.generate("drop", id); c.json["access_token"] != a.json["access_token"] {
			t.Fatalf("another replica issued a different token: %s", c.body)
		}
		snap := h.replicas[0].room.refresh(context.Background(), h.replicas[0].room.tracked("drop"))
		if snap.Tokens() != 1 {
			t.Fatalf("live tokens %d after asking three times", snap.Tokens())
		}
	})
}

// A queue deleted and created again starts over: positions from 1, old request ids and tokens dead.
func TestQueueRecreatedInvalidatesOldIDsAndTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, nil, []config.Route{{Name: "shop", Match: "GET /shop/", Queue: "adhoc"}})
		rp := h.replicas[0]
		create := `{"queue_id":"adhoc","capacity":10,"token_validity_second":600}`
		if a := h.adminJSON(rp, "POST", "/api/queue", create); a.status != 200 {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		v := h.visitor(rp)
		id := str(v.assign("adhoc").json["request_id"])
		tok := str(v.generate("adhoc", id).json["access_token"])
		bearer := http.Header{"Authorization": {"Bearer " + tok}}
		if a := v.do("GET", "/shop/x", nil, bearer); a.status != 200 {
			t.Fatalf("before: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "DELETE", "/api/queue/adhoc", ""); a.status != 200 {
			t.Fatalf("delete: %d %s", a.status, a.body)
		}
		// Recreated full: the old token opens nothing (with room, an API client would be served anew).
		if a := h.adminJSON(rp, "POST", "/api/queue", strings.Replace(create, `"capacity":10`, `"capacity":0`, 1)); a.status != 200 {
			t.Fatalf("recreate: %d %s", a.status, a.body)
		}
		if a := v.do("GET", "/shop/x", nil, bearer); a.status != http.StatusForbidden {
			t.Fatalf("old token on the recreated queue: %d", a.status)
		}
		if a := v.generate("adhoc", id); a.status != http.StatusNotFound {
			t.Fatalf("old request id: %d %s", a.status, a.body)
		}
		fresh := h.visitor(rp).assign("adhoc")
		snap := rp.room.snapshotOf(context.Background(), "adhoc")
		if pos, _ := rp.room.ids.position("adhoc", snap.Epoch, str(fresh.json["request_id"])); pos != 1 {
			t.Fatalf("first position of the new queue is %d", pos)
		}
	})
}

// The gate: browsers without a token go to the waiting page, or straight in when there is room and
// nobody waits; API clients get 403 QUEUE_REQUIRED; a queue-A token never opens a queue-B route.
func TestGate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("a", 1), testQueue("b", 0)}, []config.Route{
			{Name: "a_pages", Match: "GET /a/", Queue: "a"},
			{Name: "b_pages", Match: "GET /b/", Queue: "b"},
		})
		rp := h.replicas[0]
		browser := http.Header{"Accept": {"text/html"}}

		// Room in a and nobody waiting: served at once, token cookie set, page from the origin.
		first := h.visitor(rp)
		r := first.do("GET", "/a/page?x=1", nil, browser)
		if r.status != 200 || !strings.Contains(r.body, "origin /a/page") || cookieOf(r.header, "edgeq_tk_a") == nil {
			t.Fatalf("served at once: %d %s", r.status, r.body)
		}
		// a is now full: the next browser is sent to the waiting page with its return path.
		second := h.visitor(rp)
		r = second.do("GET", "/a/page?x=1", nil, browser)
		if r.status != http.StatusFound || r.header.Get("Location") != "/_edgeq/wait/a?return=%2Fa%2Fpage%3Fx%3D1" {
			t.Fatalf("full queue: %d Location %q", r.status, r.header.Get("Location"))
		}
		// An API client gets 403 with wait_url.
		r = second.do("GET", "/a/page", nil, http.Header{"Accept": {"application/json"}})
		if r.status != http.StatusForbidden || r.json["error"] != "QUEUE_REQUIRED" || r.json["wait_url"] != "/_edgeq/wait/a?return=%2Fa%2Fpage" {
			t.Fatalf("API client: %d %s", r.status, r.body)
		}
		// The token of queue a does not open queue b: not as a's cookie, not as b's cookie, not as a
		// bearer token.
		var tokA string
		for _, c := range first.client.Jar.Cookies(mustURL(rp.public.URL)) {
			if c.Name == "edgeq_tk_a" {
				tokA = c.Value
			}
		}
		if tokA == "" {
			t.Fatal("no token cookie for queue a")
		}
		api := http.Header{"Accept": {"application/json"}}
		for name, hdr := range map[string]http.Header{
			"a's cookie":    api,
			"as b's cookie": {"Accept": api["Accept"], "Cookie": {"edgeq_tk_b=" + tokA}},
			"as bearer":     {"Accept": api["Accept"], "Authorization": {"Bearer " + tokA}},
		} {
			if r := first.do("GET", "/b/page", nil, hdr); r.status != http.StatusForbidden || r.json["error"] != "QUEUE_REQUIRED" {
				t.Fatalf("queue-A token %s on a queue-B route: %d %s", name, r.status, r.body)
			}
		}
		if r := first.do("GET", "/a/page", nil, http.Header{"Authorization": {"Bearer " + tokA}}); r.status != 200 {
			t.Fatalf("the same token on its own queue: %d", r.status)
		}
		hits := h.hits.Load()
		for _, hdr := range []string{"Bearer not-a-token", "Bearer " + strings.Repeat("x", 100)} {
			if r := second.do("GET", "/a/p", nil, http.Header{"Authorization": {hdr}}); r.status != http.StatusForbidden {
				t.Fatalf("%q: %d", hdr, r.status)
			}
		}
		if h.hits.Load() != hits {
			t.Fatal("a refused request reached the origin")
		}
	})
}

// The waiting page joins the visitor, keeps its place across reloads, and sends it on (with a token)
// once served, without JavaScript.
func TestWaitPage_ServedVisitorGoesBackToReturn(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 1)}, []config.Route{{Name: "p", Match: "GET /p/", Queue: "drop"}})
		rp := h.replicas[0]
		browser := http.Header{"Accept": {"text/html"}}
		holder := h.visitor(rp)
		if r := holder.do("GET", "/p/x", nil, browser); r.status != 200 {
			t.Fatalf("first visitor: %d", r.status)
		}
		v := h.visitor(rp)
		page := "/_edgeq/wait/drop?return=%2Fp%2Fitem%3Fa%3D1"
		r := v.do("GET", page, nil, browser)
		if r.status != 200 || !strings.Contains(r.body, "Your number") || !strings.Contains(r.body, `http-equiv="refresh"`) {
			t.Fatalf("waiting page: %d %s", r.status, r.body)
		}
		again := v.do("GET", page, nil, browser)
		if !strings.Contains(again.body, `id="position">2<`) || !strings.Contains(r.body, `id="position">2<`) {
			t.Fatalf("reload changed the place:\n%s", again.body)
		}
		// The holder leaves; the waiting page now sends the visitor on with a token.
		id := cookieOf(holder.do("GET", "/p/x", nil, browser).header, "edgeq_rq_drop")
		_ = id
		snap := rp.room.snapshotOf(context.Background(), "drop")
		holderID := ""
		for _, c := range holder.client.Jar.Cookies(mustURL(rp.public.URL)) {
			if c.Name == "edgeq_rq_drop" {
				holderID = c.Value
			}
		}
		if _, ok := rp.room.ids.position("drop", snap.Epoch, holderID); !ok {
			t.Fatal("the holder has no request cookie")
		}
		h.adminForm(rp, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {holderID}, "status": {"1"}})
		eventually(t, 2*time.Second, "redirect to return", func() bool {
			r = v.do("GET", page, nil, browser)
			return r.status == http.StatusSeeOther
		})
		if r.header.Get("Location") != "/p/item?a=1" || cookieOf(r.header, "edgeq_tk_drop") == nil {
			t.Fatalf("redirect: %q, cookies %v", r.header.Get("Location"), r.header.Values("Set-Cookie"))
		}
		if r := v.do("GET", "/p/item?a=1", nil, browser); r.status != 200 {
			t.Fatalf("with the new token: %d", r.status)
		}
	})
}

// Loads that are not a visitor opening a page (an <img> or <iframe> on another site, a prefetch) take
// no place and no token: otherwise a tag on a busy site would fill the queue with people who never see
// it. A top-level load, with or without Sec-Fetch headers, still joins.
func TestWaitPage_OnlyPageLoadsJoin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 5)}, []config.Route{{Name: "p", Match: "GET /p/", Queue: "drop"}})
		rp := h.replicas[0]
		assigned := func() int64 {
			return num(h.adminJSON(rp, "GET", "/api/queue/drop", "").json["assigned_pos"])
		}
		for name, header := range map[string]http.Header{
			"image":    {"Sec-Fetch-Dest": {"image"}, "Sec-Fetch-Mode": {"no-cors"}, "Sec-Fetch-Site": {"cross-site"}},
			"iframe":   {"Accept": {"text/html"}, "Sec-Fetch-Dest": {"iframe"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Site": {"cross-site"}},
			"script":   {"Sec-Fetch-Dest": {"script"}},
			"prefetch": {"Accept": {"text/html"}, "Sec-Fetch-Dest": {"document"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Purpose": {"prefetch"}},
		} {
			for _, path := range []string{"/_edgeq/wait/drop", "/p/item"} {
				v := h.visitor(rp)
				r := v.do("GET", path, nil, header)
				if r.status == http.StatusOK || cookieOf(r.header, "edgeq_tk_drop") != nil || cookieOf(r.header, "edgeq_rq_drop") != nil {
					t.Errorf("%s load of %s: %d, cookies %v", name, path, r.status, r.header.Values("Set-Cookie"))
				}
				if path == "/_edgeq/wait/drop" && (r.status != http.StatusBadRequest || !strings.Contains(r.body, "INVALID_REQUEST") && !strings.Contains(r.body, "opening the waiting page")) {
					t.Errorf("%s load of the waiting page: %d %s", name, r.status, r.body)
				}
			}
		}
		if n := assigned(); n != 0 {
			t.Fatalf("%d places taken by loads that were not page loads", n)
		}
		// Top-level loads join: a browser with Sec-Fetch headers (cross-site link) and a client without;
		// so do the shop's own script-driven navigations (Hotwire Turbo fetches pages as "empty").
		link := http.Header{"Accept": {"text/html"}, "Sec-Fetch-Dest": {"document"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Site": {"cross-site"}}
		if r := h.visitor(rp).do("GET", "/p/item", nil, link); r.status != http.StatusOK || cookieOf(r.header, "edgeq_tk_drop") == nil {
			t.Fatalf("a followed link: %d", r.status)
		}
		if r := h.visitor(rp).do("GET", "/_edgeq/wait/drop", nil, http.Header{"Accept": {"text/html"}}); r.status != http.StatusSeeOther {
			t.Fatalf("a plain load of the waiting page with room inside: %d", r.status)
		}
		turbo := http.Header{"Accept": {"text/vnd.turbo-stream.html, text/html, application/xhtml+xml"}, "Sec-Fetch-Dest": {"empty"},
			"Sec-Fetch-Mode": {"cors"}, "Sec-Fetch-Site": {"same-origin"}}
		if r := h.visitor(rp).do("GET", "/p/item", nil, turbo); r.status != http.StatusOK || cookieOf(r.header, "edgeq_tk_drop") == nil {
			t.Fatalf("a Turbo visit: %d", r.status)
		}
		if n := assigned(); n != 3 {
			t.Fatalf("assigned %d places, want 3", n)
		}
	})
}

func mustURL(s string) *url.URL {
	u, _ := url.Parse(s)
	return u
}

func TestRequestIDs(t *testing.T) {
	ids := newRequestIDs([]byte("k"))
	id := ids.make("drop", "e1", 42)
	if _, ok := parseUUID(id); !ok || id[14] != '8' || !strings.ContainsAny(id[19:20], "89ab") {
		t.Fatalf("%q is not a version-8 UUID", id)
	}
	if pos, ok := ids.position("drop", "e1", id); !ok || pos != 42 {
		t.Fatalf("position = %d, %v", pos, ok)
	}
	// The id's MAC is HMAC-SHA256 over a fixed message: ids minted by earlier builds stay valid.
	m := hmac.New(sha256.New, []byte("k"))
	m.Write([]byte("edgeq request id v1\x00drop\x00e1\x00\x00\x00\x00\x00\x00\x00\x2a"))
	want := m.Sum(nil)
	want[1], want[3] = want[1]&0x0f|0x80, want[3]&0x3f|0x80
	if got, _ := parseUUID(id); !bytes.Equal(got[5:16], want[:11]) || !bytes.Equal(got[0:5], []byte{0, 0, 0, 0, 42}) {
		t.Fatalf("id %q does not carry HMAC-SHA256 of its position", id)
	}
	for name, check := range map[string]func() bool{
		"other queue": func() bool { _, ok := ids.position("other", "e1", id); return ok },
		"other epoch": func() bool { _, ok := ids.position("drop", "e2", id); return ok },
		"other key":   func() bool { _, ok := newRequestIDs([]byte("x")).position("drop", "e1", id); return ok },
		"upper case":  func() bool { _, ok := ids.position("drop", "e1", strings.ToUpper(id)); return ok },
		"changed position": func() bool {
			forged := "00000000-00" + id[11:]
			_, ok := ids.position("drop", "e1", forged)
			return ok
		},
	} {
		if check() {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzRequestID(f *testing.F) {
	ids := newRequestIDs([]byte("fuzz"))
	good := ids.make("q", "e", 7)
	f.Add(good)
	f.Add("00000000-0000-8000-8000-000000000000")
	f.Add("")
	f.Fuzz(func(t *testing.T, id string) {
		pos, ok := ids.position("q", "e", id)
		if ok && ids.make("q", "e", pos) != id {
			t.Fatalf("accepted %q for position %d, which mints %q", id, pos, ids.make("q", "e", pos))
		}
	})
}

// complete_on: ["2xx"] on a checkout route frees the visitor's capacity as
// soon as the shop answers, for a shop that never sends Edgeq-Command. A refused checkout (the shop's
// 4xx) does not; Edgeq-Command still wins where the shop sends one.
func TestCompleteOn_TheShopsAnswerFreesCapacity(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 1)}, []config.Route{
			{Name: "checkout", Match: "POST /checkout/{p}", Queue: "drop", CompleteOn: []string{"2xx"}},
			{Name: "product", Match: "GET /product/{p}", Queue: "drop"},
		})
		rp := h.replicas[0]
		a, b := h.visitor(rp), h.visitor(rp)
		idA, idB := str(a.assign("drop").json["request_id"]), str(b.assign("drop").json["request_id"])
		if r := a.generate("drop", idA); r.status != 200 {
			t.Fatal(r.body)
		}
		if r := b.generate("drop", idB); r.status != http.StatusAccepted {
			t.Fatalf("capacity 1, second visitor: %d", r.status)
		}
		// Browsing a route without complete_on, and a checkout the shop refuses, end nothing.
		if r := a.do("GET", "/product/9", nil, nil); r.status != 200 {
			t.Fatalf("product page: %d", r.status)
		}
		h.status.Store(409)
		if r := a.do("POST", "/checkout/9", nil, nil); r.status != 409 {
			t.Fatalf("refused checkout: %d", r.status)
		}
		h.status.Store(200)
		time.Sleep(300 * time.Millisecond)
		if r := b.generate("drop", idB); r.status != http.StatusAccepted {
			t.Fatalf("after browsing and a refused checkout the second visitor was served: %d", r.status)
		}
		if r := a.do("POST", "/checkout/9", nil, nil); r.status != 200 {
			t.Fatalf("checkout: %d", r.status)
		}
		eventually(t, 2*time.Second, "second visitor served", func() bool { return b.generate("drop", idB).status == 200 })
		if r := a.do("POST", "/checkout/9", nil, nil); r.status != http.StatusForbidden {
			t.Fatalf("the completed token still opens the route: %d", r.status)
		}
	})
}
