package admission

// The admin records: what the event workers keep of every admission and bid for the admin API and
// a buyer's own lists (with the ledger on, for LedgerRecordTTL; the ledger keeps everything). A
// kind's records are one table of three keys under the {adm} hash tag, each written once per batch
// of events by apply.lua (so what a record costs Redis is two hash fields and a sorted-set member,
// not keys of its own): the records' JSON in one hash (id -> JSON), an index by time (sorted set)
// and an index by user (hash: user -> the user's ids, space-separated).
//
// Builds before this table wrote a key per record ({adm}:a:<id>, {adm}:b:<id>) and a sorted set
// per user ({adm}:user:<user>, {adm}:ubids:<user>). Those are read still (a record missing from the
// hash, a user's earlier entries) and never written; they go with their TTLs or an admin delete.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
)

// adminTable is where a kind's admin records live.
type adminTable struct {
	records, byTime, byUser string
	userField               string // the JSON field of a record that names its user
	// The keys of earlier builds: a record's, and a user's index.
	legacyRecord, legacyUser func(string) string
}

func stockTable(k store.Keys) *adminTable {
	return &adminTable{records: k.Global("adm", "admissions"), byTime: byTimeKey(k), byUser: k.Global("adm", "by_user"),
		userField:    "user",
		legacyRecord: func(id string) string { return k.Global("adm", "a:"+id) },
		legacyUser:   func(user string) string { return k.Global("adm", "user:"+user) }}
}

func bidTable(k store.Keys) *adminTable {
	return &adminTable{records: k.Global("adm", "bids"), byTime: k.Global("adm", "bids_by_time"), byUser: k.Global("adm", "bids_by_user"),
		userField:    "bidder",
		legacyRecord: func(id string) string { return k.Global("adm", "b:"+id) },
		legacyUser:   func(user string) string { return k.Global("adm", "ubids:"+user) }}
}

// bodies reads the JSON records of ids, in order, "" for one there is none of: one HMGET, and one
// MGET of the earlier builds' keys for those it did not find.
func (s *Service) bodies(ctx context.Context, t *adminTable, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	values, err := s.client.HMGet(ctx, t.records, ids...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	var missing []int
	for i, v := range values {
		if str, ok := v.(string); ok {
			out[i] = str
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	keys := make([]string, len(missing))
	for j, i := range missing {
		keys[j] = t.legacyRecord(ids[i])
	}
	// Every {adm} key is in one Cluster slot, so one MGET reads them all.
	old, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	for j, v := range old {
		if str, ok := v.(string); ok {
			out[missing[j]] = str
		}
	}
	return out, nil
}

// pageIDs is a page of a table's ids, newest first (equal times by id, from the highest), and how
// many there are: every record's (user "") or one user's.
func (s *Service) pageIDs(ctx context.Context, t *adminTable, user string, page, size int64) ([]string, int64, error) {
	start := (page - 1) * size
	if user == "" {
		total, err := s.client.ZCard(ctx, t.byTime).Result()
		if err != nil {
			return nil, 0, err
		}
		ids, err := s.client.ZRevRange(ctx, t.byTime, start, start+size-1).Result()
		return ids, total, err
	}
	var list *redis.StringCmd
	var old *redis.ZSliceCmd
	s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		list = p.HGet(ctx, t.byUser, user)
		old = p.ZRangeWithScores(ctx, t.legacyUser(user), 0, -1) // an earlier build's index of the user
		return nil
	})
	for _, err := range []error{list.Err(), old.Err()} {
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, 0, err
		}
	}
	ids := strings.Fields(list.Val())
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	for _, z := range old.Val() {
		if id, ok := z.Member.(string); ok && !seen[id] {
			ids, seen[id] = append(ids, id), true
		}
	}
	// Ids are time-ordered (internal/ids): newest first is the highest first.
	slices.SortFunc(ids, func(a, b string) int {
		x, _ := strconv.ParseUint(a, 10, 64)
		y, _ := strconv.ParseUint(b, 10, 64)
		return cmp.Or(cmp.Compare(y, x), cmp.Compare(b, a))
	})
	lo, hi, _ := web.Window(int64(len(ids)), page, size)
	return ids[lo:hi], int64(len(ids)), nil
}

// deleteRecord removes a record and its index entries, whichever build wrote them, in one script, so
// no index is left pointing at nothing; false when there was no record.
func (s *Service) deleteRecord(ctx context.Context, t *adminTable, id string) (bool, error) {
	bodies, err := s.bodies(ctx, t, []string{id})
	if err != nil || bodies[0] == "" {
		return false, err
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &fields); err != nil {
		return false, err
	}
	user, _ := fields[t.userField].(string)
	n, err := deleteScript.Run(ctx, s.client, []string{t.records, t.byTime, t.byUser, t.legacyRecord(id), t.legacyUser(user)}, id, user).Int64()
	return n > 0, err
}
