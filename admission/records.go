package admission

// The admin records: what the event workers keep of every admission for the admin API and a user's
// own lists, for the retention (admission.records_retention; the ledger keeps everything). Each
// owner's records live under its own hash tag, so Redis Cluster spreads them as it spreads the
// owners, and no key holds every owner's: per day of the ids' time, the records
// (hash: id -> record) and their ids in the order applied (list: a few bytes each), and per owner its
// users' ids (hash: user -> ids). A kind's record is either the scripts' own (a line of a few
// fields, which also settles it: AdminTable.scripted), which the worker only indexes, or JSON the
// worker writes. The worker (apply.lua) removes the records past the retention as it writes, a bounded
// number per call, and the day's keys expire whole after it.
//
// Reads merge the owners: a page of every record reads each owner's lists of the days within the
// retention, a user's reads each owner's users hash, in one pipeline each; the earlier builds' tables
// (oldrecords.go) are read beside them until they are past the retention.

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

	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// AdminTable is where a kind's admin records live, per owner.
type AdminTable struct {
	Owners  string // the set of the kind's owner ids
	Records func(owner string, day int64) string
	IDs     func(owner string, day int64) string
	Users   func(owner string) string
	// Unsettled is the owner's Unsettled set when the records are the scripts' own: the worker
	// only indexes them, and keeps those of Unsettled admissions past the retention. nil: the worker
	// writes the records (JSON).
	Unsettled func(owner string) string
	// UserPattern captures a record's user (Lua, for apply.lua); userOf is the same in Go; timeOf
	// reads a record's time (ms).
	UserPattern string
	UserOf      func(body string) string
	TimeOf      func(body string) int64
	Old         *OldTable // the earlier builds' table; nil for a kind that never had one
}

func (t *AdminTable) scripted() bool { return t.Unsettled != nil }

// JSONField reads a string field of a JSON record.
func JSONField(name string) func(string) string {
	return func(body string) string {
		var fields map[string]any
		_ = json.Unmarshal([]byte(body), &fields)
		s, _ := fields[name].(string)
		return s
	}
}

// JSONTime reads a time field (vocab.MilliTime) of a JSON record, in ms.
func JSONTime(name string) func(string) int64 {
	field := JSONField(name)
	return func(body string) int64 {
		t, _ := time.Parse(vocab.MilliTime, field(body))
		return t.UnixMilli()
	}
}

// ref names an admin record: its owner and id, or (old) a record of an earlier build's table.
type ref struct {
	owner, id string
	old       bool
}

// stored is an admin record as read: its body (a scripts' record line, or JSON), and a scripts' record's
// orphan mark.
type stored struct{ body, mark string }

// recordDays are the days (since 1970-01-01 UTC) whose records may be within the retention, newest
// first.
func (s *Service) recordDays(now time.Time) []int64 {
	first := now.Add(-s.o.RecordsRetention).Unix() / 86400
	var days []int64
	for d := now.Unix() / 86400; d >= first; d-- {
		days = append(days, d)
	}
	return days
}

// cutoffID is the smallest id of the retention's start: older records leave (ids grow with time).
func (s *Service) cutoffID(now time.Time) string {
	return strconv.FormatUint(ids.AtTime(now.Add(-s.o.RecordsRetention)), 10)
}

// listed is a record read for a page: where it is, its body and its time (ms).
type listed struct {
	ref
	stored
	at int64
}

// newestFirst orders records by time, newest first, equal times by id, from the highest.
func newestFirst(a, b listed) int {
	if c := cmp.Compare(b.at, a.at); c != 0 {
		return c // the ids are read only for equal times: a deep page's merge compares many records
	}
	x, _ := strconv.ParseUint(a.id, 10, 64)
	y, _ := strconv.ParseUint(b.id, 10, 64)
	return cmp.Or(cmp.Compare(y, x), cmp.Compare(b.id, a.id))
}

