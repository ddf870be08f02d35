package stock

// Orphans (docs/reference.md "Orphaned admissions"): a replica that dies between admitting a purchase
// and settling it leaves the units taken and the admission unsettled. edgeq can tell a dead replica
// from a slow one: every replica renews a liveness lease (one field per replica, keyed by the node
// number its admission ids carry, holding the store-clock time the lease runs out), and every replica's
// worker sweeps now and then for unsettled admissions older than origin.timeout (no answer of the shop
// takes longer) whose replica's lease has run out. Each then follows its route's admission.orphans:
//   - hold: it stays unsettled, listed for an operator (GET /api/admissions?state=admitted), marked as
//     an orphan and counted once: never a unit sold twice, but possibly a unit held for nothing;
//   - release: its units go back (release.lua, the released event says "orphaned"): never a unit held
//     for nothing, but if the dead replica had delivered the order and the shop kept it, that unit can
//     sell again.
// A node that never held a lease (a replica of an older build, or a lease lost in a failover) is
// treated as alive: its admissions are held, whatever the route says.

import (
	"context"
	"strconv"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/report"
	"github.com/redis/go-redis/v9"
)

// orphanTallyKey: how many orphans were held and released, every route together (the admin API's
// unsettled list and the dashboard show it; the metric counts per replica), kept a week after the last.
func orphanTallyKey(k store.Keys) string { return k.Global("adm", "orphans") }

// UseOrphans takes each route's admission.orphans, at start and on every reload.
func (k *stockKind) UseOrphans(routes []config.Route) {
	policies := map[string]string{}
	for _, r := range routes {
		if r.Admission.Type == products.Kind {
			policies[r.Name] = r.Admission.Orphans
			for _, result := range []string{"held", "released"} {
				k.metrics.orphans.WithLabelValues(r.Name, result) // present at 0 for alerts and the dashboard
			}
		}
	}
	k.orphanPolicies.Store(&policies)
}

// orphan is an unsettled admission a sweep looks at.
type orphan struct {
	product, id string
	node        int64
	record      *storeRecord
}

// sweepOrphans finds the unsettled admissions of dead replicas and applies their routes' orphans
// setting. Several replicas may sweep at once: the release is idempotent and the hold mark is set once,
// so each is counted once.
func (k *stockKind) sweepOrphans(ctx context.Context) {
	s := k.s
	products, err := s.Client().SMembers(ctx, productIndexKey(s.Keys())).Result()
	if err != nil || len(products) == 0 {
		return
	}
	leases, err := s.ReadLeases(ctx)
	if err != nil {
		return
	}
	upTo := strconv.FormatInt(leases.OlderThan.UnixMilli(), 10)
	ranges := make([]*redis.StringSliceCmd, len(products))
	_, _ = s.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range products {
			ranges[i] = p.ZRangeArgs(ctx, redis.ZRangeArgs{Key: unsettledKey(s.Keys(), id), Start: "-inf", Stop: upTo,
				ByScore: true, Count: admission.SweepBatch})
		}
		return nil
	})
	var found []*orphan
	for i, product := range products {
		unsettled, err := ranges[i].Result()
		if err != nil {
			continue
		}
		for _, id := range unsettled {
			n, err := strconv.ParseUint(id, 10, 64)
			if err != nil {
				continue
			}
			if node := ids.NodeOf(n); leases.RanOut(node) {
				found = append(found, &orphan{product: product, id: id, node: node})
			}
		}
	}
	if len(found) == 0 {
		return
	}
	refs := make([]recordRef, len(found))
	for i, o := range found {
		refs[i] = recordRef{o.product, o.id}
	}
	recs, err := k.storeRecords(ctx, refs)
	if err != nil {
		return
	}
	policies := *k.orphanPolicies.Load()
	for i, o := range found {
		if o.record = recs[i]; o.record == nil || o.record.user == "" {
			continue // its record is gone (a day or two old): only an operator can tell what it was
		}
		if o.record.orphan == admission.HoldAmbiguous {
			continue // the shop may have it: held for an operator, whatever the route says
		}
		route := o.record.route
		if policies[route] == config.OrphansRelease {
			k.releaseOrphan(ctx, o, route)
		} else if o.record.orphan == "" {
			k.holdOrphan(ctx, o, route)
		}
	}
}

func (k *stockKind) releaseOrphan(ctx context.Context, o *orphan, route string) {
	s := k.s
	code, err := releaseScript.Run(ctx, s.Client(), stockKeys(s.Keys(), o.product, o.id), o.id,
		k.recordKeep(), "orphaned").Int64Slice()
	if err != nil || len(code) != 2 || code[0] != 0 {
		return // another replica's sweep released it first, or the store is away: the next sweep sees
	}
	k.Forget(o.product)
	qty, _ := strconv.ParseInt(o.record.qty, 10, 64)
	s.CountSettled(k, admission.Claim{Owner: o.product, Value: qty}, report.Released)
	k.metrics.orphans.WithLabelValues(route, "released").Inc()
	k.tallyOrphan(ctx, "released")
	s.Logger().Warn("an admission of a replica that died was given back (orphans: release)", "id", o.id,
		"product", o.product, "route", route, "node", o.node)
}

func (k *stockKind) tallyOrphan(ctx context.Context, result string) {
	s := k.s
	key := orphanTallyKey(s.Keys())
	_, _ = s.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, key, result, 1)
		p.Expire(ctx, key, 7*24*time.Hour)
		return nil
	})
}

func (k *stockKind) holdOrphan(ctx context.Context, o *orphan, route string) {
	s := k.s
	set, err := k.markHold(ctx, o.product, o.id, o.record, holdOrphan)
	if err != nil || !set {
		return
	}
	k.metrics.orphans.WithLabelValues(route, "held").Inc()
	k.tallyOrphan(ctx, "held")
	s.Logger().Warn("an admission of a replica that died is held for an operator (orphans: hold): commit or cancel it",
		"id", o.id, "product", o.product, "route", route, "node", o.node)
}
