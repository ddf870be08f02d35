package waitroom

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// The lottery's permutation is computed in Go (a poll's rank) and inverted in Lua (whom the serving
// rank reaches): for every domain size, Lua's inverse undoes Go's permutation, and the permutation is
// one (no two positions share a rank).
func TestLottery_LuaInvertsGo(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		script := redis.NewScript(scripts.Lib() + `
local lot = {lo = tonumber(ARGV[1]), n = tonumber(ARGV[2]), seed = ARGV[3]}
local out = {}
for i = 4, #ARGV do out[#out + 1] = drops().pos_of_rank(lot, tonumber(ARGV[i])) end
return out`)
		for _, n := range []int64{1, 2, 3, 5, 17, 1000, 4097} {
			l := lottery{lo: 10, n: n, seed: fmt.Sprintf("seed-%d", n)}
			ranks := map[int64]int64{}
			args := []any{l.lo, l.n, l.seed}
			for pos := l.lo + 1; pos <= l.lo+n; pos++ {
				rank := l.rank(pos)
				if rank <= l.lo || rank > l.lo+n {
					t.Fatalf("n=%d: rank %d of %d out of range", n, rank, pos)
				}
				if other, dup := ranks[rank]; dup {
					t.Fatalf("n=%d: positions %d and %d share rank %d", n, other, pos, rank)
				}
				ranks[rank] = pos
				args = append(args, rank)
			}
			// In calls of at most 256 ranks: a single call of thousands keeps the embedded store's
			// interpreter (under the race detector, on a slow machine) past the client's read timeout.
			var got []int64
			for rest := args[3:]; len(rest) > 0; {
				part := rest[:min(256, len(rest))]
				rest = rest[len(part):]
				res, err := script.Run(t.Context(), s.Client, nil, append(args[:3:3], part...)...).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, res...)
			}
			if int64(len(got)) != n {
				t.Fatalf("n=%d: %d answers", n, len(got))
			}
			for i, pos := range got {
				if want := l.lo + 1 + int64(i); pos != want {
					t.Fatalf("n=%d: Lua maps rank %d to %d, want %d", n, args[3+i], pos, want)
				}
			}
			if l.rank(l.lo) != l.lo || l.rank(l.lo+n+1) != l.lo+n+1 {
				t.Fatalf("n=%d: positions outside the pre-queue keep their rank", n)
			}
		}
	})
}

// kendallTau is the rank correlation of two orderings of the same items (1 same, -1 reversed).
func kendallTau(a, b []int64) float64 {
	var concordant, discordant float64
	for i := range a {
		for j := i + 1; j < len(a); j++ {
			x, y := a[i]-a[j], b[i]-b[j]
			switch {
			case x*y > 0:
				concordant++
			case x*y < 0:
				discordant++
			}
		}
	}
	return (concordant - discordant) / (concordant + discordant)
}

// dropQueue is a queue scheduled an hour from now with a pre-queue open since an hour ago.
func dropQueue(id string, capacity int, shuffle bool) config.Queue {
	q := testQueue(id, capacity)
	q.OpensAt = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	q.Prequeue = 2 * time.Hour
	q.Shuffle = shuffle
	return q
}

// place is one visitor's place as the test sees it.
type place struct {
	v         *visitor
	requestID string
	arrival   int64 // 1-based arrival order
	rank      int64 // queue_position once known
	round     int   // the round it was served in; 0 not yet
}

// joinAll has n visitors join one after the other, alternating between the replicas.
func (h *harness) joinAll(queue string, n int, from int64) []*place {
	h.t.Helper()
	out := make([]*place, n)
	for i := range out {
		v := h.visitor(h.replicas[i%len(h.replicas)])
		a := v.assign(queue)
		if a.status != 200 {
			h.t.Fatalf("join %d: %d %s", i, a.status, a.body)
		}
		out[i] = &place{v: v, requestID: str(a.json["request_id"]), arrival: from + int64(i)}
	}
	return out
}

