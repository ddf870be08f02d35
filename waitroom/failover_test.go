package waitroom

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// A counter that goes back (the store lost its last writes) must not hand a place out
// twice. The replica that handed the lost places out raises the counter above them with its next call;
// another replica learns of them from the request ids their visitors show it (a poll, a token) and
// raises it with its next tick.
func TestFailover_PositionsResumeAboveTheHighestSeen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		h := buildHarness(t, s, []config.Queue{testQueue("q", 1)}, nil)
		a := h.addReplica()
		var first []string // request ids of positions 1..10, each visitor's own
		var visitors []*visitor
		for range 10 {
			v := h.visitor(a)
			ans := v.assign("q")
			if ans.status != 200 {
				t.Fatalf("join: %d %s", ans.status, ans.body)
			}
			first, visitors = append(first, str(ans.json["request_id"])), append(visitors, v)
		}
		counter := queueKeys(s.Keys, "q")[1]
		lose := func(to int64) {
			// What a failover with lag does: the promoted replica never saw the last joins.
			if err := s.Client.Set(ctx, counter, to, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		held := map[string]bool{}
		for _, id := range first {
			held[id] = true
		}
		join := func(rp *replica) (string, int64) {
			t.Helper()
			ans := h.visitor(rp).assign("q")
			if ans.status != 200 {
				t.Fatalf("join: %d %s", ans.status, ans.body)
			}
			id := str(ans.json["request_id"])
			if held[id] {
				t.Fatalf("request id %s handed out twice", id)
			}
			held[id] = true
			pos, ok := rp.room.ids.position("q", rp.room.tracked("q").snap.Load().Epoch, id)
			if !ok {
				t.Fatalf("request id %s does not verify", id)
			}
			return id, pos
		}

		// The replica that handed them out: its next join goes above them.
		lose(5)
		v11 := h.visitor(a)
		ans := v11.assign("q")
		if ans.status != 200 {
			t.Fatalf("join: %d %s", ans.status, ans.body)
		}
		if pos, _ := a.room.ids.position("q", a.room.tracked("q").snap.Load().Epoch, str(ans.json["request_id"])); pos != 11 {
			t.Fatalf("after the counter went back to 5, a join on the replica that handed out 1..10 got %d, want 11", pos)
		}
		first, visitors = append(first, str(ans.json["request_id"])), append(visitors, v11)
		held[str(ans.json["request_id"])] = true

		// That replica is gone (it died with the master), and another, started after the failover, never
		// saw 6..11. The visitors holding them poll it; its tick then raises the counter, and its next
		// join goes above them.
		a.cancel()
		time.Sleep(100 * time.Millisecond) // its last tick is over
		lose(5)
		b := h.addReplica()
		eventually(t, 5*time.Second, "b's first snapshot", func() bool { return b.room.tracked("q").snap.Load() != nil })
		if got := b.room.tracked("q").floor(); got != 5 {
			t.Fatalf("b's floor %d before any visitor showed it more, want 5", got)
		}
		for i, v := range visitors[5:] {
			v.base = b.public.URL
			if ans := v.do("GET", "/_edgeq/status/q/"+first[5+i], nil, nil); ans.status != 200 {
				t.Fatalf("status of position %d on b: %d %s", 6+i, ans.status, ans.body)
			}
		}
		eventually(t, 5*time.Second, "the store's counter raised to what b's visitors showed it", func() bool {
			n, _ := s.Client.Get(ctx, counter).Int64()
			return n >= 11
		})
		if _, pos := join(b); pos != 12 {
			t.Fatalf("a join on b got %d, want 12: 6..11 are held by visitors who showed b their request ids", pos)
		}
		var restored string
		restored, _ = s.Client.HGet(ctx, queueKeys(s.Keys, "q")[0], "restored").Result()
		if restored == "" || restored == "0" {
			t.Fatalf("the queue's restored count is %q", restored)
		}
	})
}

