package admission

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/money"
)

// Reconciliation (`edgeq reconcile`; docs/reference.md "Ledger") compares the store with the ledger
// after the ledger has caught up with the streams:
//   - per product, the units held (admitted or committed, not given back): the store's buyer counts
//     against the ledger's rows; per auction, the highest standing bid;
//   - every admission and bid the store still has a record of (records live recordTTL, a day)
//     against the ledger's rows of that period: ids in one and not the other, and states that differ.
// Store records are the scripts' own (written in the same call that took the units), not the admin
// indexes, so a store that lost writes (a crash with AOF everysec) shows what it lost.

// Difference is one thing the store and the ledger disagree on.
type Difference struct {
	Kind   string // "product", "auction", "admission", "bid", "backlog", "stream"
	Owner  string // product or auction id
	ID     string // admission or bid id ("" for a per-owner count)
	What   string // "units held", "highest bid", "missing from the ledger", "missing from the store", "state", "not written"
	Store  string // the store's value ("" when it has none)
	Ledger string // the ledger's value
}

func (d Difference) String() string {
	switch {
	case d.Kind == "backlog":
		return fmt.Sprintf("ledger: %s events not written yet", d.Store)
	case d.Kind == "stream":
		return fmt.Sprintf("stream %s: %s events trimmed before every consumer group had read them (redis.stream_max_entries), the last at %s: the ledger may lack them",
			d.Owner, d.Store, d.Ledger)
	case d.ID == "":
		return fmt.Sprintf("%s %s: %s: store %s, ledger %s", d.Kind, d.Owner, d.What, d.Store, d.Ledger)
	case d.What == "missing from the ledger":
		return fmt.Sprintf("%s %s (%s %s): in the store (%s), missing from the ledger", d.Kind, d.ID, ownerWord(d.Kind), d.Owner, d.Store)
	case d.What == "missing from the store":
		return fmt.Sprintf("%s %s (%s %s): in the ledger (%s), missing from the store", d.Kind, d.ID, ownerWord(d.Kind), d.Owner, d.Ledger)
	default:
		return fmt.Sprintf("%s %s (%s %s): %s: store %s, ledger %s", d.Kind, d.ID, ownerWord(d.Kind), d.Owner, d.What, d.Store, d.Ledger)
	}
}

func ownerWord(kind string) string {
	if kind == "bid" {
		return "auction"
	}
	return "product"
}

// Reconciliation is what Reconcile found.
type Reconciliation struct {
	Products, Auctions int // owners compared
	Admissions, Bids   int // ids compared (the store's and the ledger's of the period, together)
	Since              time.Time
	Differences        []Difference
}