// serveRounds lets the queue serve, round after round: every served visitor is noted with its rank and
// round, then completes (freeing its place), until everyone is served. It checks that capacity is
// never exceeded.
func (h *harness) serveRounds(queue string, places []*place, capacity int) int {
	h.t.Helper()
	round := 0
	for left := len(places); left > 0; {
		round++
		if round > 10*len(places)/max(1, capacity)+20 {
			h.t.Fatalf("%d visitors never served", left)
		}
		for _, rp := range h.replicas {
			rp.room.tickAll(h.t.Context())
		}
		var served []*place
		for i, p := range places {
			if p.round != 0 {
				continue
			}
			rp := h.replicas[i%len(h.replicas)]
			a := h.visitor(rp).do("GET", "/_edgeq/status/"+queue+"/"+p.requestID, nil, nil)
			if a.status != 200 {
				h.t.Fatalf("status: %d %s", a.status, a.body)
			}
			if a.json["queue_status"] == "served" {
				p.rank, p.round = num(a.json["queue_position"]), round
				served = append(served, p)
			}
		}
		if len(served) > capacity {
			h.t.Fatalf("round %d: %d served at once, capacity %d", round, len(served), capacity)
		}
		for _, p := range served {
			a := h.adminForm(h.replicas[0], "/api/queue/update_token_status",
				url.Values{"queue_id": {queue}, "request_id": {p.requestID}, "status": {"1"}})
			if a.status != 200 {
				h.t.Fatalf("complete: %d %s", a.status, a.body)
			}
		}
		left -= len(served)
	}
	return round
}

// 1,000 visitors join the pre-queue in a known order on two replicas; at the opening
// the order is drawn by lot, once: the served order is a permutation of them, uncorrelated with
// arrival, different from another drop's, and those who join after the opening come after the whole
// pre-queue. Nobody is served before the opening, even asking generate_token directly.
func TestLottery_PrequeueOrderIsDrawnByLotAtTheOpening(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n, capacity = 1000, 100
		h := buildHarness(t, s, []config.Queue{dropQueue("drop", capacity, true), dropQueue("again", capacity, true)}, nil)
		h.addReplica()
		h.addReplica()
		orders := map[string][]int64{}
		seeds := map[string]string{}
		for _, queue := range []string{"drop", "again"} {
			pre := h.joinAll(queue, n, 1)
			for _, p := range pre[:50] {
				if a := p.v.generate(queue, p.requestID); a.status != http.StatusAccepted {
					t.Fatalf("generate_token before the opening: %d %s", a.status, a.body)
				}
				a := p.v.do("GET", "/_edgeq/status/"+queue+"/"+p.requestID, nil, nil)
				if a.json["queue_status"] != "prequeue" || num(a.json["opens_in"]) < 3000 || a.json["opens_at"] == "" {
					t.Fatalf("status before the opening: %s", a.body)
				}
			}
			// The operator opens the sale now (the admin API's opens_at, as a hot reload would).
			open := fmt.Sprintf(`{"queue_id": %q, "opens_at": %q}`, queue, time.Now().Add(-time.Second).UTC().Format(time.RFC3339))
			if a := h.adminJSON(h.replicas[1], "PUT", "/api/queue", open); a.status != 200 {
				t.Fatalf("open: %d %s", a.status, a.body)
			}
			late := h.joinAll(queue, 10, n+1)
			rounds := h.serveRounds(queue, append(slices.Clone(pre), late...), capacity)
			if rounds != n/capacity+1 {
				t.Errorf("%s: %d rounds, want %d", queue, rounds, n/capacity+1)
			}
			seen := map[int64]bool{}
			arrival, ranks := make([]int64, n), make([]int64, n)
			for i, p := range pre {
				if p.rank < 1 || p.rank > n || seen[p.rank] {
					t.Fatalf("%s: rank %d of arrival %d: not a permutation of 1..%d", queue, p.rank, p.arrival, n)
				}
				seen[p.rank] = true
				// Served in rank order: round k serves ranks (k-1)*capacity+1 .. k*capacity.
				if want := int((p.rank-1)/capacity) + 1; p.round != want {
					t.Fatalf("%s: rank %d served in round %d, want %d", queue, p.rank, p.round, want)
				}
				arrival[i], ranks[i] = p.arrival, p.rank
			}
			for _, p := range late {
				if p.rank != p.arrival || p.round != n/capacity+1 {
					t.Fatalf("%s: late visitor %d got rank %d in round %d: must follow the whole pre-queue in arrival order", queue, p.arrival, p.rank, p.round)
				}
			}
			if tau := kendallTau(arrival, ranks); tau > 0.1 || tau < -0.1 {
				t.Errorf("%s: Kendall tau of arrival and served order %.3f, want |tau| < 0.1", queue, tau)
			}
			orders[queue] = ranks
			info := h.adminJSON(h.replicas[0], "GET", "/api/queue/"+queue, "")
			lot, _ := info.json["lottery"].(map[string]any)
			if num(lot["size"]) != n || len(str(lot["seed_sha256"])) != 64 {
				t.Fatalf("%s: lottery in the admin API: %s", queue, info.body)
			}
			seeds[queue] = str(lot["seed_sha256"])
		}
		if slices.Equal(orders["drop"], orders["again"]) || seeds["drop"] == seeds["again"] {
			t.Fatal("two drops drew the same order")
		}
	})
}