// page reads a page of a table's records, newest first, and how many there are: every record's (user
// "") or one user's. A user's records are read whole and sorted by time. Every record's are a merge of
// the owners' lists of each day, each newest first in the order its records were applied (which is the
// order of their times, but for an event applied late, after a take-over): the merge takes, at each
// step, the list whose next record is the newest, so it is one sequence whatever the page, and its
// first page*size are among the last page*size of each list. Pages of it hold each record once. When
// one list alone holds records (one owner, one day), the merge is that list: the page's ids are read
// from their place in it, and only the page's records, whatever its depth.
func (s *Service) page(ctx context.Context, t *AdminTable, user string, page, size int64) ([]listed, int64, error) {
	owners, err := s.client.SMembers(ctx, t.Owners).Result()
	if err != nil {
		return nil, 0, err
	}
	var seqs [][]ref
	var total int64
	windowed := false
	if user == "" {
		seqs, total, windowed, err = s.newestOfAll(ctx, t, owners, page, size)
	} else {
		var refs []ref
		refs, err = s.allOfUser(ctx, t, owners, user)
		seqs = [][]ref{refs}
	}
	if err != nil {
		return nil, 0, err
	}
	refs := slices.Concat(seqs...)
	bodies, err := s.bodies(ctx, t, refs)
	if err != nil {
		return nil, 0, err
	}
	found := make([][]listed, len(seqs))
	i := 0
	for k, seq := range seqs {
		found[k] = make([]listed, 0, len(seq))
		for range seq {
			if b := bodies[i]; b.body != "" {
				found[k] = append(found[k], listed{refs[i], b, t.TimeOf(b.body)})
			}
			i++
		}
	}
	var all []listed
	switch {
	case windowed:
		return found[0], total, nil
	case user != "":
		all = found[0]
		slices.SortFunc(all, newestFirst)
		total = int64(len(all))
	default:
		all = mergeNewest(found, page*size)
	}
	lo, hi, _ := web.Window(int64(len(all)), page, size)
	return all[lo:hi], total, nil
}

