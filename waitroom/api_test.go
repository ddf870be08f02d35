package waitroom

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// The status codes of docs/reference.md "Waiting room" for every endpoint, including
// malformed ids, unknown and expired requests. Each case runs against a fresh state built by setup.
func TestEndpoints_StatusCodes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		q := testQueue("drop", 1)
		h := newHarness(t, s, []config.Queue{q}, nil)
		rp := h.replicas[0]
		v := h.visitor(rp)
		served := str(v.assign("drop").json["request_id"])
		h.visitor(rp).assign("drop") // served when the first finishes
		waiting := str(h.visitor(rp).assign("drop").json["request_id"])
		if a := v.generate("drop", served); a.status != 200 {
			t.Fatal(a.body)
		}
		finished := served
		h.adminForm(rp, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {finished}, "status": {"2"}})
		forged := "00000001-0000-8000-8000-000000000000"

		cases := []struct {
			name, method, path string
			form               url.Values
			json               string
			status             int
			code               string
		}{
			{"assign ok", "POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}}, "", 200, ""},
			{"assign json", "POST", "/_edgeq/assign_queue_pos", nil, `{"queue_id":"drop"}`, 200, ""},
			{"assign missing queue_id", "POST", "/_edgeq/assign_queue_pos", url.Values{}, "", 400, "INVALID_REQUEST"},
			{"assign malformed queue_id", "POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"no/such"}}, "", 400, "INVALID_REQUEST"},
			{"assign unknown queue", "POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {"nosuch"}}, "", 400, "QUEUE_NOT_FOUND"},
			{"assign bad json", "POST", "/_edgeq/assign_queue_pos", nil, `{"queue_id":`, 400, "INVALID_REQUEST"},
			{"assign wrong json type", "POST", "/_edgeq/assign_queue_pos", nil, `{"queue_id":["drop"]}`, 400, "INVALID_REQUEST"},
			{"assign oversized", "POST", "/_edgeq/assign_queue_pos", url.Values{"queue_id": {strings.Repeat("a", 20000)}}, "", 413, "PAYLOAD_TOO_LARGE"},
			{"assign GET", "GET", "/_edgeq/assign_queue_pos", nil, "", 405, "METHOD_NOT_ALLOWED"},

			{"queue_pos waiting", "GET", "/_edgeq/queue_pos/drop/" + waiting, nil, "", 200, ""},
			{"queue_pos malformed request id", "GET", "/_edgeq/queue_pos/drop/not-a-uuid", nil, "", 400, "INVALID_REQUEST"},
			{"queue_pos malformed queue id", "GET", "/_edgeq/queue_pos/dr%20op/" + waiting, nil, "", 400, "INVALID_REQUEST"},
			{"queue_pos unknown queue", "GET", "/_edgeq/queue_pos/nosuch/" + waiting, nil, "", 400, "QUEUE_NOT_FOUND"},
			{"queue_pos forged request id", "GET", "/_edgeq/queue_pos/drop/" + forged, nil, "", 404, "REQUEST_NOT_FOUND"},
			{"queue_pos finished", "GET", "/_edgeq/queue_pos/drop/" + finished, nil, "", 410, "EXPIRED"},

			{"serving_pos", "GET", "/_edgeq/serving_pos/drop", nil, "", 200, ""},
			{"serving_pos malformed", "GET", "/_edgeq/serving_pos/a.b", nil, "", 400, "INVALID_REQUEST"},
			{"serving_pos unknown", "GET", "/_edgeq/serving_pos/nosuch", nil, "", 400, "QUEUE_NOT_FOUND"},
			{"waiting_num", "GET", "/_edgeq/waiting_num/drop", nil, "", 200, ""},
			{"waiting_num unknown", "GET", "/_edgeq/waiting_num/nosuch", nil, "", 400, "QUEUE_NOT_FOUND"},

			{"generate not yet served", "POST", "/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {waiting}}, "", 202, "NOT_YET_SERVED"},
			{"generate finished", "POST", "/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {finished}}, "", 410, "EXPIRED"},
			{"generate missing request id", "POST", "/_edgeq/generate_token", url.Values{"queue_id": {"drop"}}, "", 400, "INVALID_REQUEST"},
			{"generate forged", "POST", "/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {forged}}, "", 404, "REQUEST_NOT_FOUND"},
			{"generate unknown queue", "POST", "/_edgeq/generate_token", url.Values{"queue_id": {"zzz"}, "request_id": {waiting}}, "", 400, "QUEUE_NOT_FOUND"},

			{"status waiting", "GET", "/_edgeq/status/drop/" + waiting, nil, "", 200, ""},
			{"status finished", "GET", "/_edgeq/status/drop/" + finished, nil, "", 410, ""},
			{"status malformed", "GET", "/_edgeq/status/drop/xyz", nil, "", 400, "INVALID_REQUEST"},
			{"status forged", "GET", "/_edgeq/status/drop/" + forged, nil, "", 404, "REQUEST_NOT_FOUND"},

			{"jwks", "GET", "/_edgeq/jwks.json", nil, "", 200, ""},
			{"wait page unknown queue", "GET", "/_edgeq/wait/nosuch", nil, "", 404, "QUEUE_NOT_FOUND"},
			{"invitation link unknown queue", "GET", "/_edgeq/invite/nosuch/abc", nil, "", 404, "QUEUE_NOT_FOUND"},
			{"unknown endpoint", "GET", "/_edgeq/nothing", nil, "", 404, "NOT_FOUND"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var header http.Header
				var form url.Values = c.form
				if c.json != "" {
					header = http.Header{"Content-Type": {"application/json"}}
				}
				a := requestWithBody(h, rp, c.method, c.path, form, c.json, header)
				if a.status != c.status {
					t.Fatalf("status %d, want %d: %s", a.status, c.status, a.body)
				}
				if c.code != "" && (a.json["error"] != c.code || a.json["success"] != false) {
					t.Fatalf("body %s, want error %s", a.body, c.code)
				}
				if a.header.Get("X-Correlation-ID") == "" {
					t.Fatal("no X-Correlation-ID")
				}
			})
		}
	})
}

func requestWithBody(h *harness, rp *replica, method, path string, form url.Values, jsonBody string, header http.Header) answer {
	h.t.Helper()
	v := h.visitor(rp)
	if jsonBody == "" {
		return v.do(method, path, form, header)
	}
	req, _ := http.NewRequest(method, rp.public.URL+path, strings.NewReader(jsonBody))
	for k, vals := range header {
		req.Header[k] = vals
	}
	resp, err := v.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return readAnswer(resp)
}

func TestStatusBody(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 1)}, nil)
		rp := h.replicas[0]
		ids := make([]string, 4)
		for i := range ids {
			ids[i] = str(h.visitor(rp).assign("drop").json["request_id"])
		}
		rp.room.tickAll(t.Context())
		a := h.visitor(rp).do("GET", "/_edgeq/status/drop/"+ids[3], nil, nil)
		want := map[string]any{
			"queue_id": "drop", "request_id": ids[3], "queue_status": "waiting", "queue_position": float64(4),
			"serving_position": float64(1), "ahead": float64(2), "total_in_waiting": float64(4), "total_in_active": float64(1),
			"estimated_wait_time": float64(-1), "paused": false, "method": "fifo",
		}
		for k, v := range want {
			if a.json[k] != v {
				t.Errorf("%s = %v, want %v (body %s)", k, a.json[k], v, a.body)
			}
		}
		if len(a.json) != len(want) {
			t.Errorf("fields %v", a.json)
		}
		served := h.visitor(rp).do("GET", "/_edgeq/status/drop/"+ids[0], nil, nil)
		if served.json["queue_status"] != "served" || served.json["estimated_wait_time"] != float64(0) {
			t.Fatalf("served visitor: %s", served.body)
		}
	})
}