// Before opens_at nobody is served, whatever they ask; before the pre-queue nobody
// takes a place (the not-open page); after closes_at nobody new joins and those in line keep theirs.
func TestScheduled_NobodyIsServedBeforeOpensAtAndNobodyJoinsAfterClosesAt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		soon := testQueue("soon", 50)
		soon.OpensAt = time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
		soon.Prequeue = time.Hour
		later := testQueue("later", 50)
		later.OpensAt = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		later.Prequeue = 10 * time.Minute
		closing := testQueue("closing", 1)
		h := newHarness(t, s, []config.Queue{soon, later, closing}, []config.Route{{Name: "drop", Match: "GET /drop", Queue: "soon"}})
		opensAt, _ := config.ParseQueueTime(soon.OpensAt)

		// Not open yet: no place, a page that says so, 403 for API clients, no operator override.
		v := h.visitor(h.replicas[0])
		notOpen := v.assign("later")
		if notOpen.status != 403 || notOpen.json["error"] != "QUEUE_NOT_OPEN" || notOpen.json["opens_at"] != later.OpensAt ||
			num(notOpen.json["opens_in"]) < 3500 || notOpen.json["joins_from"] == nil {
			t.Fatalf("join before the pre-queue: %d %s", notOpen.status, notOpen.body)
		}
		// An invitation (not a front one) is told the same, and stays unused.
		made := h.adminJSON(h.replicas[0], "POST", "/api/queue/later/invites", `{"count": 1, "ttl_second": 86400}`)
		link := str(made.json["items"].([]any)[0].(map[string]any)["url"])
		invited := v.do("POST", link, url.Values{}, http.Header{"Sec-Fetch-Site": {"same-origin"}})
		if invited.status != 403 || invited.json["error"] != "QUEUE_NOT_OPEN" || invited.json["opens_at"] != notOpen.json["opens_at"] ||
			invited.json["joins_from"] != notOpen.json["joins_from"] || num(invited.json["opens_in"]) < 3500 {
			t.Fatalf("an invitation before the pre-queue: %d %s", invited.status, invited.body)
		}
		if used := h.adminJSON(h.replicas[0], "GET", "/api/queue/later/invites?used=true", ""); num(used.json["total_count"]) != 0 {
			t.Fatalf("the refused invitation was used: %s", used.body)
		}
		page := v.do("GET", "/_edgeq/wait/later?return=%2F", nil, http.Header{"Accept": {"text/html"}})
		if page.status != 200 || !strings.Contains(page.body, "Not open yet") || !strings.Contains(page.body, `class="countdown"`) {
			t.Fatalf("not-open page: %d %s", page.status, page.body)
		}
		if a := h.adminForm(h.replicas[0], "/api/queue/increment_serving_position", url.Values{"queue_id": {"later"}, "increment_by": {"5"}}); a.status != 409 {
			t.Fatalf("increment before the opening: %d %s", a.status, a.body)
		}
		if info := h.adminJSON(h.replicas[0], "GET", "/api/queue/later", ""); num(info.json["assigned_pos"]) != 0 || info.json["state"] != "not_open" {
			t.Fatalf("a place was taken before the pre-queue: %s", info.body)
		}

		// The pre-queue: places are taken, nobody is served until opens_at on the store's clock.
		places := h.joinAll("soon", 20, 1)
		browser := h.visitor(h.replicas[0])
		nav := browser.do("GET", "/drop", nil, http.Header{"Accept": {"text/html"}})
		if nav.status != http.StatusFound || h.hits.Load() != 0 {
			t.Fatalf("gated page before the opening: %d (origin hits %d)", nav.status, h.hits.Load())
		}
		for time.Until(opensAt) > 300*time.Millisecond {
			for _, p := range places[:5] {
				if a := p.v.generate("soon", p.requestID); a.status != http.StatusAccepted {
					t.Fatalf("served %s before opens_at: %d %s", time.Until(opensAt), a.status, a.body)
				}
			}
			h.replicas[0].room.tickAll(t.Context())
			if s := h.replicas[0].room.tracked("soon").snap.Load(); s.Active != 0 || s.Serving != 0 {
				t.Fatalf("served before opens_at: %+v", s)
			}
			time.Sleep(50 * time.Millisecond)
		}
		eventually(t, 5*time.Second, "the pre-queue served after the opening", func() bool {
			for _, p := range places {
				if p.v.generate("soon", p.requestID).status != 200 {
					return false
				}
			}
			return true
		})
		if time.Now().Before(opensAt) {
			t.Fatal("served before opens_at")
		}
		// Without shuffle the pre-queue is served in arrival order.
		for _, p := range places {
			a := p.v.do("GET", "/_edgeq/status/soon/"+p.requestID, nil, nil)
			if num(a.json["queue_position"]) != p.arrival {
				t.Fatalf("arrival %d has rank %v", p.arrival, a.json["queue_position"])
			}
		}

		// Closing: those in line stay; newcomers get 410 QUEUE_CLOSED.
		first := h.joinAll("closing", 2, 1)
		closesAt := time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second)
		if a := h.adminJSON(h.replicas[0], "PUT", "/api/queue", fmt.Sprintf(`{"queue_id": "closing", "closes_at": %q}`, closesAt.UTC().Format(time.RFC3339))); a.status != 200 {
			t.Fatalf("closes_at: %d %s", a.status, a.body)
		}
		if a := h.visitor(h.replicas[0]).assign("closing"); a.status != 200 {
			t.Fatalf("join before closes_at: %d %s", a.status, a.body)
		}
		time.Sleep(time.Until(closesAt) + 50*time.Millisecond)
		h.replicas[0].room.tickAll(t.Context())
		if a := h.visitor(h.replicas[0]).assign("closing"); a.status != 410 || a.json["error"] != "QUEUE_CLOSED" {
			t.Fatalf("join after closes_at: %d %s", a.status, a.body)
		}
		if a := first[1].v.do("GET", "/_edgeq/status/closing/"+first[1].requestID, nil, nil); a.json["queue_status"] != "waiting" {
			t.Fatalf("a waiter lost its place at closing: %s", a.body)
		}
		if a := first[0].v.generate("closing", first[0].requestID); a.status != 200 {
			t.Fatalf("the served visitor's token after closing: %d %s", a.status, a.body)
		}
	})
}