// mergeNewest merges sequences each newest first into one, up to limit records: at each step the
// sequence whose next record is the newest gives it.
func mergeNewest(seqs [][]listed, limit int64) []listed {
	held := 0
	for _, seq := range seqs {
		held += len(seq)
	}
	out := make([]listed, 0, min(limit, int64(held)))
	next := make([]int, len(seqs))
	for int64(len(out)) < limit {
		best := -1
		for k, seq := range seqs {
			if next[k] < len(seq) && (best < 0 || newestFirst(seq[next[k]], seqs[best][next[best]]) < 0) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		out = append(out, seqs[best][next[best]])
		next[best]++
	}
	return out
}

// newestOfAll reads, for a page of every record, the newest page*size ids of every owner's lists of
// the days within the retention and of the earlier builds' table, each a sequence newest first, and
// how many records all of them hold. windowed: one list alone holds records, and the one sequence
// returned is the page's ids alone, read from their place in it.
func (s *Service) newestOfAll(ctx context.Context, t *AdminTable, owners []string, page, size int64) (
	seqs [][]ref, total int64, windowed bool, err error) {
	type list struct {
		owner, key string
		size       *redis.IntCmd
		ids        *redis.StringSliceCmd
	}
	var lists []*list
	var oldSize *redis.IntCmd
	days := s.recordDays(time.Now())
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range owners {
			for _, day := range days {
				key := t.IDs(o, day)
				lists = append(lists, &list{owner: o, key: key, size: p.LLen(ctx, key)})
			}
		}
		if t.Old != nil {
			oldSize = p.ZCard(ctx, t.Old.ByTime)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, false, err
	}
	var held []*list
	for _, l := range lists {
		if n := l.size.Val(); n > 0 {
			total += n
			held = append(held, l)
		}
	}
	var old int64
	if t.Old != nil {
		old = oldSize.Val()
		total += old
	}
	n := page * size
	var oldIDs *redis.StringSliceCmd
	windowed = len(held) == 1 && old == 0
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, l := range held {
			if windowed { // the page's place from the list's tail, its newest: [-n, -n+size-1]
				l.ids = p.LRange(ctx, l.key, -n, -n+size-1)
			} else {
				l.ids = p.LRange(ctx, l.key, -n, -1)
			}
		}
		if old > 0 {
			oldIDs = p.ZRevRange(ctx, t.Old.ByTime, 0, n-1)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, false, err
	}
	seen := map[string]bool{}
	for _, l := range held {
		var seq []ref
		ids := l.ids.Val()
		for j := len(ids) - 1; j >= 0; j-- { // the list's tail is its newest
			if id := ids[j]; !seen[id] {
				seen[id] = true
				seq = append(seq, ref{owner: l.owner, id: id})
			}
		}
		seqs = append(seqs, seq)
	}
	if old == 0 {
		return seqs, total, windowed, nil
	}
	var olds []ref
	for _, id := range oldIDs.Val() {
		if !seen[id] {
			seen[id] = true
			olds = append(olds, ref{id: id, old: true})
		}
	}
	return append(seqs, olds), total, false, nil
}

// allOfUser reads every record of a user within the retention: each owner's users hash, and the
// earlier builds' indexes.
func (s *Service) allOfUser(ctx context.Context, t *AdminTable, owners []string, user string) ([]ref, error) {
	lists := make([]*redis.StringCmd, len(owners))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, o := range owners {
			lists[i] = p.HGet(ctx, t.Users(o), user)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	cutoff, _ := strconv.ParseUint(s.cutoffID(time.Now()), 10, 64)
	seen := map[string]bool{}
	var refs []ref
	for i, o := range owners {
		for _, id := range strings.Fields(lists[i].Val()) {
			// An id past the retention that no trim reached yet (nothing was applied since) is gone.
			if n, err := strconv.ParseUint(id, 10, 64); err == nil && n >= cutoff && !seen[id] {
				seen[id] = true
				refs = append(refs, ref{owner: o, id: id})
			}
		}
	}
	old, _, err := s.oldPageIDs(ctx, t.Old, user, 1, 1<<40)
	if err != nil {
		return nil, err
	}
	for _, id := range old {
		if !seen[id] {
			seen[id] = true
			refs = append(refs, ref{id: id, old: true})
		}
	}
	return refs, nil
}

// hmgetFields is the most fields one HMGET of bodies asks for: a deep page of several lists reads
// many records of one day's hash, in commands of this size, so none holds Redis for long.
const hmgetFields = 1024

// bodies reads the records of refs, in order; a zero stored for one there is none of. The records of
// one day's hash are read together, a command for up to hmgetFields fields.
func (s *Service) bodies(ctx context.Context, t *AdminTable, refs []ref) ([]stored, error) {
	out := make([]stored, len(refs))
	type read struct {
		key    string
		fields []string
		at     []int // the refs' places in out
		cmd    *redis.SliceCmd
	}
	var reads []*read
	open := map[string]*read{}
	var oldIDs []string
	var oldAt []int
	for i, r := range refs {
		if r.old {
			oldIDs, oldAt = append(oldIDs, r.id), append(oldAt, i)
			continue
		}
		key := t.Records(r.owner, RecordsDay(r.id))
		rd := open[key]
		if rd == nil || len(rd.fields) >= hmgetFields {
			rd = &read{key: key}
			open[key] = rd
			reads = append(reads, rd)
		}
		rd.fields, rd.at = append(rd.fields, r.id), append(rd.at, i)
		if t.scripted() {
			rd.fields = append(rd.fields, r.id+":orphan")
		}
	}
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, rd := range reads {
			rd.cmd = p.HMGet(ctx, rd.key, rd.fields...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	per := 1
	if t.scripted() {
		per = 2 // the record and its orphan mark
	}
	for _, rd := range reads {
		v := rd.cmd.Val()
		if len(v) != len(rd.fields) {
			continue // the command failed: its records are unknown
		}
		for j, i := range rd.at {
			out[i].body = str(v[j*per])
			if per == 2 {
				out[i].mark = str(v[j*per+1])
			}
		}
	}
	old, err := s.oldBodies(ctx, t.Old, oldIDs)
	if err != nil {
		return nil, err
	}
	for j, body := range old {
		out[oldAt[j]].body = body
	}
	return out, nil
}

// locate finds a record by its id alone: under each owner, then in the earlier builds' table.
// found is false when there is none (for scripts' records, a tombstone is none).
func (s *Service) locate(ctx context.Context, t *AdminTable, id string) (ref, stored, bool, error) {
	owners, err := s.client.SMembers(ctx, t.Owners).Result()
	if err != nil {
		return ref{}, stored{}, false, err
	}
	refs := make([]ref, len(owners), len(owners)+1)
	for i, o := range owners {
		refs[i] = ref{owner: o, id: id}
	}
	refs = append(refs, ref{id: id, old: true})
	got, err := s.bodies(ctx, t, refs)
	if err != nil {
		return ref{}, stored{}, false, err
	}
	for i, st := range got {
		if r := refs[i]; st.body != "" && (r.old || t.UserOf(st.body) != "") {
			return refs[i], st, true, nil
		}
	}
	return ref{}, stored{}, false, nil
}

// ErrUnsettled: an operator may not delete the record of an admission still unsettled (its release
// and commit need it): settle it first.
var ErrUnsettled = errors.New("the admission is unsettled: cancel or commit it first")

// DeleteRecord removes a record and its index entries in one script, so no index is left pointing at
// nothing; false when there was no record.
func (s *Service) DeleteRecord(ctx context.Context, t *AdminTable, id string) (bool, error) {
	r, st, found, err := s.locate(ctx, t, id)
	if err != nil || !found {
		return false, err
	}
	if r.old {
		return s.oldDelete(ctx, t.Old, id)
	}
	day := RecordsDay(id)
	keys := []string{t.Records(r.owner, day), t.IDs(r.owner, day), t.Users(r.owner), t.Users(r.owner)}
	if t.scripted() {
		keys[3] = t.Unsettled(r.owner)
	}
	n, err := deleteScript.Run(ctx, s.client, keys, id, t.UserOf(st.body), Flag(t.scripted())).Int64()
	if n < 0 {
		return false, ErrUnsettled
	}
	return n > 0, err
}

// str is v when it is a string, "" otherwise (a reply's field that may be nil).
func str(v any) string {
	s, _ := v.(string)
	return s
}