// CatchUpLedger writes what the ledger lacks, as the ledger worker does, until nothing is left to
// write or ctx ends; it takes over entries other consumers left pending (for ClaimIdle). It returns
// the backlog left.
func (s *Service) CatchUpLedger(ctx context.Context) (int64, error) {
	if s.o.Ledger == nil {
		return 0, fmt.Errorf("the ledger is off (ledger.postgres_url)")
	}
	w := &ledgerWorker{s: s, consumer: consumerName() + "-reconcile", groups: map[string]bool{}}
	for {
		backlog, err := s.LedgerBacklog(ctx)
		if err != nil || backlog == 0 {
			return backlog, err
		}
		w.claimAt = time.Time{} // take over pending entries on every pass
		if busy, _ := w.pass(ctx); !busy {
			select {
			case <-ctx.Done():
				return backlog, nil
			case <-time.After(200 * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			return s.LedgerBacklog(context.WithoutCancel(ctx))
		}
	}
}

// Reconcile compares the store with the ledger (see above). Call CatchUpLedger first: whatever is
// still to be written shows as differences.
func (s *Service) Reconcile(ctx context.Context) (*Reconciliation, error) {
	if s.o.Ledger == nil {
		return nil, fmt.Errorf("the ledger is off (ledger.postgres_url)")
	}
	// Ledger rows are compared by id from this time on; the store's records are at most recordTTL
	// old, less a margin for records about to expire while the comparison runs.
	since := time.Now().Add(-recordTTL + 10*time.Minute)
	r := &Reconciliation{Since: since}
	backlog, err := s.LedgerBacklog(ctx)
	if err != nil {
		return nil, err
	}
	if backlog > 0 {
		r.Differences = append(r.Differences, Difference{Kind: "backlog", What: "not written", Store: strconv.FormatInt(backlog, 10)})
	}
	if err := s.reconcileStreams(ctx, r); err != nil {
		return nil, err
	}
	if err := s.reconcileStock(ctx, r); err != nil {
		return nil, err
	}
	if err := s.reconcileBids(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// reconcileStreams lists the streams that were trimmed past redis.stream_max_entries before every
// consumer group had read them (trim.go keeps the tally): what the ledger never saw.
func (s *Service) reconcileStreams(ctx context.Context, r *Reconciliation) error {
	lost, err := s.client.HGetAll(ctx, lostKey(s.keys)).Result()
	if err != nil {
		return err
	}
	var streams []string
	for k := range lost {
		if !strings.HasPrefix(k, "at:") {
			streams = append(streams, k)
		}
	}
	slices.Sort(streams)
	for _, stream := range streams {
		at := "an unknown time"
		if ms, err := strconv.ParseInt(lost["at:"+stream], 10, 64); err == nil {
			at = time.UnixMilli(ms).UTC().Format(time.RFC3339)
		}
		r.Differences = append(r.Differences, Difference{Kind: "stream", Owner: stream, What: "trimmed unread",
			Store: lost[stream], Ledger: at})
	}
	return nil
}

func (s *Service) reconcileStock(ctx context.Context, r *Reconciliation) error {
	products, err := s.client.SMembers(ctx, productIndexKey(s.keys)).Result()
	if err != nil {
		return err
	}
	slices.Sort(products)
	held, err := s.o.Ledger.UnitsHeld(ctx)
	if err != nil {
		return err
	}
	for p := range held {
		if !slices.Contains(products, p) {
			products = append(products, p)
		}
	}
	for _, p := range products {
		r.Products++
		counts, err := s.client.HVals(ctx, buyersKey(s.keys, p)).Result()
		if err != nil {
			return err
		}
		var units int64
		for _, c := range counts {
			n, _ := strconv.ParseInt(c, 10, 64)
			units += n
		}
		if units != held[p] {
			r.Differences = append(r.Differences, Difference{Kind: "product", Owner: p, What: "units held",
				Store: strconv.FormatInt(units, 10), Ledger: strconv.FormatInt(held[p], 10)})
		}
	}
	// Every admission record the store has (reserve.lua's, under its product's hash tag).
	store := map[string]compared{}
	err = s.scanRecords(ctx, s.keys.Prefix+":{p:*}:adm:*", func(key string, h map[string]string) {
		owner, id, ok := ownerAndID(key, ":{p:", "}:adm:")
		if !ok || h["user"] == "" {
			return // a tombstone (a release of an admission the store never saw) holds nothing
		}
		qty, _ := strconv.ParseInt(h["qty"], 10, 64)
		store[id] = admissionCompared(ledger.Admission{ID: id, ProductID: owner, Quantity: qty, State: h["state"]})
	})
	if err != nil {
		return err
	}
	rows, err := s.o.Ledger.AllAdmissions(ctx, r.Since)
	if err != nil {
		return err
	}
	inLedger := make([]compared, len(rows))
	for i, a := range rows {
		inLedger[i] = admissionCompared(a)
	}
	r.Admissions, err = r.compareIDs("admission", store, inLedger, func(id string) (compared, bool, error) {
		// A record older than the ledger rows compared (about to expire from the store): alone.
		a, found, err := s.o.Ledger.Admission(ctx, id)
		return admissionCompared(a), found, err
	})
	return err
}

// compared is an admission or a bid as reconcile compares it: its owner, state and the rest.
type compared struct{ id, owner, state, detail string }

func admissionCompared(a ledger.Admission) compared {
	return compared{a.ID, a.ProductID, a.State, fmt.Sprintf("%s, %d units, product %s", a.State, a.Quantity, a.ProductID)}
}

func bidCompared(b ledger.Bid) compared {
	return compared{b.ID, b.AuctionID, b.State, fmt.Sprintf("%s, %s, auction %s", b.State, money.Format(b.AmountCents), b.AuctionID)}
}

// compareIDs adds a difference for every id in one of store and inLedger and not in the other
// (lookup asks the ledger for one the period's rows lack), and for every id whose state or details
// differ; it returns the number of ids compared.
func (r *Reconciliation) compareIDs(kind string, store map[string]compared, inLedger []compared, lookup func(id string) (compared, bool, error)) (int, error) {
	seen := map[string]bool{}
	for _, l := range inLedger {
		seen[l.id] = true
		st, ok := store[l.id]
		switch {
		case !ok:
			r.Differences = append(r.Differences, Difference{Kind: kind, Owner: l.owner, ID: l.id, What: "missing from the store", Ledger: l.state})
		case st.detail != l.detail:
			r.Differences = append(r.Differences, Difference{Kind: kind, Owner: l.owner, ID: l.id, What: "state", Store: st.detail, Ledger: l.detail})
		}
	}
	ids := make([]string, 0, len(store))
	for id := range store {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if l, found, err := lookup(id); err != nil {
			return 0, err
		} else if found && l.detail == store[id].detail {
			continue
		}
		r.Differences = append(r.Differences, Difference{Kind: kind, Owner: store[id].owner, ID: id, What: "missing from the ledger", Store: store[id].state})
	}
	return len(seen) + len(ids), nil
}

func (s *Service) reconcileBids(ctx context.Context, r *Reconciliation) error {
	auctions, err := s.client.SMembers(ctx, auctionIndexKey(s.keys)).Result()
	if err != nil {
		return err
	}
	slices.Sort(auctions)
	standing, err := s.o.Ledger.BidsStanding(ctx)
	if err != nil {
		return err
	}
	for a := range standing {
		if !slices.Contains(auctions, a) {
			auctions = append(auctions, a)
		}
	}
	for _, a := range auctions {
		r.Auctions++
		amount, err := s.client.HGet(ctx, auctionHighestKey(s.keys, a), "amount").Result()
		if err != nil && err != redis.Nil {
			return err
		}
		cents, _ := strconv.ParseInt(amount, 10, 64)
		if cents != standing[a].HighestCents {
			r.Differences = append(r.Differences, Difference{Kind: "auction", Owner: a, What: "highest bid",
				Store: money.Format(cents), Ledger: money.Format(standing[a].HighestCents)})
		}
	}
	store := map[string]compared{}
	err = s.scanRecords(ctx, s.keys.Prefix+":{a:*}:bid:*", func(key string, h map[string]string) {
		owner, id, ok := ownerAndID(key, ":{a:", "}:bid:")
		if !ok || h["bidder"] == "" {
			return // a tombstone
		}
		cents, _ := strconv.ParseInt(h["amount"], 10, 64)
		store[id] = bidCompared(ledger.Bid{ID: id, AuctionID: owner, AmountCents: cents, State: h["state"]})
	})
	if err != nil {
		return err
	}
	rows, err := s.o.Ledger.AllBids(ctx, r.Since)
	if err != nil {
		return err
	}
	inLedger := make([]compared, len(rows))
	for i, b := range rows {
		inLedger[i] = bidCompared(b)
	}
	r.Bids, err = r.compareIDs("bid", store, inLedger, func(string) (compared, bool, error) { return compared{}, false, nil })
	return err
}

// ownerAndID splits "<prefix>:{p:<owner>}:adm:<id>" (or the auction form) into owner and id.
func ownerAndID(key, open, middle string) (owner, id string, ok bool) {
	_, rest, ok1 := strings.Cut(key, open)
	owner, id, ok2 := strings.Cut(rest, middle)
	return owner, id, ok1 && ok2 && owner != "" && id != ""
}

// scanRecords calls fn with every hash whose key matches pattern, on every master of a Cluster.
func (s *Service) scanRecords(ctx context.Context, pattern string, fn func(key string, h map[string]string)) error {
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				cmds := make([]*redis.MapStringStringCmd, len(keys))
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i, k := range keys {
						cmds[i] = p.HGetAll(ctx, k)
					}
					return nil
				})
				if err != nil {
					return err
				}
				for i, k := range keys {
					if h := cmds[i].Val(); len(h) > 0 {
						fn(k, h)
					}
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	if cluster, ok := s.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			// fn fills maps shared by every master: one master at a time.
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		})
	}
	return scan(ctx, s.client)
}
