package admission

// The admin records of builds before the records moved under their owners' hash tags (records.go):
// a kind's records were one table of three keys under the {adm} hash tag, written by the event worker:
// the records' JSON (hash: id -> JSON), an index by time (sorted set) and an index by user (hash: user
// -> ids). Without the ledger nothing removed them, so they grew with every admission, on one Cluster
// slot. They are read still, beside the new records (a record not found there, a user's earlier ids,
// the list of all), and never written; the event worker removes those past the retention, a bounded
// number at a time (drain), and Redis removes the keys with their last record.
//
// Builds before those tables wrote a key per record and a sorted set per user (OldTable's
// legacyRecord and legacyUser): read beside them too; they go with their TTLs.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/web"
)

// OldTable is where a kind's admin records lived.
type OldTable struct {
	Records, ByTime, ByUser string
	UserField               string // the JSON field of a record that names its user
	// The keys of earlier builds: a record's, and a user's index.
	LegacyRecord, LegacyUser func(string) string
}

// bodies reads the JSON records of ids, in order, "" for one there is none of: one HMGET, and one
// MGET of the earlier builds' keys for those it did not find.
func (s *Service) oldBodies(ctx context.Context, t *OldTable, ids []string) ([]string, error) {
	if len(ids) == 0 || t == nil {
		return nil, nil
	}
	values, err := s.client.HMGet(ctx, t.Records, ids...).Result()
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
		keys[j] = t.LegacyRecord(ids[i])
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
func (s *Service) oldPageIDs(ctx context.Context, t *OldTable, user string, page, size int64) ([]string, int64, error) {
	if t == nil {
		return nil, 0, nil // a kind with no earlier build's table
	}
	start := (page - 1) * size
	if user == "" {
		total, err := s.client.ZCard(ctx, t.ByTime).Result()
		if err != nil {
			return nil, 0, err
		}
		ids, err := s.client.ZRevRange(ctx, t.ByTime, start, start+size-1).Result()
		return ids, total, err
	}
	var list *redis.StringCmd
	var old *redis.ZSliceCmd
	// Each command's error is read below.
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		list = p.HGet(ctx, t.ByUser, user)
		old = p.ZRangeWithScores(ctx, t.LegacyUser(user), 0, -1) // an earlier build's index of the user
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

// oldDelete removes a record and its index entries, whichever earlier build wrote them, in one
// script, so no index is left pointing at nothing; false when there was no record.
func (s *Service) oldDelete(ctx context.Context, t *OldTable, id string) (bool, error) {
	bodies, err := s.oldBodies(ctx, t, []string{id})
	if err != nil || bodies[0] == "" {
		return false, err
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &fields); err != nil {
		return false, err
	}
	user, _ := fields[t.UserField].(string)
	n, err := oldDeleteScript.Run(ctx, s.client, []string{t.Records, t.ByTime, t.ByUser, t.LegacyRecord(id), t.LegacyUser(user)}, id, user).Int64()
	return n > 0, err
}

// drainOld removes, from each kind's old table, up to drainMax records past the retention (older
// than cutoff) with their index entries: one call per table, every TrimEvery, so a deployment that
// kept years of records loses them at a bounded cost per pass, never with one long command.
func (s *Service) drainOld(ctx context.Context, cutoff time.Time) {
	for _, k := range s.kinds {
		tk, ok := k.(TabledKind)
		if !ok || tk.AdminTable().Old == nil {
			continue
		}
		t := tk.AdminTable().Old
		n, err := drainScript.Run(ctx, s.client, []string{t.Records, t.ByTime, t.ByUser}, t.UserField,
			cutoff.UnixMilli(), drainMax).Int64()
		if err != nil {
			s.logger.Warn("removing the earlier builds' admin records past the retention failed", "error", err.Error())
			return
		}
		if n > 0 {
			s.logger.Debug("removed earlier builds' admin records past the retention", "records", n)
		}
	}
}

// drainMax bounds the old records one drain call removes.
const drainMax = 500