// Method random serves each newly served visitor drawn from those waiting: over 2,000
// visitors the served order is uncorrelated with arrival and capacity is never exceeded; switching the
// method live keeps every place (fifo -> random -> fifo serves everyone exactly once); reject takes
// nobody new; passthrough serves everyone at once.
func TestMethods_RandomRejectPassthroughSwitchedLive(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n, capacity = 2000, 400
		// These visitors poll once per pass over all 2,000 (many seconds under the race detector):
		// slower than gone_after, which would free a reached place before its visitor looks again.
		q := testQueue("drop", 0)
		q.GoneAfter = 0
		h := buildHarness(t, s, []config.Queue{q}, nil)
		h.addReplica()
		h.addReplica()
		places := h.joinAll("drop", n, 1)
		setMethod := func(method string, capacity int) {
			t.Helper()
			body := fmt.Sprintf(`{"queue_id": "drop", "method": %q, "capacity": %d}`, method, capacity)
			if a := h.adminJSON(h.replicas[0], "PUT", "/api/queue", body); a.status != 200 || a.json["method"] != method {
				t.Fatalf("method %s: %d %s", method, a.status, a.body)
			}
		}
		// fifo for the first capacity, then random.
		setMethod("fifo", capacity)
		h.serveRounds("drop", places[:capacity], capacity)
		setMethod("random", capacity)
		// While random: reject newcomers? No: random still takes them; reject does not.
		rest := places[capacity:]
		var drawnRounds []*place
		for round := 0; round < 3; round++ {
			before := len(drawnRounds)
			for _, rp := range h.replicas {
				rp.room.tickAll(t.Context())
			}
			for i, p := range rest {
				if p.round != 0 {
					continue
				}
				a := h.visitor(h.replicas[i%2]).do("GET", "/_edgeq/status/drop/"+p.requestID, nil, nil)
				if a.json["queue_status"] == "served" {
					p.round = 100 + round
					drawnRounds = append(drawnRounds, p)
				}
			}
			if got := len(drawnRounds) - before; got != capacity {
				t.Fatalf("random round %d served %d, want %d (capacity)", round, got, capacity)
			}
			for _, p := range drawnRounds[before:] {
				h.adminForm(h.replicas[0], "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {p.requestID}, "status": {"1"}})
			}
		}
		// The store's record of draws gives the exact served order.
		raw, err := s.Client.Get(t.Context(), queueKeys(s.Keys, "drop")[9]).Result()
		if err != nil {
			t.Fatal(err)
		}
		order := make([]int64, 0, len(raw)/5)
		for i := 0; i+5 <= len(raw); i += 5 {
			b := raw[i : i+5]
			order = append(order, int64(b[0])<<32|int64(b[1])<<24|int64(b[2])<<16|int64(b[3])<<8|int64(b[4]))
		}
		if len(order) != 3*capacity {
			t.Fatalf("%d draws recorded, want %d", len(order), 3*capacity)
		}
		drawOrder := make([]int64, len(order))
		for i := range order {
			drawOrder[i] = int64(i)
		}
		if tau := kendallTau(order, drawOrder); tau > 0.1 || tau < -0.1 {
			t.Errorf("random: Kendall tau of arrival and served order %.3f, want |tau| < 0.1", tau)
		}
		// reject: nobody new; those waiting keep their place.
		setMethod("reject", capacity)
		if a := h.visitor(h.replicas[1]).assign("drop"); a.status != 410 || a.json["error"] != "QUEUE_CLOSED" {
			t.Fatalf("join with method reject: %d %s", a.status, a.body)
		}
		// Back to fifo: the rest in arrival order, each exactly once.
		setMethod("fifo", capacity)
		var left []*place
		for _, p := range rest {
			if p.round == 0 {
				left = append(left, p)
			}
		}
		h.serveRounds("drop", left[:capacity], capacity)
		for i := 1; i < capacity; i++ {
			if left[i].rank <= left[i-1].rank {
				t.Fatalf("fifo after random: arrival %d served before arrival %d", left[i].arrival, left[i-1].arrival)
			}
		}
		// passthrough: everyone still waiting is served at once, whatever the capacity.
		setMethod("passthrough", 1)
		for _, rp := range h.replicas {
			rp.room.tickAll(t.Context())
		}
		for _, p := range left[capacity:] {
			if a := p.v.generate("drop", p.requestID); a.status != 200 {
				t.Fatalf("passthrough: arrival %d not served: %d %s", p.arrival, a.status, a.body)
			}
		}
		if info := h.adminJSON(h.replicas[0], "GET", "/api/queue/drop", ""); num(info.json["waiting_num"]) != 0 {
			t.Fatalf("waiting after passthrough: %s", info.body)
		}
	})
}

