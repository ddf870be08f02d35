package waitroom

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// renew.lua, on both stores: a live session gets the later deadline (and only a later one), one the
// store expired while its renewal was on the way is live again, a completed one stays ended, and a
// batch of another epoch changes nothing. The active set counts each session once throughout.
func TestRenew_ExtendsLiveSessionsAndNeverRevivesAFinishedOne(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s, []config.Queue{testQueue("q", 10)}, nil)
		r, ctx := h.replicas[0].room, t.Context()
		keys := queueKeys(r.keys, "q")
		served := func() (int64, int64, int64) {
			t.Helper()
			res, err := r.assignNow(ctx, "q", []assignReq{{claim: true}})
			if err != nil || res[0].state != StateToken {
				t.Fatalf("assign: %v %+v", err, res)
			}
			return res[0].pos, res[0].iat, res[0].exp
		}
		live, iat, exp := served()
		done, doneIat, doneExp := served()
		gone, goneIat, goneExp := served()
		snap := r.fresh(ctx, "q")
		if _, err := r.finish(ctx, "q", snap.Epoch, done, StateCompleted); err != nil {
			t.Fatal(err)
		}
		// The store expires "gone" (its deadline is moved into the past, as time would).
		if err := r.client.ZAdd(ctx, keys[3], redisZ(1, gone)).Err(); err != nil {
			t.Fatal(err)
		}
		r.fresh(ctx, "q")
		if st, _ := r.lookup(ctx, "q", snap.Epoch, gone); st != StateExpired {
			t.Fatalf("gone: state %d", st)
		}
		renew := func(epoch string, quads ...int64) int64 {
			t.Helper()
			args := []any{epoch}
			for _, v := range quads {
				args = append(args, v)
			}
			res := r.scripts.run(ctx, r.client, r.scripts.renew, keys, args...)
			if res.Err() != nil {
				t.Fatal(res.Err())
			}
			return res.Int(0)
		}
		later := time.Now().Unix() + 3600
		if n := renew("other-epoch", live, iat, later, 0); n != 0 {
			t.Fatalf("a batch of another epoch renewed %d", n)
		}
		if n := renew(snap.Epoch, live, iat, later, 0, done, doneIat, doneExp+3600, 0, gone, goneIat, goneExp+3600, 0); n != 2 {
			t.Fatalf("renewed %d sessions, want 2 (the live one and the expired one)", n)
		}
		if n := renew(snap.Epoch, live, iat, exp, 0); n != 0 {
			t.Fatal("an earlier deadline replaced a later one")
		}
		for pos, want := range map[int64]float64{live: float64(later * 1000), gone: float64((goneExp + 3600) * 1000)} {
			if got, err := r.client.ZScore(ctx, keys[3], itoa(pos)).Result(); err != nil || got != want {
				t.Errorf("deadline of %d: %v %v, want %v", pos, got, err, want)
			}
		}
		if st, _ := r.lookup(ctx, "q", snap.Epoch, done); st != StateCompleted {
			t.Errorf("a completed session was renewed: state %d", st)
		}
		if n, _ := r.client.ZCard(ctx, keys[3]).Result(); n != 2 {
			t.Errorf("active set holds %d sessions, want 2", n)
		}
		// Issuing again from the store (a browser that lost its token cookie) gives the renewed token.
		tok, e := r.issueToken(ctx, "q", r.fresh(ctx, "q"), r.ids.make("q", snap.Epoch, live), live)
		if e != nil || tok.Expires.Unix() != later {
			t.Errorf("token issued again: %v, expires %v, want %v", e, tok.Expires.Unix(), later)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func redisZ(score float64, member int64) redis.Z { return redis.Z{Score: score, Member: member} }
