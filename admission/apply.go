package admission

// Applying stream events to the admin records: what one event writes (an application: the
// record's JSON and its index entries, all idempotent) and the apply.lua calls that write a batch of
// them, every key under the {adm} hash tag.

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// recordTime formats the times of records: RFC 3339 with milliseconds, fixed width.
const recordTime = "2006-01-02T15:04:05.000Z07:00"

// LedgerRecordTTL is how long the admin indexes in Redis keep an admission or a bid when the ledger
// is on (without it they stay until deleted): the admin history lists read the ledger then, and the
// store keeps what the unsettled list, cancel and commit need.
const LedgerRecordTTL = 7 * 24 * time.Hour

// entry reads the fields of a stream entry.
type entry redis.XMessage

func (e entry) str(k string) string { v, _ := e.Values[k].(string); return v }

func (e entry) num(k string) (int64, error) { return strconv.ParseInt(e.str(k), 10, 64) }

// application is what applying one event writes: the record's JSON (kept when the record exists,
// unless overwrite) and sorted-set additions, all idempotent, so an event applied twice changes
// nothing. Every key is an admin index under the {adm} hash tag, so one script applies a whole batch,
// on a Cluster too.
type application struct {
	record    string
	body      []byte
	overwrite bool
	zadd      []zentry
}

type zentry struct {
	key    string
	score  float64
	member string
}

// applyMax bounds the records of one apply.lua call. A script blocks Redis while it runs, and a read
// of grouped entries (up to 100 entries naming up to reserveBatchMax admissions each) would otherwise
// be one long call that every reservation waits behind.
const applyMax = 100

// applyAll applies apps in apply.lua calls of at most applyMax records. A failure part way leaves
// the calls before it applied, which a retry applies again without change (applying is idempotent).
func (s *Service) applyAll(ctx context.Context, apps []application) error {
	for len(apps) > 0 {
		n := min(len(apps), applyMax)
		if err := s.applyBatch(ctx, apps[:n]); err != nil {
			return err
		}
		apps = apps[n:]
	}
	return nil
}

// applyBatch applies events with one apply.lua call: each record with one SET, each index with one
// ZADD of every addition the batch makes to it. Applying is idempotent: an event delivered again after
// a take-over, or a batch retried after a lost reply, changes nothing twice.
func (s *Service) applyBatch(ctx context.Context, apps []application) error {
	var ttl, cutoff int64
	if s.o.Ledger != nil {
		ttl, cutoff = int64(LedgerRecordTTL/time.Second), time.Now().Add(-LedgerRecordTTL).UnixMilli()
	}
	keys := make([]string, 0, len(apps)+2)
	args := make([]any, 0, 3+len(apps)*6)
	args = append(args, ttl, cutoff, 0)
	type index struct {
		key   string
		pairs []any
	}
	var indexes []*index // in order of first addition
	byKey := map[string]*index{}
	for _, a := range apps {
		keys = append(keys, a.record)
		args = append(args, flag(a.overwrite), a.body)
		for _, z := range a.zadd {
			ix := byKey[z.key]
			if ix == nil {
				ix = &index{key: z.key}
				byKey[z.key] = ix
				indexes = append(indexes, ix)
			}
			ix.pairs = append(ix.pairs, z.score, z.member)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	args[2] = len(keys)
	for _, ix := range indexes {
		keys = append(keys, ix.key)
		args = append(args, len(ix.pairs)/2)
		args = append(args, ix.pairs...)
	}
	return applyScript.Run(ctx, s.client, keys, args...).Err()
}

// applier parses an entry of a stream and returns what applies it alone.
func (s *Service) applier(src ownerStream, msg redis.XMessage) (func(context.Context) error, error) {
	apps, err := src.kind.parse(src.owner, msg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return s.applyAll(ctx, apps) }, nil
}