// The waiting time is honest (the ETA of docs/reference.md "Waiting room"): with one visitor inside on
// a 10-minute token and nobody having left, the next one is told about ten minutes, not
// "under a minute" from the rate at which the first got in.
func TestETA_NeverShorterThanFullSessionsAllow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 1)}, nil)
		rp := h.replicas[0]
		time.Sleep(300 * time.Millisecond) // the meter's first samples, before anyone is served
		first := h.visitor(rp)
		a := first.assign("drop")
		if a := first.generate("drop", str(a.json["request_id"])); a.status != 200 {
			t.Fatalf("first visitor: %d %s", a.status, a.body)
		}
		second := h.visitor(rp)
		id := str(second.assign("drop").json["request_id"])
		eventually(t, 10*time.Second, "a serving rate measured", func() bool {
			return rp.room.tracked("drop").snap.Load().ServingRate > 0
		})
		st := second.do("GET", "/_edgeq/status/drop/"+id, nil, nil)
		if eta := num(st.json["estimated_wait_time"]); eta < 590 || eta > 600 {
			t.Fatalf("estimated_wait_time %d with a 10-minute token inside and nobody gone, want about 600 (%s)", eta, st.body)
		}
		page := second.do("GET", "/_edgeq/wait/drop?return=%2F", nil, http.Header{"Accept": {"text/html"}})
		if !strings.Contains(page.body, "About 10 minutes") {
			t.Fatalf("waiting page does not say about 10 minutes:\n%s", page.body)
		}
	})
}

