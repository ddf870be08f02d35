package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/storetest"
)

// The admin records of builds before the tables (a key per record, a sorted set per user) are read
// beside the new ones: one admission, a buyer's list, the list of all, and a delete removes the old
// keys too. Nothing writes them any more.
func TestAdminRecords_EarlierBuildsRecordsAreReadBeside(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 5))
		ctx := context.Background()
		ann := st.svc.pseudonyms.of("ann")
		// As a build before the tables left them: the record's key, the user's sorted set, the time index.
		oldAt := time.Now().Add(-time.Hour).UnixMilli()
		old := Record{ID: "1000", ProductID: "p", User: ann, Quantity: 2, State: "admitted",
			AdmittedAt: time.UnixMilli(oldAt).UTC().Format(recordTime)}
		body, _ := json.Marshal(old)
		legacyKey, legacyUser := s.Keys.Global("adm", "a:1000"), s.Keys.Global("adm", "user:"+ann)
		if err := s.Client.Set(ctx, legacyKey, body, 0).Err(); err != nil {
			t.Fatal(err)
		}
		s.Client.ZAdd(ctx, legacyUser, redis.Z{Score: float64(oldAt), Member: "1000"})
		s.Client.ZAdd(ctx, byTimeKey(s.Keys), redis.Z{Score: float64(oldAt), Member: "1000"})

		st.startWorker()
		ids := st.buyTogether("p", []string{"ann"}, []int64{1})
		eventually(t, 10*time.Second, "the new admission recorded", func() bool {
			return st.adminGet("/api/admissions/"+ids[0]).status == 200
		})
		if a := st.adminGet("/api/admissions/1000"); a.status != 200 || num(a.json["quantity"]) != 2 {
			t.Fatalf("the earlier build's record: %d %s", a.status, a.body)
		}
		for _, path := range []string{"/api/users/ann/admissions", "/api/admissions"} {
			a := st.adminGet(path)
			var got []string
			for _, item := range a.json["items"].([]any) {
				got = append(got, item.(map[string]any)["id"].(string))
			}
			if want := []string{ids[0], "1000"}; !slices.Equal(got, want) || num(a.json["total_count"]) != 2 {
				t.Fatalf("%s lists %v (total %v), want %v, newest first", path, got, a.json["total_count"], want)
			}
		}
		if a := st.adminSend("DELETE", "/api/admissions/1000", "", ""); a.status != 200 {
			t.Fatalf("delete: %d %s", a.status, a.body)
		}
		if s.Client.Exists(ctx, legacyKey).Val() != 0 || s.Client.ZScore(ctx, legacyUser, "1000").Err() == nil {
			t.Fatal("the delete left the earlier build's keys")
		}
		if a := st.adminGet("/api/users/ann/admissions"); num(a.json["total_count"]) != 1 {
			t.Fatalf("after the delete: %s", a.body)
		}
	})
}

// With the ledger on the tables keep LedgerRecordTTL of records: each apply.lua call removes records
// older than that (up to twice its own number), with their entries in both indexes, and leaves the
// rest; a user keeps the ids that did not expire.
func TestAdminRecords_OldRecordsLeaveWithTheirIndexEntries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 5))
		withLedger(t, st)
		ctx := context.Background()
		table := st.svc.stock.table
		app := func(id, user string, at time.Time) application {
			rec := Record{ID: id, ProductID: "p", User: user, Quantity: 1, State: "admitted", AdmittedAt: at.UTC().Format(recordTime)}
			body, _ := json.Marshal(rec)
			return application{table: table, id: id, user: user, atMs: at.UnixMilli(), body: body}
		}
		long := time.Now().Add(-LedgerRecordTTL - time.Hour)
		var old []application
		for i := range 30 {
			old = append(old, app(fmt.Sprint(100+i), fmt.Sprintf("u%d", i%3), long))
		}
		// The old ones, as they were written back then (without the ledger nothing expires), then one
		// call of two new records with the ledger on: it removes up to 2*2+16 old ones.
		l := st.svc.o.Ledger
		st.svc.o.Ledger = nil
		if err := st.svc.applyBatch(ctx, old); err != nil {
			t.Fatal(err)
		}
		st.svc.o.Ledger = l
		if err := st.svc.applyBatch(ctx, []application{app("200", "u0", time.Now()), app("201", "u9", time.Now())}); err != nil {
			t.Fatal(err)
		}
		if n := s.Client.HLen(ctx, table.records).Val(); n != 30-20+2 {
			t.Fatalf("%d records, want the 2 new ones and 10 old ones left (a call removes 2*2+16)", n)
		}
		if n := s.Client.ZCard(ctx, table.byTime).Val(); n != 12 {
			t.Fatalf("the time index holds %d, want 12", n)
		}
		// Every id an index names has its record, and every record is in both indexes.
		listed := 0
		for user, list := range s.Client.HGetAll(ctx, table.byUser).Val() {
			for _, id := range strings.Fields(list) {
				listed++
				body := s.Client.HGet(ctx, table.records, id).Val()
				if !strings.Contains(body, `"user":"`+user+`"`) {
					t.Errorf("user %s's list names %s, whose record is %q", user, id, body)
				}
			}
		}
		if listed != 12 {
			t.Fatalf("the user index names %d ids, want 12", listed)
		}
		if list := strings.Fields(s.Client.HGet(ctx, table.byUser, "u0").Val()); !slices.Contains(list, "200") {
			t.Fatalf("u0's list %v lost the new record", list)
		}
		// Another call takes the rest.
		if err := st.svc.applyBatch(ctx, []application{app("202", "u1", time.Now())}); err != nil {
			t.Fatal(err)
		}
		if n := s.Client.HLen(ctx, table.records).Val(); n != 3 {
			t.Fatalf("%d records, want the 3 new ones", n)
		}
		if n := s.Client.HLen(ctx, table.byUser).Val(); n != 3 {
			t.Fatalf("%d users indexed, want u0, u9 and u1", n)
		}
	})
}
