package waitroom

import (
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// placesQueue is a queue with no room inside (nobody is served, so every place stays unserved) whose
// addresses may hold limit places each.
func placesQueue(id string, limit int) config.Queue {
	q := testQueue(id, 0)
	q.PlacesPerIP = limit
	return q
}

// The grouped assigner sends the joins of many visitors in one script call: the limit holds per join
// inside it, in arrival order, and the places taken stay gap-free. On the cluster too: an address's
// key carries the queue's hash tag.
func TestPlacesPerIP_TheLimitHoldsPerJoinInsideAGroupedCall(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{placesQueue("drop", 2)}, nil)
		room := h.replicas[0].room
		a := room.placesKey("drop", netip.MustParseAddr("198.51.100.7"))
		b := room.placesKey("drop", netip.MustParseAddr("2001:db8:1:2::7"))
		from := []string{a, b, a, a, b, "", a, b, b, ""} // "": a join without an address is not counted
		reqs := make([]assignReq, len(from))
		for i, k := range from {
			reqs[i] = assignReq{places: k}
		}
		out, err := room.assignNow(t.Context(), "drop", reqs)
		if err != nil {
			t.Fatal(err)
		}
		took := map[string]int{}
		want := []int64{1, 2, 3, 0, 4, 5, 0, 0, 0, 6}
		for i, p := range out {
			if p.pos != want[i] {
				t.Fatalf("join %d (%q): position %d code %d, want position %d", i, from[i], p.pos, p.code, want[i])
			}
			if p.pos == 0 && p.code != codeTooManyPlaces {
				t.Fatalf("join %d refused with code %d, want %d", i, p.code, codeTooManyPlaces)
			}
			if p.pos > 0 {
				took[from[i]]++
			}
		}
		if took[a] != 2 || took[b] != 2 {
			t.Fatalf("places taken per address: %v", took)
		}
		// A call of its own refuses them as well; another queue counts apart.
		out, err = room.assignNow(t.Context(), "drop", []assignReq{{places: a}, {places: b}})
		if err != nil || out[0].code != codeTooManyPlaces || out[1].code != codeTooManyPlaces {
			t.Fatalf("a later call: %+v %v", out, err)
		}
	})
}

// The per-IP join rate comes first: a join it refuses is RATE_LIMITED even past places_per_ip, and a
// join refused TOO_MANY_PLACES was one of the rate's attempts. Each refusal has its own label.
func TestPlacesPerIP_CheckedAfterTheJoinRate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := buildHarness(t, s, []config.Queue{placesQueue("drop", 2)}, nil)
		h.limits = config.Limits{JoinPerIPPerMinute: 3}
		rp := h.addReplica()
		for i, want := range []string{"", "", "TOO_MANY_PLACES", "RATE_LIMITED"} {
			a := h.visitor(rp).assign("drop")
			if str(a.json["error"]) != want || (want == "") != (a.status == 200) {
				t.Fatalf("join %d: %d %s, want %q", i, a.status, a.body, want)
			}
		}
		for limit, want := range map[string]float64{"join": 1, "places": 1} {
			if got := testutil.ToFloat64(rp.room.rateLimited.WithLabelValues(limit)); got != want {
				t.Errorf(`edgeq_rate_limited_total{limit=%q} = %v, want %v`, limit, got, want)
			}
		}
	})
}

