package admission

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// The event streams are trimmed only below what every consumer group that is read
// has acknowledged, and past redis.stream_max_entries the unread entries go too, counted. A ledger
// that stopped (its group marked read, nobody reading it) while 200 events are written against a
// bound of 100: the first 80 stay whole although the admin-index worker read them all, the bound then
// trims 100 unread ones, loudly (numbers small enough for the embedded store's Lua, which took 80 s
// for ten times as many on a loaded machine); a ledger that has read and acknowledged some holds back only
// from its oldest pending entry; once the stopped ledger's group is retired it holds nothing back.
func TestStreams_TrimmedOnlyBelowWhatEveryGroupAcknowledged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		st := newStack(t, s, product("p", 10_000, 1))
		st.svc.o.StreamMaxEntries = 100
		st.svc.o.TrimEvery = 20 * time.Millisecond
		stream := admitsStream(stockOf(st.svc), "p")
		// The ledger's group, as a replica with the ledger on made it, and marked read: the ledger has
		// stopped reading (PostgreSQL is away, or its replica hangs).
		if err := s.Client.XGroupCreateMkStream(ctx, stream, ledgerGroup, "0").Err(); err != nil {
			t.Fatal(err)
		}
		st.svc.markGroupRead(ctx, ledgerGroup)
		buy := func(from, to int) {
			for i := from; i < to; i++ {
				u := st.svc.pseudonyms.of("u" + strconv.Itoa(i))
				res, err := reserveNow(ctx, st.svc, "p", []Claim{{Owner: "p", User: u, ID: strconv.Itoa(1_000_000 + i), Value: 1}})
				if err != nil || res[0].code != 0 {
					t.Fatalf("purchase %d: %v %v", i, res, err)
				}
			}
		}
		workerRead := func(n int64) func() bool {
			return func() bool {
				gs, err := s.Client.XInfoGroups(ctx, stream).Result()
				if err != nil {
					return false
				}
				for _, g := range gs {
					if g.Name == groupName && g.Pending == 0 && g.LastDeliveredID != "0-0" {
						last, _ := s.Client.XRevRangeN(ctx, stream, "+", "-", 1).Result()
						return len(last) == 1 && last[0].ID == g.LastDeliveredID
					}
				}
				return false
			}
		}
		length := func() int64 { return s.Client.XLen(ctx, stream).Val() }
		trimPass := func() {
			// The worker trims every TrimEvery; a pass of the trim itself makes the test independent of when.
			st.svc.trimStreams(ctx, [][]ownerStream{{{kind: stockOf(st.svc), owner: "p", admits: true}}}, &trimmer{retired: map[string]bool{}})
		}

		st.StartWorker()
		buy(0, 80)
		eventually(t, 20*time.Second, "the admin-index worker reads and acknowledges all 80", workerRead(80))
		trimPass()
		if n := length(); n != 80 {
			t.Fatalf("after the worker read all 80 and the ledger none: %d entries, want 80 (nothing the ledger has not read is trimmed below the bound)", n)
		}
		if got := testutil.ToFloat64(st.svc.metrics.trimmedUnread); got != 0 {
			t.Fatalf("trimmed unread below the bound: %v", got)
		}

		buy(80, 200)
		eventually(t, 20*time.Second, "the worker reads all 200", workerRead(200))
		trimPass()
		if n := length(); n != 100 {
			t.Fatalf("200 written against a bound of 100: %d left", n)
		}
		if got := testutil.ToFloat64(st.svc.metrics.trimmedUnread); got != 100 {
			t.Fatalf("edgeq_stream_trimmed_unread_total %v, want 100", got)
		}
		if lost := s.Client.HGet(ctx, lostKey(s.Keys), stream).Val(); lost != "100" {
			t.Fatalf("the tally reconcile prints: %q, want 100", lost)
		}
		first, _ := s.Client.XRangeN(ctx, stream, "-", "+", 1).Result()

		// The ledger reads 30 of what is left and acknowledges 20: only the 20 go.
		read, err := s.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: ledgerGroup, Consumer: "ledger-1",
			Streams: []string{stream, ">"}, Count: 30}).Result()
		if err != nil || len(read[0].Messages) != 30 {
			t.Fatalf("ledger read: %v %v", read, err)
		}
		if read[0].Messages[0].ID != first[0].ID {
			t.Fatalf("the ledger's next entry %s is not the oldest left %s", read[0].Messages[0].ID, first[0].ID)
		}
		var acked []string
		for _, m := range read[0].Messages[:20] {
			acked = append(acked, m.ID)
		}
		s.Client.XAck(ctx, stream, ledgerGroup, acked...)
		trimPass()
		if n := length(); n != 80 {
			t.Fatalf("after the ledger acknowledged 20 of 30 read: %d entries, want 80", n)
		}
		oldest, _ := s.Client.XRangeN(ctx, stream, "-", "+", 1).Result()
		if oldest[0].ID != read[0].Messages[20].ID {
			t.Fatalf("the oldest entry left is %s, want the ledger's oldest pending %s", oldest[0].ID, read[0].Messages[20].ID)
		}

		// The ledger is turned off for good: its mark ages past groupRetireAfter and it holds nothing.
		s.Client.HSet(ctx, groupsKey(s.Keys), ledgerGroup, time.Now().Add(-groupRetireAfter-time.Minute).UnixMilli())
		trimPass()
		if n := length(); n != 0 {
			t.Fatalf("with the ledger's group retired, %d entries the worker acknowledged are kept", n)
		}
		if got := testutil.ToFloat64(st.svc.metrics.trimmedUnread); got != 100 {
			t.Fatalf("retiring a group counted %v unread, want still 100", got)
		}
	})
}

