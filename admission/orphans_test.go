package admission

import (
	"context"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// The unsettled admissions of a replica whose liveness lease ran out follow their
// route's orphans setting once older than origin.timeout; those of a live replica, of a replica that
// never held a lease, or younger ones, are left alone. Each is counted once however many sweeps and
// replicas see it.
func TestOrphans_ADeadReplicasUnsettledAdmissionsFollowTheRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const units = 10
		sweeper := newStack(t, s, product("p", units, 1), product("q", units, 1))
		dead := sweeper.replica(2)  // node 2: its lease ran out
		alive := sweeper.replica(3) // node 3: renews its lease
		ancient := sweeper.replica(4)
		sweeper.svc.o.OrphanAfter = 200 * time.Millisecond
		routes := []config.Route{
			{Name: "add", Admission: config.Admission{Type: "stock", Orphans: config.OrphansRelease}},
			{Name: "keep", Admission: config.Admission{Type: "stock", Orphans: config.OrphansHold}},
		}
		useOrphans(t, sweeper.svc, routes)
		if err := alive.svc.renewLease(ctx); err != nil {
			t.Fatal(err)
		}
		if err := dead.svc.renewLease(ctx); err != nil {
			t.Fatal(err)
		}
		// The dead replica's lease ran out a moment more than the sweep's margin ago (it renewed it,
		// then died).
		s.Client.HSet(ctx, livenessKey(s.Keys), "2", time.Now().Add(-sweepMargin-time.Second).UnixMilli())

		admit := func(st *stack, product, user, route string) string {
			t.Helper()
			c := Claim{Owner: product, User: st.svc.pseudonyms.of(user), ID: st.svc.o.IDs.NextString(), Value: 1, Route: route}
			res, err := reserveNow(ctx, st.svc, product, []Claim{c})
			if err != nil || res[0].code != 0 {
				t.Fatalf("admit %s: %v %v", user, res, err)
			}
			return c.ID
		}
		released := []string{admit(dead, "p", "a", "add"), admit(dead, "p", "b", "add")}
		held := admit(dead, "q", "c", "keep")
		unknownRoute := admit(dead, "q", "d", "gone") // a route no longer in the file: held
		kept := []string{admit(alive, "p", "e", "add"), admit(ancient, "p", "f", "add")}
		time.Sleep(300 * time.Millisecond) // older than origin.timeout (OrphanAfter)
		young := admit(dead, "p", "g", "add")

		sweep(ctx, sweeper.svc)
		sweep(ctx, sweeper.svc) // again, as every replica's worker does: nothing twice
		useOrphans(t, alive.svc, routes)
		alive.svc.o.OrphanAfter = 200 * time.Millisecond
		sweep(ctx, alive.svc)

		if got := sweeper.orphaned("add", "released") +
			alive.orphaned("add", "released"); got != 2 {
			t.Fatalf("released %v, want 2", got)
		}
		if got := sweeper.orphaned("keep", "held") +
			alive.orphaned("keep", "held"); got != 1 {
			t.Fatalf("held on route keep %v, want 1", got)
		}
		if got := sweeper.orphaned("gone", "held"); got != 1 {
			t.Fatalf("held on a route no longer configured %v, want 1", got)
		}
		// p: 2 released back, 3 still taken (the live replica's, the lease-less replica's, the young one).
		if got := sweeper.remaining("p"); got != units-3 {
			t.Fatalf("p remaining %d, want %d", got, units-3)
		}
		if got := sweeper.remaining("q"); got != units-2 {
			t.Fatalf("q remaining %d, want %d (held units stay taken)", got, units-2)
		}
		unsettled := func(product string) map[string]bool {
			ids, err := s.Client.ZRange(ctx, groupedOf(sweeper.svc).UnsettledSet(product), 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]bool{}
			for _, id := range ids {
				out[id] = true
			}
			return out
		}
		p, q := unsettled("p"), unsettled("q")
		for _, id := range released {
			if p[id] {
				t.Errorf("released orphan %s still unsettled", id)
			}
			if got := orphanMark(s, "p", id); got != "released" {
				t.Errorf("record of %s: orphan=%q", id, got)
			}
		}
		for _, id := range append(kept, young) {
			if !p[id] {
				t.Errorf("admission %s was settled: it is not an orphan", id)
			}
		}
		if !q[held] || !q[unknownRoute] {
			t.Errorf("held orphans must stay unsettled: %v", q)
		}
		if got := orphanMark(s, "q", held); got != "held" {
			t.Errorf("held orphan's mark %q", got)
		}

		// The admin view says why: the worker applies the released events.
		sweeper.StartWorker()
		eventually(t, 10*time.Second, "the released orphan recorded with its reason", func() bool {
			a := sweeper.AdminGet("/api/admissions/" + released[0])
			return a.Status == 200 && a.JSON["state"] == "released" && a.JSON["reason"] == "orphaned"
		})
		// The unsettled list marks the held ones and gives the tally the dashboard shows.
		list := sweeper.AdminGet("/api/admissions?state=admitted&older_than=0")
		tally, _ := list.JSON["orphans"].(map[string]any)
		if list.Status != 200 || tally["held"] != float64(2) || tally["released"] != float64(2) {
			t.Fatalf("unsettled list: %d %v", list.Status, list.JSON)
		}
		marked := 0
		for _, it := range list.JSON["items"].([]any) {
			if it.(map[string]any)["orphan"] == "held" {
				marked++
			}
		}
		if marked != 2 {
			t.Fatalf("%d listed items marked held, want 2: %v", marked, list.JSON["items"])
		}
		// Reloaded with release, the held one goes back too.
		useOrphans(t, sweeper.svc, []config.Route{{Name: "keep", Admission: config.Admission{Type: "stock", Orphans: config.OrphansRelease}}})
		sweep(ctx, sweeper.svc)
		if got := sweeper.remaining("q"); got != units-1 {
			t.Fatalf("after a reload to release, q remaining %d, want %d", got, units-1)
		}
	})
}
