package waitroom

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestAdminQueueAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 2)}, nil)
		rp := h.replicas[0]

		a := h.adminJSON(rp, "POST", "/api/queue", `{"queue_id":"vip","token_validity_second":120,
			"enable_queue_position_expiry":true,"position_expiry_second":60,"capacity":5,"title":"VIP room"}`)
		if a.status != 200 || a.json["id"] != "vip" || a.json["queue_id"] != "vip" || num(a.json["capacity"]) != 5 ||
			num(a.json["token_validity_second"]) != 120 || a.json["enable_queue_position_expiry"] != true ||
			num(a.json["position_expiry_second"]) != 60 || a.json["from_config"] != false {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "POST", "/api/queue", `{"queue_id":"vip"}`); a.status != 409 || a.json["error"] != "QUEUE_EXISTS" {
			t.Fatalf("create twice: %d %s", a.status, a.body)
		}
		// PUT changes only the fields it names.
		a = h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"vip","capacity":7,"enable_queue_position_expiry":false}`)
		if a.status != 200 || num(a.json["capacity"]) != 7 || num(a.json["token_validity_second"]) != 120 ||
			a.json["enable_queue_position_expiry"] != false || a.json["title"] != "VIP room" {
			t.Fatalf("update: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"nope","capacity":1}`); a.status != 404 {
			t.Fatalf("update unknown: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/vip", ""); a.status != 200 || num(a.json["capacity"]) != 7 {
			t.Fatalf("get: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/nope", ""); a.status != 404 {
			t.Fatalf("get unknown: %d", a.status)
		}
		a = h.adminJSON(rp, "GET", "/api/queues", "")
		items, _ := a.json["items"].([]any)
		if a.status != 200 || len(items) != 2 || num(a.json["total_count"]) != 2 || num(a.json["page"]) != 1 || num(a.json["page_size"]) != 2 {
			t.Fatalf("list: %s", a.body)
		}
		// A page of the list, sorted by id; past the end is empty; a bad page_size is refused.
		a = h.adminJSON(rp, "GET", "/api/queues?page=2&page_size=1", "")
		items, _ = a.json["items"].([]any)
		if a.status != 200 || len(items) != 1 || items[0].(map[string]any)["queue_id"] != "vip" ||
			num(a.json["total_count"]) != 2 || num(a.json["page"]) != 2 || num(a.json["page_size"]) != 1 {
			t.Fatalf("list page 2: %s", a.body)
		}
		if a := h.adminJSON(rp, "GET", "/api/queues?page=3&page_size=1", ""); a.status != 200 || len(a.json["items"].([]any)) != 0 || num(a.json["total_count"]) != 2 {
			t.Fatalf("list past the end: %s", a.body)
		}
		if a := h.adminJSON(rp, "GET", "/api/queues?page_size=0", ""); a.status != 400 || a.json["error"] != "INVALID_REQUEST" || a.json["field"] != "page_size" {
			t.Fatalf("list with page_size=0: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "DELETE", "/api/queue/vip", ""); a.status != 200 {
			t.Fatalf("delete: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "DELETE", "/api/queue/vip", ""); a.status != 404 {
			t.Fatalf("delete twice: %d", a.status)
		}
		// A queue of the configuration file comes back after a delete, empty.
		if a := h.adminJSON(rp, "DELETE", "/api/queue/drop", ""); a.status != 200 || a.json["recreated_from_config"] != true {
			t.Fatalf("delete a configured queue: %s", a.body)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/drop", ""); a.status != 200 || num(a.json["assigned_pos"]) != 0 {
			t.Fatalf("configured queue after delete: %d %s", a.status, a.body)
		}
	})
}

func TestAdminQueueAPI_BadInputChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 2)}, nil)
		rp := h.replicas[0]
		bad := []struct{ name, method, body string }{
			{"unknown field", "POST", `{"queue_id":"x","capacityy":3}`},
			{"wrong type", "POST", `{"queue_id":"x","capacity":"3"}`},
			{"negative capacity", "POST", `{"queue_id":"x","capacity":-1}`},
			{"bad id", "POST", `{"queue_id":"x y"}`},
			{"missing id", "POST", `{"capacity":3}`},
			{"ttl too long", "POST", `{"queue_id":"x","token_validity_second":999999}`},
			{"id mismatch", "POST", `{"id":"x","queue_id":"y"}`},
			{"not json", "POST", `queue_id=x`},
			{"trailing data", "POST", `{"queue_id":"x"} {}`},
			{"update unknown field", "PUT", `{"queue_id":"drop","nope":1}`},
			{"update bad value", "PUT", `{"queue_id":"drop","abandon_after_second":3}`},
		}
		for _, c := range bad {
			a := h.adminJSON(rp, c.method, "/api/queue", c.body)
			if a.status != 400 || a.json["error"] != "INVALID_REQUEST" {
				t.Errorf("%s: %d %s", c.name, a.status, a.body)
			}
		}
		a := h.adminJSON(rp, "GET", "/api/queue/drop", "")
		if num(a.json["capacity"]) != 2 || num(a.json["abandon_after_second"]) != 0 {
			t.Fatalf("a refused update changed the queue: %s", a.body)
		}
		if a := h.adminJSON(rp, "GET", "/api/queues", ""); num(a.json["total_count"]) != 1 {
			t.Fatalf("a refused create made a queue: %s", a.body)
		}
	})
}

func TestAdminIncrementAndActiveTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 0)}, nil)
		rp := h.replicas[0]
		ids := make([]string, 5)
		vs := make([]*visitor, 5)
		for i := range ids {
			vs[i] = h.visitor(rp)
			ids[i] = str(vs[i].assign("drop").json["request_id"])
		}
		// Capacity 0: nobody is served until the operator moves the serving position.
		if a := vs[0].generate("drop", ids[0]); a.status != http.StatusAccepted {
			t.Fatalf("capacity 0: %d", a.status)
		}
		a := h.adminForm(rp, "/api/queue/increment_serving_position", url.Values{"queue_id": {"drop"}, "increment_by": {"2"}})
		if a.status != 200 || num(a.json["serving_pos"]) != 2 {
			t.Fatalf("increment: %d %s", a.status, a.body)
		}
		for i := range 2 {
			if a := vs[i].generate("drop", ids[i]); a.status != 200 {
				t.Fatalf("visitor %d after increment: %d", i+1, a.status)
			}
		}
		if a := vs[2].generate("drop", ids[2]); a.status != http.StatusAccepted {
			t.Fatalf("visitor 3: %d", a.status)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/drop/active_token_num", ""); num(a.json["active_num"]) != 2 {
			t.Fatalf("active_token_num: %s", a.body)
		}
		// Past the last assigned position, the serving position stops there.
		if a := h.adminForm(rp, "/api/queue/increment_serving_position", url.Values{"queue_id": {"drop"}, "increment_by": {"100"}}); num(a.json["serving_pos"]) != 5 {
			t.Fatalf("increment past the end: %s", a.body)
		}
		for _, form := range []url.Values{
			{"queue_id": {"drop"}, "increment_by": {"0"}},
			{"queue_id": {"drop"}, "increment_by": {"-1"}},
			{"queue_id": {"drop"}, "increment_by": {"x"}},
			{"queue_id": {"drop"}, "increment_by": {"100001"}},
			{"queue_id": {"d d"}, "increment_by": {"1"}},
		} {
			if a := h.adminForm(rp, "/api/queue/increment_serving_position", form); a.status != 400 {
				t.Errorf("%v: %d", form, a.status)
			}
		}
		if a := h.adminForm(rp, "/api/queue/increment_serving_position", url.Values{"queue_id": {"nope"}, "increment_by": {"1"}}); a.status != 404 {
			t.Errorf("unknown queue: %d", a.status)
		}
		// update_token_status refusals.
		for name, c := range map[string]struct {
			form   url.Values
			status int
		}{
			"bad status":      {url.Values{"queue_id": {"drop"}, "request_id": {ids[0]}, "status": {"3"}}, 400},
			"bad request id":  {url.Values{"queue_id": {"drop"}, "request_id": {"x"}, "status": {"1"}}, 400},
			"forged":          {url.Values{"queue_id": {"drop"}, "request_id": {"00000001-0000-8000-8000-000000000000"}, "status": {"1"}}, 404},
			"unknown queue":   {url.Values{"queue_id": {"nope"}, "request_id": {ids[0]}, "status": {"1"}}, 404},
			"complete twice":  {url.Values{"queue_id": {"drop"}, "request_id": {ids[1]}, "status": {"1"}}, 200},
			"then abandon it": {url.Values{"queue_id": {"drop"}, "request_id": {ids[1]}, "status": {"2"}}, 409},
		} {
			if name == "complete twice" {
				h.adminForm(rp, "/api/queue/update_token_status", c.form)
			}
			if name == "then abandon it" {
				h.adminForm(rp, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {ids[1]}, "status": {"1"}})
			}
			if a := h.adminForm(rp, "/api/queue/update_token_status", c.form); a.status != c.status {
				t.Errorf("%s: %d %s", name, a.status, a.body)
			}
		}
	})
}

