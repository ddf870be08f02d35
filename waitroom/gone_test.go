package waitroom

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// goneQueue is a queue of one place whose first visitor holds it (a token) and whose second waits,
// last heard from a minute ago: it returns the harness, the replica and the two visitors' ids.
func goneQueue(t *testing.T, s *store.Store, gone time.Duration) (*harness, *replica, []*visitor, []string) {
	t.Helper()
	q := testQueue("drop", 1)
	q.GoneAfter = gone
	h := newHarness(t, s, []config.Queue{q}, nil)
	rp := h.replicas[0]
	vs := []*visitor{h.visitor(rp), h.visitor(rp)}
	ids := make([]string, 2)
	for i, v := range vs {
		ids[i] = str(v.assign("drop").json["request_id"])
	}
	if r := vs[0].generate("drop", ids[0]); r.status != 200 {
		t.Fatal(r.body)
	}
	ctx := context.Background()
	now, err := s.Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Client.SetRange(ctx, queueKeys(s.Keys, "drop")[5], 2*4, string(pack32(now.Add(-time.Minute).Unix()))).Err(); err != nil {
		t.Fatal(err)
	}
	return h, rp, vs, ids
}

// deadlineIn is how far in the future (store clock) position pos's capacity is held.
func deadlineIn(t *testing.T, s *store.Store, pos int64) time.Duration {
	t.Helper()
	ctx := context.Background()
	score, err := s.Client.ZScore(ctx, queueKeys(s.Keys, "drop")[3], strconv.FormatInt(pos, 10)).Result()
	if err != nil {
		t.Fatalf("position %d holds no capacity: %v", pos, err)
	}
	now, err := s.Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if math.IsInf(score, 1) {
		return time.Duration(math.MaxInt64)
	}
	return time.UnixMilli(int64(score)).Sub(now)
}

func near(got, want time.Duration) bool { return got > want-2*time.Second && got <= want+time.Second }

// A place reached while its visitor is silent holds the capacity for gone_after, not position_expiry;
// the visitor's polls keep it, a page in the background keeps it up to position_expiry, a page closing
// ends that grace; without gone_after position_expiry alone counts.
func TestGoneAfter_AReachedPlaceIsHeldWhileItsVisitorIsThere(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h, rp, vs, ids := goneQueue(t, s, 10*time.Second)
		ctx := context.Background()
		h.adminForm(rp, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {ids[0]}, "status": {"1"}})
		rp.room.refresh(ctx, rp.room.tracked("drop"))
		if d := deadlineIn(t, s, 2); !near(d, 10*time.Second) {
			t.Fatalf("reached while silent: held for %s, want gone_after (10s)", d)
		}
		beat := func(page string) {
			t.Helper()
			if r := vs[1].do("POST", "/_edgeq/beat/drop/"+ids[1], url.Values{"page": {page}}, nil); r.status != http.StatusNoContent {
				t.Fatalf("beat %s: %d %s", page, r.status, r.body)
			}
			rp.room.flushHeartbeats(ctx)
		}
		beat("hidden")
		if d := deadlineIn(t, s, 2); !near(d, 5*time.Minute) {
			t.Fatalf("a page in the background: held for %s, want position_expiry (5m) at most", d)
		}
		// The background page's own polls renew its grace; a poll without the mark (the page in view
		// again) is heard as a poll; the page closing ends the grace.
		poll := func(query string) {
			t.Helper()
			if r := vs[1].do("GET", "/_edgeq/status/drop/"+ids[1]+query, nil, nil); r.status != 200 || r.json["queue_status"] != "served" {
				t.Fatalf("status: %d %s", r.status, r.body)
			}
			rp.room.flushHeartbeats(ctx)
		}
		poll("?hidden=1")
		if d := deadlineIn(t, s, 2); !near(d, 5*time.Minute) {
			t.Fatalf("after a poll from the background: held for %s, want still 5m", d)
		}
		poll("")
		if d := deadlineIn(t, s, 2); !near(d, 10*time.Second) {
			t.Fatalf("after a poll in view: held for %s, want gone_after (10s) from now", d)
		}
		beat("hidden")
		beat("gone")
		if d := deadlineIn(t, s, 2); !near(d, 10*time.Second) {
			t.Fatalf("the page closed: held for %s, want gone_after (10s)", d)
		}
		if r := vs[1].generate("drop", ids[1]); r.status != 200 {
			t.Fatalf("claiming in time: %d %s", r.status, r.body)
		}
		if d := deadlineIn(t, s, 2); !near(d, 10*time.Minute) {
			t.Fatalf("with a token: held for %s, want token_ttl (10m)", d)
		}
	})
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h, rp, _, ids := goneQueue(t, s, 0)
		h.adminForm(rp, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {ids[0]}, "status": {"1"}})
		rp.room.refresh(context.Background(), rp.room.tracked("drop"))
		if d := deadlineIn(t, s, 2); !near(d, 5*time.Minute) {
			t.Fatalf("gone_after 0: held for %s, want position_expiry (5m)", d)
		}
	})
}

// A no-show's reached place frees its capacity after gone_after: the next visitor is served, the
// no-show's place has expired, and the report counts it as given up.
func TestGoneAfter_ANoShowFreesItsPlace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h, rp, vs, ids := goneQueue(t, s, 10*time.Second)
		third := h.visitor(rp)
		id3 := str(third.assign("drop").json["request_id"])
		reached := time.Now()
		h.adminForm(rp, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {ids[0]}, "status": {"1"}})
		eventually(t, 15*time.Second, "the third visitor served once the no-show's place freed", func() bool {
			third.do("GET", "/_edgeq/status/drop/"+id3, nil, nil) // polls keep it there
			return third.generate("drop", id3).status == 200
		})
		if took := time.Since(reached); took < 9*time.Second {
			t.Fatalf("the place freed after %s: sooner than gone_after", took)
		}
		if r := vs[1].generate("drop", ids[1]); r.status != http.StatusGone || r.json["queue_status"] != "expired" {
			t.Fatalf("the no-show: %d %s", r.status, r.body)
		}
	})
}

// The beat endpoint refuses what it does not understand, and changes nothing.
func TestBeat_BadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		_, _, vs, ids := goneQueue(t, s, 10*time.Second)
		cases := []struct {
			name, path string
			form       url.Values
			header     http.Header
			status     int
			code       string
		}{
			{"unknown page state", "/_edgeq/beat/drop/" + ids[1], url.Values{"page": {"asleep"}}, nil, 400, "INVALID_REQUEST"},
			{"no page state", "/_edgeq/beat/drop/" + ids[1], url.Values{}, nil, 400, "INVALID_REQUEST"},
			{"not a request id", "/_edgeq/beat/drop/nope", url.Values{"page": {"gone"}}, nil, 400, "INVALID_REQUEST"},
			{"unknown queue", "/_edgeq/beat/nowhere/" + ids[1], url.Values{"page": {"gone"}}, nil, 400, "QUEUE_NOT_FOUND"},
			{"another site", "/_edgeq/beat/drop/" + ids[1], url.Values{"page": {"gone"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, 403, ""},
		}
		for _, c := range cases {
			r := vs[1].do("POST", c.path, c.form, c.header)
			if r.status != c.status || (c.code != "" && r.json["error"] != c.code) {
				t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
			}
		}
	})
}