// places_per_ip in the admin queue API: set on create, changed by update (and kept by an update that
// does not name it), shown, validated; a lowered limit keeps the places held. A queue deleted and
// created again starts a new count: its address's places of before are gone with it.
func TestPlacesPerIP_InTheAdminQueueAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, nil, nil)
		rp := h.replicas[0]
		if a := h.adminJSON(rp, "POST", "/api/queue", `{"queue_id":"adhoc","capacity":0,"places_per_ip":2}`); a.status != 200 || num(a.json["places_per_ip"]) != 2 {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		join := func(want int) {
			t.Helper()
			if a := h.visitor(rp).assign("adhoc"); a.status != want {
				t.Fatalf("join: %d %s, want %d", a.status, a.body, want)
			}
		}
		join(200)
		join(200)
		join(429)
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"adhoc","places_per_ip":1}`); a.status != 200 || num(a.json["places_per_ip"]) != 1 {
			t.Fatalf("update: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"adhoc","capacity":0}`); a.status != 200 ||
			num(a.json["places_per_ip"]) != 1 || num(a.json["waiting_num"]) != 2 || num(a.json["assigned_pos"]) != 2 {
			t.Fatalf("an update that does not name it: %d %s", a.status, a.body)
		}
		join(429)
		if a := h.adminJSON(rp, "PUT", "/api/queue", `{"queue_id":"adhoc","places_per_ip":0}`); a.status != 200 || num(a.json["places_per_ip"]) != 0 {
			t.Fatalf("no limit: %d %s", a.status, a.body)
		}
		join(200)
		for _, body := range []string{`{"queue_id":"adhoc","places_per_ip":-1}`, `{"queue_id":"adhoc","places_per_ip":1001}`} {
			if a := h.adminJSON(rp, "PUT", "/api/queue", body); a.status != 400 || a.json["error"] != "INVALID_REQUEST" {
				t.Fatalf("%s: %d %s", body, a.status, a.body)
			}
		}
		if a := h.adminJSON(rp, "DELETE", "/api/queue/adhoc", ""); a.status != 200 {
			t.Fatalf("delete: %d %s", a.status, a.body)
		}
		if a := h.adminJSON(rp, "POST", "/api/queue", `{"queue_id":"adhoc","capacity":0,"places_per_ip":1}`); a.status != 200 {
			t.Fatalf("create again: %d %s", a.status, a.body)
		}
		eventually(t, 5*time.Second, "the new queue's snapshot", func() bool {
			s := rp.room.snapshotOf(t.Context(), "adhoc")
			return s != nil && s.Counter == 0
		})
		join(200)
		join(429)
	})
}

// An address's key is a keyed hash of its /32 or /64 under the queue's hash tag: no address in it,
// one key for every address of a /64 and for an IPv4 address however written, another per queue and
// per MAC key.
func TestPlacesKey_AKeyedHashUnderTheQueuesTag(t *testing.T) {
	keys := store.Keys{Prefix: "edgeq"}
	hashes, other := newAddressHashes([]byte("a key")), newAddressHashes([]byte("another key"))
	key := func(a addressHashes, queue, addr string) string {
		return placesKey(keys, queue, a.of(queue, netip.MustParseAddr(addr)))
	}
	v4 := key(hashes, "drop", "198.51.100.7")
	if !regexp.MustCompile(`^edgeq:\{q:drop\}:ip:[0-9a-f]{32}$`).MatchString(v4) {
		t.Fatalf("key %q", v4)
	}
	v6 := key(hashes, "drop", "2001:db8:1:2::7")
	for _, c := range []struct {
		got, want string
		same      bool
	}{
		{key(hashes, "drop", "::ffff:198.51.100.7"), v4, true},
		{key(hashes, "drop", "198.51.100.8"), v4, false},
		{key(hashes, "drop", "2001:db8:1:2:ffff:ffff:ffff:ffff"), v6, true},
		{key(hashes, "drop", "2001:db8:1:3::7"), v6, false},
		{key(other, "drop", "198.51.100.7"), v4, false},
	} {
		if (c.got == c.want) != c.same {
			t.Errorf("%q and %q: same %v, want %v", c.got, c.want, c.got == c.want, c.same)
		}
	}
	if a, b := hashes.of("club", netip.MustParseAddr("198.51.100.7")), hashes.of("drop", netip.MustParseAddr("198.51.100.7")); a == b {
		t.Errorf("two queues share an address's hash: %q", a)
	}
	if got := hashes.of("drop", netip.Addr{}); got != "" {
		t.Errorf("no address: hash %q, want none", got)
	}
}