// Per-IP limits answer 429 with Retry-After; polls are limited in process, joins on the store.
func TestLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("drop", 0)}, nil)
		rp := h.replicas[0]
		rp.room.limits = config.Limits{JoinPerIPPerMinute: 2, StatusPerIPPerMinute: 3}
		var last answer
		for range 3 {
			last = h.visitor(rp).assign("drop")
		}
		if last.status != 429 || last.json["error"] != "RATE_LIMITED" || last.header.Get("Retry-After") == "" {
			t.Fatalf("third join: %d %s (Retry-After %q)", last.status, last.body, last.header.Get("Retry-After"))
		}
		if n := testutil.ToFloat64(rp.room.rateLimited.WithLabelValues("join")); n != 1 {
			t.Fatalf("edgeq_rate_limited_total{limit=join} %v, want 1", n)
		}
		// serving_pos is not limited; status and queue_pos are, together.
		v := h.visitor(rp)
		for range 5 {
			if a := v.do("GET", "/_edgeq/serving_pos/drop", nil, nil); a.status != 200 {
				t.Fatalf("serving_pos: %d", a.status)
			}
		}
		for i := range 3 {
			last = v.do("GET", "/_edgeq/status/drop/00000001-0000-8000-8000-000000000000", nil, nil)
			if last.status == 429 {
				t.Fatalf("poll %d refused within the limit", i+1)
			}
		}
		last = v.do("GET", "/_edgeq/queue_pos/drop/00000001-0000-8000-8000-000000000000", nil, nil)
		if last.status != 429 || last.header.Get("Retry-After") == "" {
			t.Fatalf("fourth poll: %d %s", last.status, last.body)
		}
		if n := testutil.ToFloat64(rp.room.rateLimited.WithLabelValues("status")); n != 1 {
			t.Fatalf("edgeq_rate_limited_total{limit=status} %v, want 1", n)
		}
	})
}
