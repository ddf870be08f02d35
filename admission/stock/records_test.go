package stock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// An admission's record is a field of its product's hash for its id's day: the hash lives at least a
// record TTL past every record in it, the field reads back as written, and a release of an id never
// admitted leaves a tombstone there that refuses the admission when it arrives late.
func TestStockRecords_AFieldOfTheDaysHash(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 5))
		ctx := context.Background()
		ann := st.pseudonym("ann")
		id := st.nextID()
		res, err := st.kind().reserveNow(ctx, "p", []admission.Claim{{Owner: "p", User: ann, ID: id, Value: 2, Route: "checkout"}})
		if err != nil || res[0].Code != 0 {
			t.Fatalf("reserve: %v %v", res, err)
		}
		rec := storedRecord(t, s, "p", id)
		if rec.state != "admitted" || rec.user != ann || rec.qty != "2" || rec.route != "checkout" {
			t.Fatalf("the record reads %+v", rec)
		}
		if at, err := strconv.ParseInt(rec.at, 10, 64); err != nil || time.Since(time.UnixMilli(at)).Abs() > time.Minute {
			t.Fatalf("the record's time %q", rec.at)
		}
		day := recordsKey(s.Keys, "p", id)
		keep := time.Duration(st.kind().recordKeep()) * time.Second // the retention, at least a record TTL
		if ttl := s.Client.TTL(ctx, day).Val(); ttl < keep || ttl > keep+24*time.Hour+time.Minute {
			t.Fatalf("the day's hash expires in %v, want between %v and a day more", ttl, keep)
		}
		if n := s.Client.Exists(ctx, legacyRecordKey(s.Keys, "p", id)).Val(); n != 0 {
			t.Fatal("an admission wrote a hash of its own")
		}
		// A release that arrives before its admission (the caller gave up on the answer).
		late := st.nextID()
		if r, err := releaseScript.Run(ctx, s.Client, stockKeys(s.Keys, "p", late), late, 60).Int64Slice(); err != nil || r[0] != 1 {
			t.Fatalf("release of an unknown id: %v %v", r, err)
		}
		if got := storedRecord(t, s, "p", late); got.state != "released" || got.user != "" {
			t.Fatalf("the tombstone reads %+v", got)
		}
		bob := st.pseudonym("bob")
		res, err = st.kind().reserveNow(ctx, "p", []admission.Claim{{Owner: "p", User: bob, ID: late, Value: 1}})
		if err != nil || res[0].Code != 6 || st.remaining("p") != 8 {
			t.Fatalf("the late admission: %v %v, remaining %d (want code 6, 8 left)", res, err, st.remaining("p"))
		}
		if s.Client.HExists(ctx, buyersKey(s.Keys, "p"), bob).Val() {
			t.Fatal("the refused late admission left its buyer counted")
		}
		// The same call sent again (a client library resent it): admitted again, nothing more taken,
		// before and after its commit.
		again := []admission.Claim{{Owner: "p", User: ann, ID: id, Value: 2, Route: "checkout"}}
		for _, when := range []string{"unsettled", "committed"} {
			res, err = st.kind().reserveNow(ctx, "p", again)
			if err != nil || res[0].Code != 0 || st.remaining("p") != 8 || s.Client.HGet(ctx, buyersKey(s.Keys, "p"), ann).Val() != "2" {
				t.Fatalf("the call sent again (%s): %v %v, remaining %d, bought %s", when, res, err, st.remaining("p"),
					s.Client.HGet(ctx, buyersKey(s.Keys, "p"), ann).Val())
			}
			st.svc.CommitNow(ctx, st.kind(), again[0])
		}
	})
}

// During a rolling update an admission of an earlier build (a hash of its own) is released,
// committed, cancelled, marked and read where it is, by every reader of this build.
func TestStockRecords_AnEarlierBuildsRecordIsKeptWhereItIs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 5))
		ctx := context.Background()
		ann := st.pseudonym("ann")
		at := time.Now().UnixMilli()
		old := func(id string) string {
			key := legacyRecordKey(s.Keys, "p", id)
			s.Client.HSet(ctx, key, "state", "admitted", "user", ann, "qty", "2", "at", at, "route", "checkout")
			s.Client.Expire(ctx, key, admission.RecordTTL)
			s.Client.ZAdd(ctx, unsettledKey(s.Keys, "p"), redis.Z{Score: float64(at), Member: id})
			s.Client.HIncrBy(ctx, buyersKey(s.Keys, "p"), ann, 2)
			s.Client.DecrBy(ctx, stockKey(s.Keys, "p"), 2)
			return key
		}
		state := func(key string) string { return s.Client.HGet(ctx, key, "state").Val() }
		k1, k2, k3 := old("2001"), old("2002"), old("2003")
		if st.remaining("p") != 4 {
			t.Fatalf("remaining %d after three earlier admissions of 2", st.remaining("p"))
		}

		recs, err := st.kind().storeRecords(ctx, []recordRef{{"p", "2001"}, {"p", "2999"}})
		if err != nil || recs[0] == nil || !recs[0].legacy || recs[0].user != ann || recs[0].route != "checkout" || recs[1] != nil {
			t.Fatalf("storeRecords: %+v %v", recs, err)
		}
		if a, found, err := st.kind().productRecord(ctx, "2001"); err != nil || !found || a.Quantity != 2 || a.State != "admitted" {
			t.Fatalf("productRecord: %+v %v %v", a, found, err)
		}
		if set, err := st.kind().markHold(ctx, "p", "2001", recs[0], holdOrphan); err != nil || !set || s.Client.HGet(ctx, k1, "orphan").Val() != "held" {
			t.Fatalf("the orphan mark: %v %v", set, err)
		}

		if r, err := releaseScript.Run(ctx, s.Client, stockKeys(s.Keys, "p", "2001"), "2001", 60).Int64Slice(); err != nil || r[0] != 0 || r[1] != 6 {
			t.Fatalf("release: %v %v", r, err)
		}
		if state(k1) != "released" || st.remaining("p") != 6 {
			t.Fatalf("after the release: state %q, remaining %d", state(k1), st.remaining("p"))
		}
		if r, err := commitScript.Run(ctx, s.Client, stockKeys(s.Keys, "p", "2002"), "2002", "0").Int64(); err != nil || r != 0 {
			t.Fatalf("commit: %v %v", r, err)
		}
		if r, err := releaseScript.Run(ctx, s.Client, stockKeys(s.Keys, "p", "2002"), "2002", 60).Int64Slice(); err != nil || r[0] != 3 {
			t.Fatalf("release after the commit: %v %v, want 3 (committed)", r, err)
		}
		if r, err := cancelScript.Run(ctx, s.Client, stockKeys(s.Keys, "p", "2003"), "2003", ann, 2, at, 60).Int64Slice(); err != nil || r[0] != 0 {
			t.Fatalf("cancel: %v %v", r, err)
		}
		if r, err := cancelScript.Run(ctx, s.Client, stockKeys(s.Keys, "p", "2003"), "2003", ann, 2, at, 60).Int64Slice(); err != nil || r[0] != 4 {
			t.Fatalf("a second cancel: %v %v, want 4", r, err)
		}
		if state(k3) != "cancelled" || state(k2) != "admitted" || st.remaining("p") != 8 {
			t.Fatalf("states %q %q, remaining %d", state(k2), state(k3), st.remaining("p"))
		}
		for _, id := range []string{"2001", "2002", "2003"} {
			if s.Client.HExists(ctx, recordsKey(s.Keys, "p", id), id).Val() {
				t.Fatalf("admission %s got a second record in the day's hash", id)
			}
		}
	})
}
