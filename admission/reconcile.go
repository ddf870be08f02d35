package admission

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/redis/go-redis/v9"
)

// Reconciliation (`edgeq reconcile`; docs/reference.md "Ledger") compares the store with the ledger
// after the ledger has caught up with the streams, for each ledgered kind (LedgeredKind.reconcile):
//   - per owner, what the kind counts (what its admissions hold): the store's
//     against the ledger's rows;
//   - every admission the store still has a record of (records live recordTTL, a day) against the
//     ledger's rows of that period: ids in one and not the other, and states that differ.
// Store records are the scripts' own (written in the same call that took the units), not the admin
// indexes, so a store that lost writes (a crash with AOF everysec) shows what it lost.

// Difference is one thing the store and the ledger disagree on.
type Difference struct {
	Kind   string // a kind's owner noun or id noun (its records' noun), "backlog" or "stream"
	Owner  string // the owner's id
	ID     string // the admission's id ("" for a per-owner count)
	What   string // the kind's per-owner count ("units held"), "missing from the ledger", "missing from the store", "state", "not written"
	Store  string // the store's value ("" when it has none)
	Ledger string // the ledger's value

	ownerNoun string // what Owner is (Kind.Owner), for a difference of one id
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
		return fmt.Sprintf("%s %s (%s %s): in the store (%s), missing from the ledger", d.Kind, d.ID, d.ownerNoun, d.Owner, d.Store)
	case d.What == "missing from the store":
		return fmt.Sprintf("%s %s (%s %s): in the ledger (%s), missing from the store", d.Kind, d.ID, d.ownerNoun, d.Owner, d.Ledger)
	default:
		return fmt.Sprintf("%s %s (%s %s): %s: store %s, ledger %s", d.Kind, d.ID, d.ownerNoun, d.Owner, d.What, d.Store, d.Ledger)
	}
}

// Reconciliation is what Reconcile found.
type Reconciliation struct {
	// Owners and IDs are what each ledgered kind compared, in the kinds' order: its owners and its
	// ids (the store's and the ledger's of the period, together).
	Owners, IDs []Tally
	Since       time.Time
	Differences []Difference
}

// A Tally is a number of things compared: a number and a plural noun.
type Tally struct {
	N    int
	Noun string // plural
}

