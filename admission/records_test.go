package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/vocab"
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
			AdmittedAt: vocab.FormatUnixMilli(oldAt)}
		body, _ := json.Marshal(old)
		legacyKey, legacyUser := s.Keys.Global("adm", "a:1000"), s.Keys.Global("adm", "user:"+ann)
		if err := s.Client.Set(ctx, legacyKey, body, 0).Err(); err != nil {
			t.Fatal(err)
		}
		s.Client.ZAdd(ctx, legacyUser, redis.Z{Score: float64(oldAt), Member: "1000"})
		s.Client.ZAdd(ctx, tableOf(stockOf(st.svc)).Old.ByTime, redis.Z{Score: float64(oldAt), Member: "1000"})

		st.StartWorker()
		ids := st.buyTogether("p", []string{"ann"}, []int64{1})
		eventually(t, 10*time.Second, "the new admission listed", func() bool {
			return len(indexedIDs(t, st.svc, tableOf(stockOf(st.svc)), "p")) == 1
		})
		if a := st.AdminGet("/api/admissions/1000"); a.Status != 200 || num(a.JSON["quantity"]) != 2 {
			t.Fatalf("the earlier build's record: %d %s", a.Status, a.Body)
		}
		for _, path := range []string{"/api/users/ann/admissions", "/api/admissions"} {
			a := st.AdminGet(path)
			var got []string
			for _, item := range a.JSON["items"].([]any) {
				got = append(got, item.(map[string]any)["id"].(string))
			}
			if want := []string{ids[0], "1000"}; !slices.Equal(got, want) || num(a.JSON["total_count"]) != 2 {
				t.Fatalf("%s lists %v (total %v), want %v, newest first", path, got, a.JSON["total_count"], want)
			}
		}
		if a := st.AdminSend("DELETE", "/api/admissions/1000", "", ""); a.Status != 200 {
			t.Fatalf("delete: %d %s", a.Status, a.Body)
		}
		if s.Client.Exists(ctx, legacyKey).Val() != 0 || s.Client.ZScore(ctx, legacyUser, "1000").Err() == nil {
			t.Fatal("the delete left the earlier build's keys")
		}
		if a := st.AdminGet("/api/users/ann/admissions"); num(a.JSON["total_count"]) != 1 {
			t.Fatalf("after the delete: %s", a.Body)
		}
	})
}