// "Ahead of you" and the wait count only those still to be served before a visitor: places served out
// of turn — a front invitation, or draws while the method was random — are passed over, and a
// waiter's ahead is exactly the number of earlier places not served yet.
func TestAhead_PassesOverThoseServedOutOfTurn(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := buildHarness(t, s, []config.Queue{testQueue("drop", 0)}, nil)
		// The test drives the ticks. With the replicas' own 20 ms ticks running beside its tickAll, a
		// tick that read the store before the late joins could store its snapshot after tickAll's
		// (nothing orders the two): on a loaded machine a visitor was then told total_in_waiting 9.
		h.tick = time.Hour
		h.addReplica()
		h.addReplica()
		places := h.joinAll("drop", 8, 1)
		put := func(body string) {
			t.Helper()
			if a := h.adminJSON(h.replicas[0], "PUT", "/api/queue", body); a.status != 200 {
				t.Fatalf("%s: %d %s", body, a.status, a.body)
			}
		}
		// Two drawn at random from the eight (capacity 2), then fifo again with no room left.
		put(`{"queue_id": "drop", "method": "random", "capacity": 2}`)
		for _, rp := range h.replicas {
			rp.room.tickAll(t.Context())
		}
		put(`{"queue_id": "drop", "method": "fifo"}`)
		// A front invitation is served at once, out of turn.
		made := h.adminJSON(h.replicas[0], "POST", "/api/queue/drop/invites", `{"count": 1, "front": true}`)
		guest := h.visitor(h.replicas[1])
		link := str(made.json["items"].([]any)[0].(map[string]any)["url"])
		if a := guest.do("POST", link, url.Values{}, http.Header{"Sec-Fetch-Site": {"same-origin"}}); a.status != http.StatusSeeOther {
			t.Fatalf("front invitation: %d %s", a.status, a.body)
		}
		late := h.joinAll("drop", 2, 10)
		for _, rp := range h.replicas {
			rp.room.tickAll(t.Context())
		}
		waiting, drawn := int64(0), 0
		for i, p := range append(places, late...) {
			a := h.visitor(h.replicas[i%2]).do("GET", "/_edgeq/status/drop/"+p.requestID, nil, nil)
			switch a.json["queue_status"] {
			case "served":
				drawn++
			case "waiting":
				// total_in_waiting is waiting_num's count: the 8 not reached and the 2 drawn without
				// a token yet.
				if num(a.json["ahead"]) != waiting || num(a.json["total_in_waiting"]) != 10 {
					t.Fatalf("arrival %d, with %d waiting before it, is told %s", p.arrival, waiting, a.body)
				}
				waiting++
			default:
				t.Fatalf("arrival %d: %s", p.arrival, a.body)
			}
		}
		if drawn != 2 || waiting != 8 {
			t.Fatalf("%d drawn, %d waiting; want 2 and 8", drawn, waiting)
		}
	})
}