// Compared says what was compared, every kind's owners then every kind's ids: "2 <owners>, 35
// <ids> and 8 <other ids>".
func (r *Reconciliation) Compared() string {
	var parts []string
	for _, t := range slices.Concat(r.Owners, r.IDs) {
		parts = append(parts, fmt.Sprintf("%d %s", t.N, t.Noun))
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
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
		if f, _ := w.pass(ctx); f == foundNothing {
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
	// Ledger rows are compared by id from this time on: the store keeps every record at least
	// recordTTL, or the retention when that is shorter (settled records past it leave, records.go),
	// less a margin for records about to leave while the comparison runs.
	window := min(RecordTTL, s.o.RecordsRetention)
	since := time.Now().Add(-window + min(10*time.Minute, window/6))
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
	for _, k := range s.kinds {
		if l, ok := ledgered(k); ok {
			if err := l.Reconcile(ctx, r); err != nil {
				return nil, err
			}
		}
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
			at = vocab.FormatTime(time.UnixMilli(ms))
		}
		r.Differences = append(r.Differences, Difference{Kind: "stream", Owner: stream, What: "trimmed unread",
			Store: lost[stream], Ledger: at})
	}
	return nil
}

// OwnersToCompare are a kind's owners: those the store indexes, sorted, then those only the ledger
// knows (inLedger).
func (s *Service) OwnersToCompare(ctx context.Context, k Kind, inLedger []string) ([]string, error) {
	owners, err := s.client.SMembers(ctx, k.OwnersKey()).Result()
	if err != nil {
		return nil, err
	}
	slices.Sort(owners)
	slices.Sort(inLedger)
	for _, o := range inLedger {
		if !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	return owners, nil
}

// StoreRecords says how a kind's store StoreRecords are compared with its ledger rows.
type StoreRecords struct {
	Noun         string // "admission": the differences' Kind; its plural is the tally's
	OwnerNoun    string // what the records' owners are: the kind's owner()
	Open, Middle string // the record keys: "<prefix>" open "<owner>" middle "<id>"
	// Days, when set: the records are also fields of hashes "<prefix>" open "<owner>" days "<day>",
	// each value read by ReadDay into the fields Read takes.
	Days     string
	ReadDay  func(value string) map[string]string
	User     string // the field a record holds nothing without (a tombstone: a release of an id the store never saw)
	Read     func(owner, id string, h map[string]string) Compared
	InLedger []Compared // the ledger's rows of the period (r.Since)
	Lookup   func(id string) (Compared, bool, error)
}

// CompareRecords compares every record of a kind the store has (the scripts' own, not the admin
// indexes) with the ledger's rows, and tallies the ids compared.
func (s *Service) CompareRecords(ctx context.Context, r *Reconciliation, c StoreRecords) error {
	store := map[string]Compared{}
	// A record made before the period compared has no row among inLedger: it is left out rather
	// than looked up alone (records outlive the period by up to a day).
	since := r.Since.UnixMilli()
	add := func(owner, id string, h map[string]string) {
		if at, err := strconv.ParseInt(h["at"], 10, 64); h[c.User] != "" && (err != nil || at >= since) {
			store[id] = c.Read(owner, id, h)
		}
	}
	err := s.scanRecords(ctx, s.keys.Prefix+c.Open+"*"+c.Middle+"*", func(key string, h map[string]string) {
		if owner, id, ok := ownerAndID(key, c.Open, c.Middle); ok {
			add(owner, id, h)
		}
	})
	if err == nil && c.Days != "" {
		err = s.scanDayRecords(ctx, s.keys.Prefix+c.Open+"*"+c.Days+"*", func(key, id, value string) {
			if owner, _, ok := ownerAndID(key, c.Open, c.Days); ok {
				add(owner, id, c.ReadDay(value))
			}
		})
	}
	if err != nil {
		return err
	}
	n, err := r.compareIDs(c.Noun, c.OwnerNoun, store, c.InLedger, c.Lookup)
	r.IDs = append(r.IDs, Tally{N: n, Noun: c.Noun + "s"})
	return err
}

// Mapped is f of every row.
func Mapped[T any](rows []T, f func(T) Compared) []Compared {
	out := make([]Compared, len(rows))
	for i, row := range rows {
		out[i] = f(row)
	}
	return out
}

// Compared is an admission as reconcile compares it: its owner, state and the rest.
type Compared struct{ ID, Owner, State, Detail string }

// compareIDs adds a difference for every id in one of store and inLedger and not in the other
// (lookup asks the ledger for one the period's rows lack), and for every id whose state or details
// differ; it returns the number of ids compared.
func (r *Reconciliation) compareIDs(kind, ownerNoun string, store map[string]Compared, inLedger []Compared, lookup func(id string) (Compared, bool, error)) (int, error) {
	seen := map[string]bool{}
	for _, l := range inLedger {
		seen[l.ID] = true
		st, ok := store[l.ID]
		switch {
		case !ok:
			r.Differences = append(r.Differences, Difference{Kind: kind, Owner: l.Owner, ID: l.ID, What: "missing from the store", Ledger: l.State, ownerNoun: ownerNoun})
		case st.Detail != l.Detail:
			r.Differences = append(r.Differences, Difference{Kind: kind, Owner: l.Owner, ID: l.ID, What: "state", Store: st.Detail, Ledger: l.Detail, ownerNoun: ownerNoun})
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
		} else if found && l.Detail == store[id].Detail {
			continue
		}
		r.Differences = append(r.Differences, Difference{Kind: kind, Owner: store[id].Owner, ID: id, What: "missing from the ledger", Store: store[id].State,
			ownerNoun: ownerNoun})
	}
	return len(seen) + len(ids), nil
}

// ownerAndID splits a record key "<prefix>" open "<owner>" middle "<id>" into owner and id.
func ownerAndID(key, open, middle string) (owner, id string, ok bool) {
	_, rest, ok1 := strings.Cut(key, open)
	owner, id, ok2 := strings.Cut(rest, middle)
	return owner, id, ok1 && ok2 && owner != "" && id != ""
}

// scanDayRecords calls fn with every record of the day hashes (scripts/lib.lua) whose key matches
// pattern, on every master of a Cluster, reading each hash in parts (HSCAN): a day of an owner
// that sold well is a large hash. The orphan marks ("<id>:orphan") are not records.
func (s *Service) scanDayRecords(ctx context.Context, pattern string, fn func(key, id, value string)) error {
	return s.eachMaster(ctx, func(ctx context.Context, c redis.Cmdable) error {
		return scanKeys(ctx, c, pattern, func(keys []string) error {
			for _, key := range keys {
				var cursor uint64
				for {
					kv, next, err := c.HScan(ctx, key, cursor, "", 1000).Result()
					if err != nil {
						return err
					}
					for i := 0; i+1 < len(kv); i += 2 {
						if !strings.Contains(kv[i], ":") {
							fn(key, kv[i], kv[i+1])
						}
					}
					if cursor = next; cursor == 0 {
						break
					}
				}
			}
			return nil
		})
	})
}

// scanKeys calls fn with the keys matching pattern on one server, a SCAN page at a time.
func scanKeys(ctx context.Context, c redis.Cmdable, pattern string, fn func(keys []string) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// eachMaster runs scan on the one server, or on every master of a Cluster, one at a time (the
// callers fill maps shared by every master).
func (s *Service) eachMaster(ctx context.Context, scan func(ctx context.Context, c redis.Cmdable) error) error {
	if cluster, ok := s.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		})
	}
	return scan(ctx, s.client)
}

// scanRecords calls fn with every hash whose key matches pattern, on every master of a Cluster.
func (s *Service) scanRecords(ctx context.Context, pattern string, fn func(key string, h map[string]string)) error {
	return s.eachMaster(ctx, func(ctx context.Context, c redis.Cmdable) error {
		return scanKeys(ctx, c, pattern, func(keys []string) error {
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
			return nil
		})
	})
}
