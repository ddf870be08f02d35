package stock

// Unsettled admissions: those neither committed nor given back, indexed per product by
// the time they were admitted. The admin API lists those older than older_than (GET
// /api/admissions?state=admitted); the worker's gauge edgeq_admissions_unsettled counts those older
// than UnsettledAfter; orphans.go decides what becomes of those a dead replica left.

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// adminUnsettled lists the admissions neither committed nor given back that are older than
// older_than seconds (default 0), oldest first: normally none lasts longer than the origin
// takes to answer; one that does was admitted by a replica that died before its settlement. The
// operator checks the shop's order and commits or cancels it.
func (k *stockKind) adminUnsettled(w http.ResponseWriter, r *http.Request) {
	s := k.s
	page, size, e := web.Paging(r, web.MaxPageSize)
	if e != nil {
		s.Responder().Error(w, r, e)
		return
	}
	older := int64(0)
	if v := r.URL.Query().Get("older_than"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 365*24*3600 {
			s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "older_than"))
			return
		}
		older = n
	}
	ctx := r.Context()
	items, err := k.unsettled(ctx, time.Now().Add(-time.Duration(older)*time.Second))
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	lo, hi, size := web.Window(int64(len(items)), page, size)
	refs := make([]recordRef, 0, hi-lo)
	for _, u := range items[lo:hi] {
		refs = append(refs, recordRef{u.product, u.id})
	}
	stored, err := k.storeRecords(ctx, refs)
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	out := make([]Record, 0, hi-lo)
	for i, u := range items[lo:hi] {
		rec := Record{ID: u.id, ProductID: u.product, State: "admitted", AdmittedAt: vocab.FormatUnixMilli(u.at)}
		if h := stored[i]; h != nil {
			rec.User = h.user
			rec.Quantity, _ = strconv.ParseInt(h.qty, 10, 64)
		}
		switch {
		case stored[i] == nil:
		case stored[i].orphan == admission.HoldAmbiguous:
			rec.Reason = admission.HoldAmbiguous // the shop's answer never came after the whole request was sent
		default:
			rec.Orphan = stored[i].orphan
		}
		out = append(out, rec)
	}
	tally, err := s.Client().HGetAll(ctx, orphanTallyKey(s.Keys())).Result()
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	orphans := map[string]int64{"held": 0, "released": 0}
	for k := range orphans {
		orphans[k], _ = strconv.ParseInt(tally[k], 10, 64)
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": out, "total_count": len(items), "page": page, "page_size": size,
		"orphans": orphans})
}

type unsettledAdmission struct {
	id, product string
	at          int64 // ms
}

// unsettled reads every product's admissions not settled since before, oldest first: one
// ZRANGEBYSCORE per product, all in one pipeline.
func (k *stockKind) unsettled(ctx context.Context, before time.Time) ([]unsettledAdmission, error) {
	s := k.s
	products, err := s.Client().SMembers(ctx, productIndexKey(s.Keys())).Result()
	if err != nil || len(products) == 0 {
		return nil, err
	}
	by := &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(before.UnixMilli(), 10)}
	cmds := make([]*redis.ZSliceCmd, len(products))
	if _, err := s.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range products {
			cmds[i] = p.ZRangeByScoreWithScores(ctx, unsettledKey(s.Keys(), id), by)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []unsettledAdmission
	for i, c := range cmds {
		for _, z := range c.Val() {
			if id, ok := z.Member.(string); ok {
				out = append(out, unsettledAdmission{id: id, product: products[i], at: int64(z.Score)})
			}
		}
	}
	slices.SortFunc(out, func(a, b unsettledAdmission) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id)) })
	return out, nil
}

// unsettledCount counts what unsettled lists, without reading it: one ZCOUNT per product, all in
// one pipeline (the worker's gauge, every 5 s on every replica).
func (k *stockKind) unsettledCount(ctx context.Context, before time.Time) (int64, error) {
	s := k.s
	products, err := s.Client().SMembers(ctx, productIndexKey(s.Keys())).Result()
	if err != nil || len(products) == 0 {
		return 0, err
	}
	upTo := strconv.FormatInt(before.UnixMilli(), 10)
	cmds := make([]*redis.IntCmd, len(products))
	if _, err := s.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range products {
			cmds[i] = p.ZCount(ctx, unsettledKey(s.Keys(), id), "-inf", upTo)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// UnsettledAfter is how old an admission must be to count in edgeq_admissions_unsettled: no origin
// answer takes this long (origin.timeout is far shorter), so one counted is waiting for an operator.
const UnsettledAfter = 5 * time.Minute