// Ledger or not, the admin records leave after the retention: each apply.lua call removes, from the
// head of the cutoff day's list, up to twice its own number of records older than the retention (and
// 16), with their entries in the users' lists, and keeps the record of an admission still unsettled
// (its release and commit need it). What a call costs Redis does not grow with the tables: the same
// write commands remove 20 old records of 30 or of 3,000 (counted by Redis itself).
func TestAdminRecords_LeaveAfterTheRetentionWithOrWithoutTheLedger(t *testing.T) {
	for _, old := range []int{30, 3000} {
		t.Run(fmt.Sprintf("old=%d", old), func(t *testing.T) {
			s := storetest.Redis(t)
			st := newStack(t, s, product("p", 10, 5))
			ctx := context.Background()
			svc, table := st.svc, tableOf(stockOf(st.svc))
			svc.o.RecordsRetention = time.Hour
			// The old admissions: records as reserve.lua writes them, at a time past the retention and in
			// the cutoff day (earlier days' keys expire whole).
			cutoff := time.Now().Add(-time.Hour)
			at := cutoff.Add(-time.Minute)
			if start := cutoff.Truncate(24 * time.Hour); at.Before(start) {
				at = start
			}
			base := ids.AtTime(at)
			var apps []Application
			for i := range old {
				id := strconv.FormatUint(base+uint64(i), 10)
				user := fmt.Sprintf("u%d", i%7)
				s.Client.HSet(ctx, recordsKey(s.Keys, "p", id), id, fmt.Sprintf("admitted %s 1 %d checkout", user, at.UnixMilli()))
				apps = append(apps, Application{Table: table, Owner: "p", ID: id, User: user})
			}
			held := apps[0].ID // unsettled: its replica died and the route holds it
			s.Client.ZAdd(ctx, groupedOf(st.svc).UnsettledSet("p"), redis.Z{Score: float64(at.UnixMilli()), Member: held})
			svc.o.RecordsRetention = 48 * time.Hour // applied back then, within the retention
			for from := 0; from < old; from += applyMax {
				if err := svc.applyBatch(ctx, apps[from:min(from+applyMax, old)]); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(indexedIDs(t, svc, table, "p")); n != old {
				t.Fatalf("%d indexed, want %d", n, old)
			}
			svc.o.RecordsRetention = time.Hour
			fresh := func(n int) []Application {
				var out []Application
				for range n {
					id := svc.o.IDs.NextString()
					s.Client.HSet(ctx, recordsKey(s.Keys, "p", id), id, "admitted new 1 "+strconv.FormatInt(time.Now().UnixMilli(), 10))
					out = append(out, Application{Table: table, Owner: "p", ID: id, User: "new"})
				}
				return out
			}
			two := fresh(2)
			before := writeCalls(t, s.Client)
			if err := svc.applyBatch(ctx, two); err != nil {
				t.Fatal(err)
			}
			after := writeCalls(t, s.Client)
			// Per table: HSET and EXPIREAT of the users, RPUSH and EXPIREAT of the day's list; the trim:
			// HSET of the users left, HDEL of those left with none, HDEL of the records, LTRIM. However
			// many records the tables hold.
			bound := map[string]int64{"expireat": 2, "hset": 2, "hdel": 2, "ltrim": 1, "rpush": 1}
			for name, n := range after {
				if d := n - before[name]; d > bound[name] {
					t.Errorf("an apply.lua call that removes 20 records of %d ran %s %d times, at most %d", old, name, d, bound[name])
				}
			}
			left := 0
			for _, a := range apps {
				if s.Client.HExists(ctx, recordsKey(s.Keys, "p", a.ID), a.ID).Val() {
					left++
				}
			}
			if want := old - 20 + 1; left != want {
				t.Fatalf("%d old records left, want %d (20 removed, the unsettled one kept)", left, want)
			}
			listed := map[string]bool{}
			for _, id := range indexedIDs(t, svc, table, "p") {
				listed[id] = true
			}
			if len(listed) != old-20+2 || listed[held] || listed[apps[19].ID] || !listed[apps[20].ID] {
				t.Fatalf("the lists hold %d ids, want the %d old ones not removed and the 2 new ones", len(listed), old-20)
			}
			for user, list := range usersIndexed(t, svc, table, "p") {
				for _, id := range list {
					if !listed[id] {
						t.Fatalf("user %s's list names %s, which the lists no longer hold", user, id)
					}
				}
			}
			// The admin API shows what is left; the held admission is still settled by its record.
			a := st.AdminGet("/api/admissions?page_size=1")
			if num(a.JSON["total_count"]) != int64(old-20+2) {
				t.Fatalf("the admin list counts %v", a.JSON["total_count"])
			}
			if rec, found, err := adminRecord(ctx, svc, held); err != nil || !found || rec.State != "admitted" {
				t.Fatalf("the unsettled admission's record: %+v %v %v", rec, found, err)
			}
			// Writes go on, and so does the trim, until every old record is gone.
			oldest := func() bool {
				for _, id := range indexedIDs(t, svc, table, "p") {
					if n, _ := strconv.ParseUint(id, 10, 64); ids.Time(n).Before(cutoff) {
						return true
					}
				}
				return false
			}
			for i := 0; oldest(); i++ {
				if i > old/20 {
					t.Fatalf("old admissions still listed after %d more calls", i)
				}
				if err := svc.applyBatch(ctx, fresh(2)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Without writes the records still go: every key of the records expires whole, the retention after
// its day (the scripts' records a day at least: an unsettled admission's release needs its record).
func TestAdminRecords_KeysExpireAfterTheRetention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 5), product("q", 10, 5))
		st.StartWorker()
		ctx := context.Background()
		id := st.buyTogether("p", []string{"ann"}, []int64{1})[0]
		eventually(t, 10*time.Second, "indexed", func() bool { return len(indexedIDs(t, st.svc, tableOf(stockOf(st.svc)), "p")) == 1 })
		day := RecordsDay(id)
		end := time.Unix((day+1)*86400, 0)
		retention := st.svc.o.RecordsRetention
		for key, want := range map[string]time.Time{
			idsKey(s.Keys, "p", day):      end.Add(retention),
			usersKey(s.Keys, "p"):         end.Add(retention),
			recordsKey(s.Keys, "p", id):   end.Add(max(retention, RecordTTL)),
			groupedOf(st.svc).Claims("p"): time.Time{}, // the claim ended with the commit: nothing left
		} {
			if want.IsZero() {
				if n := s.Client.Exists(ctx, key).Val(); n != 0 {
					t.Errorf("%s exists", key)
				}
				continue
			}
			ttl := s.Client.PTTL(ctx, key).Val()
			if got := time.Now().Add(ttl); got.Before(want.Add(-time.Minute)) || got.After(want.Add(time.Minute)) {
				t.Errorf("%s expires at %v, want %v", key, got.UTC(), want.UTC())
			}
		}
	})
}

// Each product's records live under its own hash tag: on a Cluster two products' records are on the
// slots of their own stock, not on one slot that holds every product's, and no key under {adm} holds
// a record. The admin list, one admission, a user's list and a buyer's own list still read across
// products, newest first; bids likewise under their auctions.
func TestAdminRecords_EachOwnersRecordsUnderItsOwnTag(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 5), product("q", 10, 5))
		st.StartWorker()
		ctx := context.Background()
		var bought []string // oldest first
		for _, b := range []struct{ product, user string }{{"p", "ann"}, {"q", "ann"}, {"q", "ben"}, {"p", "ann"}} {
			bought = append(bought, st.buyTogether(b.product, []string{b.user}, []int64{1})[0])
			time.Sleep(2 * time.Millisecond)
		}
		eventually(t, 10*time.Second, "all four listed", func() bool {
			return num(st.AdminGet("/api/admissions").JSON["total_count"]) == 4
		})
		ids := func(a answer) []string {
			var out []string
			for _, item := range a.JSON["items"].([]any) {
				out = append(out, item.(map[string]any)["id"].(string))
			}
			return out
		}
		newest := slices.Clone(bought)
		slices.Reverse(newest)
		if got := ids(st.AdminGet("/api/admissions")); !slices.Equal(got, newest) {
			t.Fatalf("the admin list reads %v, want %v", got, newest)
		}
		if got := ids(st.AdminGet("/api/admissions?page=2&page_size=3")); !slices.Equal(got, newest[3:]) {
			t.Fatalf("page 2 reads %v, want %v", got, newest[3:])
		}
		if got, want := ids(st.AdminGet("/api/users/ann/admissions")), []string{bought[3], bought[1], bought[0]}; !slices.Equal(got, want) {
			t.Fatalf("ann's list reads %v, want %v", got, want)
		}
		if a := st.AdminGet("/api/admissions/" + bought[2]); a.Status != 200 || a.JSON["product_id"] != "q" {
			t.Fatalf("one admission: %d %s", a.Status, a.Body)
		}
		for _, product := range []string{"p", "q"} {
			for _, key := range []string{recordsKey(s.Keys, product, bought[0]), idsKey(s.Keys, product, RecordsDay(bought[0])), usersKey(s.Keys, product)} {
				if s.Client.Exists(ctx, key).Val() != 1 {
					t.Fatalf("%s is missing", key)
				}
				if a, b := storetest.MasterOf(t, s, key), storetest.MasterOf(t, s, stockKey(s.Keys, product)); a != b {
					t.Fatalf("%s is on %s, its product's stock on %s", key, a, b)
				}
			}
		}
		if c, ok := s.Client.(*redis.ClusterClient); ok {
			p := c.ClusterKeySlot(ctx, recordsKey(s.Keys, "p", bought[0])).Val()
			q := c.ClusterKeySlot(ctx, recordsKey(s.Keys, "q", bought[0])).Val()
			if p == q {
				t.Fatalf("both products' records on slot %d", p)
			}
		}
		for _, key := range []string{s.Keys.Global("adm", "admissions"), s.Keys.Global("adm", "by_time"), s.Keys.Global("adm", "by_user")} {
			if s.Client.Exists(ctx, key).Val() != 0 {
				t.Fatalf("%s exists: a key that would hold every product's records", key)
			}
		}
	})
}

