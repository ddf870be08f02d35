package waitroom

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// The not-open page names the drop and shows its opening in UTC (the page without JavaScript); its
// script's look at the schedule (the page's URL asked for JSON) takes no place, follows an opening the
// operator moves, and says when the pre-queue has begun, still without taking a place.
func TestNotOpenPage_ScheduleFollowsTheOperatorWithoutTakingAPlace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		later := testQueue("later", 5)
		later.Title = "Next week's drop"
		opens := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		later.OpensAt = opens.Format(time.RFC3339)
		later.Prequeue = 10 * time.Minute
		h := newHarness(t, s, []config.Queue{later}, nil)
		v := h.visitor(h.replicas[0])

		page := v.do("GET", "/_edgeq/wait/later?return=%2F", nil, http.Header{"Accept": {"text/html"}})
		clock := `<time class="local-time" datetime="` + later.OpensAt + `">` + opens.Format("2006-01-02 15:04") + ` UTC</time>`
		for _, want := range []string{`<hgroup><h1>Next week&#39;s drop</h1><p class="phase">Not open yet</p></hgroup>`, clock, `data-poll="30000"`} {
			if page.status != 200 || !strings.Contains(page.body, want) {
				t.Fatalf("not-open page lacks %s: %d %s", want, page.status, page.body)
			}
		}

		look := func() answer {
			t.Helper()
			a := v.do("GET", "/_edgeq/wait/later?return=%2F", nil, http.Header{"Accept": {"application/json"}, "Sec-Fetch-Site": {"same-origin"}, "Sec-Fetch-Dest": {"empty"}})
			if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") || a.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("schedule: %d %v %s", a.status, a.header, a.body)
			}
			return a
		}
		a := look()
		if a.json["queue_id"] != "later" || a.json["state"] != "not_open" || a.json["opens_at"] != later.OpensAt ||
			num(a.json["opens_in"]) < 3500 || num(a.json["joins_in"]) < 2900 || num(a.json["joins_in"]) > 3000 {
			t.Fatalf("schedule before the pre-queue: %s", a.body)
		}

		// The operator moves the opening four hours later: the next look says so.
		moved := opens.Add(4 * time.Hour).Format(time.RFC3339)
		if r := h.adminJSON(h.replicas[0], "PUT", "/api/queue", `{"queue_id": "later", "opens_at": "`+moved+`"}`); r.status != 200 {
			t.Fatalf("moving the opening: %d %s", r.status, r.body)
		}
		eventually(t, 5*time.Second, "the schedule shows the moved opening", func() bool {
			a = look()
			return a.json["opens_at"] == moved
		})
		if num(a.json["opens_in"]) < 5*3600-100 || a.json["state"] != "not_open" {
			t.Fatalf("schedule after the move: %s", a.body)
		}

		// The pre-queue begins (the opening five minutes away): the look says so and takes no place.
		soon := time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)
		h.adminJSON(h.replicas[0], "PUT", "/api/queue", `{"queue_id": "later", "opens_at": "`+soon+`"}`)
		eventually(t, 5*time.Second, "the schedule says the pre-queue has begun", func() bool {
			a = look()
			return a.json["state"] == "prequeue"
		})
		if a.json["opens_at"] != soon || a.json["joins_in"] != nil {
			t.Fatalf("schedule in the pre-queue: %s", a.body)
		}
		if info := h.adminJSON(h.replicas[0], "GET", "/api/queue/later", ""); num(info.json["assigned_pos"]) != 0 {
			t.Fatalf("a look at the schedule took a place: %s", info.body)
		}
		for _, c := range a.header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "edgeq_rq_") {
				t.Fatalf("a look at the schedule set a request cookie: %s", c)
			}
		}

		// The page itself, loaded now, takes the place and shows the pre-queue, under the drop's name.
		page = v.do("GET", "/_edgeq/wait/later?return=%2F", nil, http.Header{"Accept": {"text/html"}})
		if page.status != 200 || !strings.Contains(page.body, `<hgroup><h1>Next week&#39;s drop</h1><p class="phase">You are in the pre-queue</p></hgroup>`) {
			t.Fatalf("pre-queue page: %d %s", page.status, page.body)
		}
		if info := h.adminJSON(h.replicas[0], "GET", "/api/queue/later", ""); num(info.json["assigned_pos"]) != 1 {
			t.Fatalf("the page load took no place: %s", info.body)
		}
	})
}