// The same with a real failover: two replicas, each with its own client of a Sentinel-managed
// master whose replica lags 150 ms behind it (another zone); visitors join on both all along; the master
// is lost mid-stream (its machine and what it had on the wire: LoseMaster) and the lagging replica
// promoted. No request id (no place) is handed out twice, though the promoted replica lost the last
// joins.
func TestFailover_TwoVisitorsNeverHoldOnePlace(t *testing.T) {
	top := storetest.Topology(t, redisserver.TopologyOptions{Replicas: []redisserver.ReplicaOptions{{Delay: 150 * time.Millisecond}}})
	open := func() *store.Store {
		cfg := config.Default().Redis
		cfg.Addrs, cfg.MasterName, cfg.KeyPrefix = top.SentinelAddrs(), top.MasterName(), "fo"
		st, err := store.Open(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	h := buildHarness(t, open(), []config.Queue{testQueue("q", 1)}, nil)
	replicas := []*replica{h.addReplicaOn(h.store), h.addReplicaOn(open())}

	var mu sync.Mutex
	held := map[string]int{} // request id -> times handed out
	var before, after atomic.Int64
	var failedOver atomic.Bool
	stop := make(chan struct{})
	var joiners sync.WaitGroup
	for i := range 8 {
		rp := replicas[i%2]
		joiners.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, ok := joinOnce(rp.public.URL)
				if !ok {
					time.Sleep(20 * time.Millisecond) // the store is away: 503
					continue
				}
				mu.Lock()
				held[id]++
				mu.Unlock()
				if failedOver.Load() {
					after.Add(1)
				} else {
					before.Add(1)
				}
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	from, err := top.LoseMaster()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := top.WaitFailover(ctx, from); err != nil {
		t.Fatal(err)
	}
	failedOver.Store(true)
	time.Sleep(4 * time.Second)
	close(stop)
	joiners.Wait()

	if before.Load() == 0 || after.Load() == 0 {
		t.Fatalf("joins before the failover %d, after %d: the test saw no traffic on one side", before.Load(), after.Load())
	}
	for id, n := range held {
		if n > 1 {
			t.Errorf("request id %s (one place) handed to %d visitors", id, n)
		}
	}
	restored, _ := h.store.Client.HGet(context.Background(), queueKeys(h.store.Keys, "q")[0], "restored").Int64()
	t.Logf("joins: %d before the kill, %d after the failover; %d places restored above the promoted replica's counter",
		before.Load(), after.Load(), restored)
}

// With redis.wait_replicas, a lottery's draw, an invitation's use and a revocation
// count only once the replicas hold them. Here the store has one replica: wait_replicas 2 is never
// confirmed, wait_replicas 1 is.
func TestReplicaWait_DrawInvitationAndRevocationWaitForTheReplicas(t *testing.T) {
	s, _ := storetest.Replicated(t, 0)
	s.SetWaitReplicas(2, 50*time.Millisecond)
	h := buildHarness(t, s, []config.Queue{dropQueue("drop", 10, true), testQueue("q", 2)}, nil)
	rp := h.addReplica()
	statuses := func(places []*place) map[string]int {
		out := map[string]int{}
		for _, p := range places {
			a := h.visitor(rp).do("GET", "/_edgeq/status/drop/"+p.requestID, nil, nil)
			out[str(a.json["queue_status"])]++
		}
		return out
	}

	// The draw: the pre-queue's five are drawn by lot at the opening, and nobody is served while the
	// replicas have not confirmed the draw, not even by the operator.
	pre := h.joinAll("drop", 5, 1)
	open := fmt.Sprintf(`{"queue_id": "drop", "opens_at": %q}`, time.Now().Add(-time.Second).UTC().Format(time.RFC3339))
	if a := h.adminJSON(rp, "PUT", "/api/queue", open); a.status != 200 {
		t.Fatalf("open: %d %s", a.status, a.body)
	}
	for range 3 {
		rp.room.tickAll(t.Context())
	}
	if got := statuses(pre); got["waiting"] != 5 {
		t.Fatalf("with the draw unconfirmed: %v, want all 5 waiting", got)
	}
	if a := h.adminForm(rp, "/api/queue/increment_serving_position", url.Values{"queue_id": {"drop"}, "increment_by": {"1"}}); a.status != 503 {
		t.Fatalf("serving by hand with the draw unconfirmed: %d %s", a.status, a.body)
	}
	s.SetWaitReplicas(1, 2*time.Second)
	eventually(t, 10*time.Second, "the pre-queue served once the draw is on the replica", func() bool {
		return statuses(pre)["served"] == 5
	})
	lot, _ := h.adminJSON(rp, "GET", "/api/queue/drop", "").json["lottery"].(map[string]any)
	if num(lot["size"]) != 5 {
		t.Fatalf("lottery: %v", lot)
	}

	// An invitation's use: undone and answered 503 while unconfirmed; the link then works.
	s.SetWaitReplicas(2, 50*time.Millisecond)
	made := h.adminJSON(rp, "POST", "/api/queue/q/invites", `{"count": 1}`)
	link := str(made.json["items"].([]any)[0].(map[string]any)["url"])
	guest := h.visitor(rp)
	sameOrigin := http.Header{"Sec-Fetch-Site": {"same-origin"}}
	if a := guest.do("POST", link, url.Values{}, sameOrigin); a.status != 503 || a.json["error"] != "STORE_UNAVAILABLE" {
		t.Fatalf("invitation with the use unconfirmed: %d %s", a.status, a.body)
	}
	if used := h.adminJSON(rp, "GET", "/api/queue/q/invites?used=true", ""); num(used.json["total_count"]) != 0 {
		t.Fatalf("an unconfirmed use is kept: %s", used.body)
	}
	s.SetWaitReplicas(1, 2*time.Second)
	if a := guest.do("POST", link, url.Values{}, sameOrigin); a.status != http.StatusSeeOther {
		t.Fatalf("invitation once the replica confirms: %d %s", a.status, a.body)
	}
	if used := h.adminJSON(rp, "GET", "/api/queue/q/invites?used=true", ""); num(used.json["total_count"]) != 1 {
		t.Fatalf("the confirmed use: %s", used.body)
	}

	// A revocation: 503 while unconfirmed; the same call again once the replica confirms: 200.
	v := h.visitor(rp)
	j := v.assign("q")
	id := str(j.json["request_id"])
	eventually(t, 5*time.Second, "the visitor served", func() bool { return v.generate("q", id).status == 200 })
	s.SetWaitReplicas(2, 50*time.Millisecond)
	end := url.Values{"queue_id": {"q"}, "request_id": {id}, "status": {"1"}}
	if a := h.adminForm(rp, "/api/queue/update_token_status", end); a.status != 503 {
		t.Fatalf("revocation unconfirmed: %d %s", a.status, a.body)
	}
	s.SetWaitReplicas(1, 2*time.Second)
	if a := h.adminForm(rp, "/api/queue/update_token_status", end); a.status != 200 || a.json["queue_status"] != "completed" {
		t.Fatalf("revocation again, confirmed: %d %s", a.status, a.body)
	}
}

// joinOnce joins queue q as a new visitor: its request id, or false when the join was refused.
func joinOnce(base string) (string, bool) {
	resp, err := http.Post(base+"/_edgeq/assign_queue_pos", "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"queue_id": {"q"}}.Encode()))
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		RequestID string `json:"request_id"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(raw, &body) != nil || body.RequestID == "" {
		return "", false
	}
	return body.RequestID, true
}