// After a shuffled opening, queue_pos answers the place in serving order, as status's
// queue_position does. A client comparing it with serving_pos (as a shop's own waiting page may) is
// told it is served exactly when generate_token serves it, and generate_token's 202 names the same
// place.
func TestQueuePos_AnswersTheServingOrderAfterALottery(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n, capacity = 40, 10
		h := buildHarness(t, s, []config.Queue{dropQueue("drop", capacity, true)}, nil)
		h.tick = time.Hour // the test drives the ticks: nobody moves while it compares
		rp := h.addReplica()
		pre := h.joinAll("drop", n, 1)
		open := fmt.Sprintf(`{"queue_id": "drop", "opens_at": %q}`, time.Now().Add(-time.Second).UTC().Format(time.RFC3339))
		if a := h.adminJSON(rp, "PUT", "/api/queue", open); a.status != 200 {
			t.Fatalf("open: %d %s", a.status, a.body)
		}
		rp.room.tickAll(t.Context())
		v := h.visitor(rp)
		serving := num(v.do("GET", "/_edgeq/serving_pos/drop", nil, nil).json["position"])
		if serving != capacity {
			t.Fatalf("serving_pos %d after the opening, want %d", serving, capacity)
		}
		moved := 0
		for _, p := range pre {
			qp := v.do("GET", "/_edgeq/queue_pos/drop/"+p.requestID, nil, nil)
			st := v.do("GET", "/_edgeq/status/drop/"+p.requestID, nil, nil)
			if qp.status != 200 || st.status != 200 {
				t.Fatalf("arrival %d: queue_pos %d %s, status %d %s", p.arrival, qp.status, qp.body, st.status, st.body)
			}
			position, rank := num(qp.json["position"]), num(st.json["queue_position"])
			if position != rank {
				t.Errorf("arrival %d: queue_pos says %d, status's queue_position %d", p.arrival, position, rank)
			}
			if rank != p.arrival {
				moved++
			}
			token := p.v.generate("drop", p.requestID)
			if servedByQueuePos := position <= serving; servedByQueuePos != (token.status == 200) {
				t.Errorf("arrival %d: queue_pos %d with serving_pos %d, but generate_token answers %d %v",
					p.arrival, position, serving, token.status, token.json["error"])
			}
			if token.status == http.StatusAccepted && num(token.json["queue_position"]) != rank {
				t.Errorf("arrival %d: generate_token's 202 names place %d, status %d", p.arrival, num(token.json["queue_position"]), rank)
			}
		}
		if moved == 0 {
			t.Fatal("the lottery moved nobody: the test shows nothing")
		}
	})
}