// The admin API is behind the key.
func TestAdminQueueAPI_NeedsTheKey(t *testing.T) {
	h := newHarness(t, storetest.Embedded(t), []config.Queue{testQueue("drop", 2)}, nil)
	resp, err := http.Post(h.replicas[0].admin.URL+"/api/queue/increment_serving_position", "application/x-www-form-urlencoded",
		strings.NewReader("queue_id=drop&increment_by=5"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without the key: %d", resp.StatusCode)
	}
}

// Pausing a queue stops serving newcomers even with room inside; joins go on, the operator can still
// move the serving position by hand, a reload of the configuration keeps the pause, and resuming
// serves at once.
func TestAdminPauseAndResume(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		q := testQueue("drop", 10)
		h := newHarness(t, s, []config.Queue{q}, nil)
		rp := h.replicas[0]
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"drop","paused":true}`); a.status != 200 || a.json["paused"] != true {
			t.Fatalf("pause: %d %s", a.status, a.body)
		}
		vs := make([]*visitor, 3)
		ids := make([]string, 3)
		for i := range vs {
			vs[i] = h.visitor(rp)
			a := vs[i].assign("drop")
			if a.status != 200 {
				t.Fatalf("join while paused: %d %s", a.status, a.body)
			}
			ids[i] = str(a.json["request_id"])
		}
		if a := vs[0].generate("drop", ids[0]); a.status != http.StatusAccepted {
			t.Fatalf("paused queue with room served someone: %d", a.status)
		}
		// A reload that does not touch the queue, and one that does, both keep it paused.
		if err := rp.room.Apply(context.Background(), []config.Queue{q}, []config.Queue{q}); err != nil {
			t.Fatal(err)
		}
		q2 := q
		q2.Title = "Renamed"
		if err := rp.room.Apply(context.Background(), []config.Queue{q2}, []config.Queue{q}); err != nil {
			t.Fatal(err)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/drop", ""); a.json["paused"] != true || a.json["title"] != "Renamed" {
			t.Fatalf("after reloads: %s", a.body)
		}
		if a := h.adminForm(rp, "/api/queue/increment_serving_position", url.Values{"queue_id": {"drop"}, "increment_by": {"1"}}); num(a.json["serving_pos"]) != 1 {
			t.Fatalf("manual increment while paused: %s", a.body)
		}
		if a := vs[0].generate("drop", ids[0]); a.status != 200 {
			t.Fatalf("served by hand while paused: %d", a.status)
		}
		if a := vs[1].generate("drop", ids[1]); a.status != http.StatusAccepted {
			t.Fatalf("second visitor served while paused: %d", a.status)
		}
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"drop","paused":false}`); a.status != 200 || a.json["paused"] != false {
			t.Fatalf("resume: %d %s", a.status, a.body)
		}
		for i := 1; i < 3; i++ {
			if a := vs[i].generate("drop", ids[i]); a.status != 200 {
				t.Fatalf("visitor %d after resume: %d", i+1, a.status)
			}
		}
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"drop","paused":"yes"}`); a.status != 400 {
			t.Fatalf("paused of the wrong type: %d", a.status)
		}
	})
}

// A change made through the admin API survives a replica that starts with the same configuration
// file, and gives way once the file's entry for the queue changes.
func TestAdminChange_LastsUntilTheFileChanges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		q := testQueue("drop", 10)
		h := newHarness(t, s, []config.Queue{q}, nil)
		rp := h.replicas[0]
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"drop","capacity":25,"title":"Set by hand"}`); a.status != 200 {
			t.Fatalf("put: %d %s", a.status, a.body)
		}
		// A replica starting (no previous configuration) with the same file.
		if err := rp.room.Apply(context.Background(), []config.Queue{q}, nil); err != nil {
			t.Fatal(err)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/drop", ""); num(a.json["capacity"]) != 25 || a.json["title"] != "Set by hand" {
			t.Fatalf("a start with the same file undid the admin change: %s", a.body)
		}
		// A reload that leaves the entry alone changes nothing either.
		if err := rp.room.Apply(context.Background(), []config.Queue{q}, []config.Queue{q}); err != nil {
			t.Fatal(err)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/drop", ""); num(a.json["capacity"]) != 25 {
			t.Fatalf("an unchanged reload undid the admin change: %s", a.body)
		}
		// A start with a changed entry writes the file's settings.
		q2 := q
		q2.Capacity = 15
		if err := rp.room.Apply(context.Background(), []config.Queue{q2}, nil); err != nil {
			t.Fatal(err)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/drop", ""); num(a.json["capacity"]) != 15 || a.json["title"] == "Set by hand" {
			t.Fatalf("a changed file entry was not applied: %s", a.body)
		}
		// And after that, a start with that same file keeps the next admin change again.
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"drop","capacity":40}`); a.status != 200 {
			t.Fatalf("put: %d %s", a.status, a.body)
		}
		if err := rp.room.Apply(context.Background(), []config.Queue{q2}, nil); err != nil {
			t.Fatal(err)
		}
		if a := h.adminJSON(rp, "GET", "/api/queue/drop", ""); num(a.json["capacity"]) != 40 {
			t.Fatalf("a second start undid the admin change: %s", a.body)
		}
	})
}
