package admission

// Applying stream events to the admin records (records.go): what one event writes (an application:
// the record's index entries, and the record itself when the worker writes it, all idempotent) and the apply.lua calls that write a
// batch of them, one call per owner (one hash tag), which also remove the owner's records past the
// retention.

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
)

// Entry reads the fields of a stream entry, as the scripts write them: text.
type Entry redis.XMessage

// Str is field k ("" when the entry has none).
func (e Entry) Str(k string) string { v, _ := e.Values[k].(string); return v }

// Num is field k as a decimal integer.
func (e Entry) Num(k string) (int64, error) { return strconv.ParseInt(e.Str(k), 10, 64) }

// Application is what applying one event writes to its kind's admin table (records.go): the id's
// entries in the day's list and its user's list, and, for a table the worker writes, the record's
// JSON under its id (kept when the record exists, unless overwrite). All idempotent, so an event
// applied twice changes nothing.
type Application struct {
	Table     *AdminTable
	Owner     string
	ID, User  string
	Body      []byte // nil when the table's records are the scripts' own (AdminTable.scripted)
	Overwrite bool
}

// applyMax bounds the records of one apply.lua call. A script blocks Redis while it runs, and a read
// of grouped entries (up to 100 entries naming up to reserveBatchMax admissions each) would otherwise
// be one long call that every reservation waits behind.
const applyMax = 100

// applyAll applies apps in apply.lua calls of at most applyMax records. A failure part way leaves
// the calls before it applied, which a retry applies again without change (applying is idempotent).
func (s *Service) applyAll(ctx context.Context, apps []Application) error {
	for len(apps) > 0 {
		n := min(len(apps), applyMax)
		if err := s.applyBatch(ctx, apps[:n]); err != nil {
			return err
		}
		apps = apps[n:]
	}
	return nil
}

// applyBatch applies events with one apply.lua call per owner, all in one pipeline: per day of the ids, one HMGET and one
// HSET of the users' lists, one RPUSH of the day's list (and for records the worker writes one HMGET
// and one HSET of them), whatever the number of events; then the owner's records past the retention leave (up to
// twice the call's own number, and 16).
func (s *Service) applyBatch(ctx context.Context, apps []Application) error {
	if len(apps) == 0 {
		return nil
	}
	type owner struct {
		table *AdminTable
		name  string
	}
	type day struct {
		owner
		day int64
	}
	var owners []owner // in order of first record
	days := map[owner][]day{}
	byDay := map[day][]Application{}
	for _, a := range apps {
		o := owner{a.Table, a.Owner}
		d := day{o, RecordsDay(a.ID)}
		if _, ok := days[o]; !ok {
			owners = append(owners, o)
		}
		if _, ok := byDay[d]; !ok {
			days[o] = append(days[o], d)
		}
		byDay[d] = append(byDay[d], a)
	}
	now := time.Now()
	retention := int64(s.o.RecordsRetention / time.Second)
	cutoff, cutoffDay := s.cutoffID(now), now.Add(-s.o.RecordsRetention).Unix()/86400
	usersAt := (now.Unix()/86400+1)*86400 + retention
	calls := make([]store.Call, 0, len(owners))
	for _, o := range owners {
		t := o.table
		keys := make([]string, 0, 3*len(days[o])+4)
		args := make([]any, 0, 8+3*len(days[o])+4*len(apps))
		args = append(args, len(days[o]), 1, cutoff, 2*len(apps)+16, usersAt)
		for _, d := range days[o] {
			keys = append(keys, t.Records(o.name, d.day), t.IDs(o.name, d.day), t.Users(o.name))
			args = append(args, (d.day+1)*86400+retention, Flag(t.scripted()), len(byDay[d]))
			for _, a := range byDay[d] {
				args = append(args, Flag(a.Overwrite), a.ID, a.User, a.Body)
			}
		}
		// The trim: the cutoff day's records (earlier days' keys have expired whole).
		keys = append(keys, t.Records(o.name, cutoffDay), t.IDs(o.name, cutoffDay), t.Users(o.name), t.Users(o.name))
		if t.scripted() {
			keys[len(keys)-1] = t.Unsettled(o.name)
		}
		args = append(args, t.UserPattern, Flag(t.scripted()))
		calls = append(calls, store.Call{Keys: keys, Args: args})
	}
	return s.pipelineScript(ctx, applyScript, calls)
}

// pipelineScript runs calls of script in one pipeline (each owner's under its own hash tag: on a
// Cluster, a pipeline per node); if the store did not have the script, once more with its source.
func (s *Service) pipelineScript(ctx context.Context, script *redis.Script, calls []store.Call) error {
	for attempt := 0; ; attempt++ {
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range calls {
				if attempt == 0 {
					script.EvalSha(ctx, p, c.Keys, c.Args...)
				} else {
					script.Eval(ctx, p, c.Keys, c.Args...)
				}
			}
			return nil
		})
		if err == nil || attempt > 0 || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return err
		}
	}
}

// applier parses an entry of a stream and returns what applies it alone.
func (s *Service) applier(src ownerStream, msg redis.XMessage) (func(context.Context) error, error) {
	apps, err := src.kind.Parse(src.owner, msg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return s.applyAll(ctx, apps) }, nil
}
