package stock

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/redis/go-redis/v9"
)

// The stock scripts' own records of admissions (admission/scripts/lib.lua): a field of the product's hash for
// the day of the id's time (recordsKey), or, written by an earlier build, a hash per admission
// (legacyRecordKey). Not the admin records (admission/records.go), which the worker writes from the events.

// storeRecord is an admission's record as the stock scripts keep it.
type storeRecord struct {
	state, user, qty, at, route string
	orphan                      string // the hold mark: "held" (orphans: hold), "ambiguous" or ""
	legacy                      bool   // in an earlier build's hash per admission
}

// recordRef names an admission's record: its product and id.
type recordRef struct{ product, id string }

// parseStoreRecord reads a day hash's field value: "<state> <user> <qty> <at> <route>", then when
// it was given back (the route "-" when it has none), a tombstone being the state alone.
func parseStoreRecord(v string) storeRecord {
	f := strings.Fields(v)
	f = append(f, make([]string, max(5-len(f), 0))...)
	rec := storeRecord{state: f[0], user: f[1], qty: f[2], at: f[3], route: f[4]}
	if rec.route == "-" {
		rec.route = ""
	}
	return rec
}

// storeRecords reads the records of refs in one pipeline, both forms at once; nil for an admission
// without one.
func (k *stockKind) storeRecords(ctx context.Context, refs []recordRef) ([]*storeRecord, error) {
	s := k.s
	current := make([]*redis.SliceCmd, len(refs))
	legacy := make([]*redis.SliceCmd, len(refs))
	_, err := s.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			current[i] = p.HMGet(ctx, recordsKey(s.Keys(), r.product, r.id), r.id, r.id+":orphan")
			legacy[i] = p.HMGet(ctx, legacyRecordKey(s.Keys(), r.product, r.id), "state", "user", "qty", "at", "route", "orphan")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]*storeRecord, len(refs))
	for i := range refs {
		if v := current[i].Val(); len(v) == 2 && v[0] != nil {
			rec := parseStoreRecord(str(v[0]))
			rec.orphan = str(v[1])
			out[i] = &rec
		} else if v := legacy[i].Val(); len(v) == 6 && v[0] != nil {
			out[i] = &storeRecord{state: str(v[0]), user: str(v[1]), qty: str(v[2]), at: str(v[3]), route: str(v[4]),
				orphan: str(v[5]), legacy: true}
		}
	}
	return out, nil
}

// holdOrphan: an unsettled admission is held for an operator because its replica died (orphans:
// hold), as its record's mark says.
const holdOrphan = "held"

// markHold marks an admission's record held for an operator, and why, once: false when it was marked
// already.
func (k *stockKind) markHold(ctx context.Context, product, id string, rec *storeRecord, why string) (bool, error) {
	s := k.s
	if rec.legacy {
		return s.Client().HSetNX(ctx, legacyRecordKey(s.Keys(), product, id), "orphan", why).Result()
	}
	return s.Client().HSetNX(ctx, recordsKey(s.Keys(), product, id), id+":orphan", why).Result()
}

// Hold marks a stock admission of this replica's (its record is of the current form) held, and why.
func (k *stockKind) Hold(ctx context.Context, c admission.Claim, why string) error {
	_, err := k.markHold(ctx, c.Owner, c.ID, &storeRecord{}, why)
	return err
}

// stockTable: the scripts write the admission records; the worker indexes them.
func stockTable(k store.Keys) *admission.AdminTable {
	return &admission.AdminTable{Owners: productIndexKey(k),
		Records:     func(p string, day int64) string { return dayRecordsKey(k, p, day) },
		IDs:         func(p string, day int64) string { return idsKey(k, p, day) },
		Users:       func(p string) string { return usersKey(k, p) },
		Unsettled:   func(p string) string { return unsettledKey(k, p) },
		UserPattern: `^%S+ (%S+)`,
		UserOf:      func(body string) string { return parseStoreRecord(body).user },
		TimeOf:      stockTime,
		Old:         oldStockTable(k)}
}

func oldStockTable(k store.Keys) *admission.OldTable {
	return &admission.OldTable{Records: k.Global("adm", "admissions"), ByTime: k.Global("adm", "by_time"), ByUser: k.Global("adm", "by_user"),
		UserField:    "user",
		LegacyRecord: func(id string) string { return k.Global("adm", "a:"+id) },
		LegacyUser:   func(user string) string { return k.Global("adm", "user:"+user) }}
}

// stockTime is a stock admission's time: its record's, or an earlier build's JSON's.
func stockTime(body string) int64 {
	if strings.HasPrefix(body, "{") {
		return admission.JSONTime("admitted_at")(body)
	}
	at, _ := strconv.ParseInt(parseStoreRecord(body).at, 10, 64)
	return at
}

// stockRecord reads a stock admission's admin record: the scripts' line (admission/scripts/lib.lua:
// "<state> <user> <qty> <at ms> <route> <given back at, ms>"), or an earlier build's JSON. false
// for a tombstone.
func stockRecord(st admission.StoredRecord) (Record, bool) {
	if strings.HasPrefix(st.Body, "{") {
		var rec Record
		return rec, json.Unmarshal([]byte(st.Body), &rec) == nil
	}
	f := strings.Fields(st.Body)
	if len(f) < 4 {
		return Record{}, false
	}
	qty, err1 := strconv.ParseInt(f[2], 10, 64)
	at, err2 := strconv.ParseInt(f[3], 10, 64)
	if errors.Join(err1, err2) != nil {
		return Record{}, false
	}
	rec := Record{ID: st.ID, ProductID: st.Owner, User: f[1], Quantity: qty, State: f[0], AdmittedAt: vocab.FormatUnixMilli(at)}
	if len(f) >= 6 {
		if given, err := strconv.ParseInt(f[5], 10, 64); err == nil {
			switch rec.State {
			case "released":
				rec.ReleasedAt = vocab.FormatUnixMilli(given)
			case "cancelled":
				rec.CancelledAt = vocab.FormatUnixMilli(given)
			}
		}
	}
	if st.Mark == "released" {
		rec.Reason = "orphaned" // given back by the orphan sweep (orphans.go)
	}
	return rec, true
}

// str is a field of a script's answer as a string ("" when it is not one).
func str(v any) string {
	s, _ := v.(string)
	return s
}