// An event applied late (taken over after its worker died) lands at the tail of its day's list with
// an older time than those before it: pages of every record still hold each once, across products.
func TestAdminRecords_PagesHoldEachRecordOnceWhenAppliedLate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 5), product("q", 10, 5))
		svc, now := st.svc, time.Now().UnixMilli()
		var want []string
		add := func(product string, ms int64) {
			want = append(want, applyRecord(t, s, svc, product, fmt.Sprintf("u%d", len(want)), now+ms))
		}
		add("p", 100) // the newest
		add("q", 50)
		add("q", 60)
		add("p", 1) // admitted first, applied last: at the tail of p's list
		seen := map[string]int{}
		for page := 1; page <= 5; page++ {
			a := st.AdminGet(fmt.Sprintf("/api/admissions?page=%d&page_size=1", page))
			for _, item := range a.JSON["items"].([]any) {
				seen[item.(map[string]any)["id"].(string)]++
			}
		}
		for _, id := range want {
			if seen[id] != 1 {
				t.Fatalf("admission %s on %d pages of one (all: %v)", id, seen[id], seen)
			}
		}
	})
}

// One list alone holding records (one product, one day) is read from the page's place in it: every
// page of every size holds the records newest first, each once, and a page past the end is empty;
// with a second product's list the merge gives the same pages for the first product's records.
func TestAdminRecords_PagesOfOneListAreReadFromTheirPlace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 100, 5), product("q", 100, 5))
		ctx := context.Background()
		svc, table := st.svc, tableOf(stockOf(st.svc))
		now := time.Now().UnixMilli()
		var newest []string
		for i := range 23 {
			newest = append([]string{applyRecord(t, s, svc, "p", fmt.Sprintf("u%d", i), now+int64(i))}, newest...)
		}
		pages := func(size int64) [][]string {
			var out [][]string
			for page := int64(1); ; page++ {
				found, total, err := svc.page(ctx, table, "", page, size)
				if err != nil {
					t.Fatal(err)
				}
				if total != int64(len(newest)) {
					t.Fatalf("total %d, want %d", total, len(newest))
				}
				if len(found) == 0 {
					return out
				}
				var got []string
				for _, l := range found {
					got = append(got, l.id)
				}
				out = append(out, got)
			}
		}
		for _, size := range []int64{1, 5, 7, 23, 100} {
			got := pages(size)
			if want := slices.Collect(slices.Chunk(newest, int(size))); !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("pages of %d: %v, want %v", size, got, want)
			}
		}
		// A second list: the merge, whose pages of p's records are the same.
		newest = append(newest, applyRecord(t, s, svc, "q", "q0", now-1000))
		if got, want := pages(7), slices.Collect(slices.Chunk(newest, 7)); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("pages of 7 across two products: %v, want %v", got, want)
		}
	})
}

// applyRecord writes a stock admission's record of user at ms, as reserve.lua does, and has the event
// worker index it under product; its id.
func applyRecord(t *testing.T, s *store.Store, svc *Service, product, user string, ms int64) string {
	t.Helper()
	ctx := context.Background()
	id := svc.o.IDs.NextString()
	s.Client.HSet(ctx, recordsKey(s.Keys, product, id), id, fmt.Sprintf("admitted %s 1 %d", user, ms))
	if err := svc.applyBatch(ctx, []Application{{Table: tableOf(stockOf(svc)), Owner: product, ID: id, User: user}}); err != nil {
		t.Fatal(err)
	}
	return id
}