// A group that is read but has not been created on a stream yet reads it from its start: nothing of
// that stream is trimmed below the bound.
func TestStreams_AGroupNotCreatedYetHoldsTheWholeStream(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		st := newStack(t, s, product("p", 10_000, 1))
		st.svc.o.StreamMaxEntries = 1000
		stream := admitsStream(stockOf(st.svc), "p")
		st.svc.markGroupRead(ctx, ledgerGroup) // the ledger runs, and has not listed this product yet
		for i := range 700 {
			u := st.svc.pseudonyms.of("u" + strconv.Itoa(i))
			id := strconv.Itoa(2_000_000 + i)
			if res, err := reserveNow(ctx, st.svc, "p", []Claim{{Owner: "p", User: u, ID: id, Value: 1}}); err != nil || res[0].code != 0 {
				t.Fatalf("purchase %d: %v %v", i, res, err)
			}
		}
		// The admin-index worker reads and acknowledges everything.
		msgs, err := s.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: groupName, Consumer: "w",
			Streams: []string{stream, ">"}, Count: 1000}).Result()
		if err != nil || len(msgs[0].Messages) != 700 {
			t.Fatalf("read: %v", err)
		}
		for _, m := range msgs[0].Messages {
			s.Client.XAck(ctx, stream, groupName, m.ID)
		}
		st.svc.trimStreams(ctx, [][]ownerStream{{{kind: stockOf(st.svc), owner: "p", admits: true}}}, &trimmer{retired: map[string]bool{}})
		if n := s.Client.XLen(ctx, stream).Val(); n != 700 {
			t.Fatalf("%d entries left, want 700: the ledger has not read any", n)
		}
	})
}

func TestNextID(t *testing.T) {
	for in, want := range map[string]string{"0-0": "0-1", "1700000000000-41": "1700000000000-42"} {
		if got, err := nextID(in); err != nil || got != want {
			t.Errorf("nextID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := nextID("bogus"); err == nil {
		t.Error("nextID(bogus) did not fail")
	}
	if !lessID("9-5", "10-0") || lessID("10-0", "9-5") || !lessID("3-2", "3-10") {
		t.Error("lessID does not compare ids as numbers")
	}
}

// What the bound trimmed before every group read it is a line of `edgeq reconcile`.
func TestReconcile_ListsStreamsTrimmedUnread(t *testing.T) {
	s := storetest.Redis(t)
	ctx := context.Background()
	st := newStack(t, s, product("p", 10_000, 1))
	withLedger(t, st)
	st.svc.o.StreamMaxEntries = 100
	stream := admitsStream(stockOf(st.svc), "p")
	st.svc.markGroupRead(ctx, groupName)
	for i := range 300 {
		u := st.svc.pseudonyms.of("u" + strconv.Itoa(i))
		if res, err := reserveNow(ctx, st.svc, "p", []Claim{{Owner: "p", User: u, ID: strconv.Itoa(3_000_000 + i), Value: 1}}); err != nil || res[0].code != 0 {
			t.Fatalf("purchase %d: %v %v", i, res, err)
		}
	}
	st.svc.trimStreams(ctx, [][]ownerStream{{{kind: stockOf(st.svc), owner: "p", admits: true}}}, &trimmer{retired: map[string]bool{}})
	r, err := st.svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Differences {
		if d.Kind == "stream" && d.Owner == stream && d.Store == "200" && strings.Contains(d.String(), "200 events trimmed before every consumer group had read them") {
			return
		}
	}
	t.Fatalf("reconcile does not list the 200 events trimmed unread: %v", r.Differences)
}
