package admission

// Applying stream events to the admin records (records.go): what one event writes (an application:
// the record's JSON and its index entries, all idempotent) and the apply.lua calls that write a batch
// of them, every key under the {adm} hash tag.

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

// application is what applying one event writes to its kind's admin table (records.go): the record's
// JSON under its id (kept when the record exists, unless overwrite) and its entries in the indexes
// by time and by user, all idempotent, so an event applied twice changes nothing. Every key is under
// the {adm} hash tag, so one script applies a whole batch, on a Cluster too.
type application struct {
	table     *adminTable
	id, user  string
	atMs      int64 // the admission's (or bid's) time: its place in both indexes
	body      []byte
	overwrite bool
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

// applyBatch applies events with one apply.lua call: per table, one HSET of the records and one ZADD
// per index, whatever the number of events. With the ledger on, records older than LedgerRecordTTL
// leave the tables (the ledger keeps them; apply.lua removes a few per call).
func (s *Service) applyBatch(ctx context.Context, apps []application) error {
	if len(apps) == 0 {
		return nil
	}
	var ttl, cutoff int64
	if s.o.Ledger != nil {
		ttl, cutoff = int64(LedgerRecordTTL/time.Second), time.Now().Add(-LedgerRecordTTL).UnixMilli()
	}
	var tables []*adminTable // in order of first record
	byTable := map[*adminTable][]application{}
	for _, a := range apps {
		if _, ok := byTable[a.table]; !ok {
			tables = append(tables, a.table)
		}
		byTable[a.table] = append(byTable[a.table], a)
	}
	keys := make([]string, 0, 3*len(tables))
	args := make([]any, 0, 2+2*len(tables)+5*len(apps))
	args = append(args, ttl, cutoff)
	for _, t := range tables {
		keys = append(keys, t.records, t.byTime, t.byUser)
		args = append(args, t.userField, len(byTable[t]))
		for _, a := range byTable[t] {
			args = append(args, flag(a.overwrite), a.id, strconv.FormatInt(a.atMs, 10), a.user, a.body)
		}
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
