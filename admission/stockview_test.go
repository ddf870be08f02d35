package admission

// The stock kind as these tests see it. Its package imports admission, so only an external test file
// (kinds_link_test.go) can import it: these tests reach it through Kind, through its reserve call,
// set from there, and through the keys and record form it documents (admission/stock/keys.go,
// records.go), written out here as a reader of the store would.

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
)

// ReserveTogether runs the stock kind's reserve.lua once for purchases of one product, as its batcher
// groups those that arrive together (stock.Reserve): each purchase's code and the stock left.
// kinds_link_test.go sets it.
var ReserveTogether func(ctx context.Context, svc *Service, product string, cs []Claim) (codes, remaining []int64, err error)

// reserved is one purchase's answer from ReserveTogether.
type reserved struct{ code, remaining int64 }

// reserveNow is ReserveTogether on svc.
func reserveNow(ctx context.Context, svc *Service, product string, cs []Claim) ([]reserved, error) {
	codes, remaining, err := ReserveTogether(ctx, svc, product, cs)
	if err != nil {
		return nil, err
	}
	out := make([]reserved, len(codes))
	for i := range codes {
		out[i] = reserved{code: codes[i], remaining: remaining[i]}
	}
	return out, nil
}

// A product's keys, under its hash tag.
func infoKey(k store.Keys, product string) string   { return k.Entity("p", product, "info") }
func stockKey(k store.Keys, product string) string  { return k.Entity("p", product, "stock") }
func buyersKey(k store.Keys, product string) string { return k.Entity("p", product, "buyers") }

// recordsKey is the hash of the records of the day of admission id (a field each).
func recordsKey(k store.Keys, product, id string) string {
	return k.Entity("p", product, "adm@"+strconv.FormatInt(RecordsDay(id), 10))
}

// idsKey and usersKey are a product's admin lists: a day's ids, and each buyer's.
func idsKey(k store.Keys, product string, day int64) string {
	return k.Entity("p", product, "ids@"+strconv.FormatInt(day, 10))
}
func usersKey(k store.Keys, product string) string { return k.Entity("p", product, "users") }

// productIndexKey is the set of product ids.
func productIndexKey(k store.Keys) string { return k.Global("adm", "products") }

// storeRecord is an admission's record in its day's hash: "<state> <user> <qty> <at> <route>".
type storeRecord struct{ state, user, qty, at, route string }

// storedRecord reads an admission's record: the zero record when there is none.
func storedRecord(t *testing.T, s *store.Store, product, id string) storeRecord {
	t.Helper()
	v, err := s.Client.HGet(context.Background(), recordsKey(s.Keys, product, id), id).Result()
	if err != nil {
		return storeRecord{}
	}
	f := append(strings.Fields(v), make([]string, 5)...)
	return storeRecord{state: f[0], user: f[1], qty: f[2], at: f[3], route: f[4]}
}

// orphanMark is the orphan sweep's mark on an admission's record ("held", "released" or "").
func orphanMark(s *store.Store, product, id string) string {
	return s.Client.HGet(context.Background(), recordsKey(s.Keys, product, id), id+":orphan").Val()
}

// admissionState is the state of a stock admission whose record says stored: a commit takes it out
// of the unsettled set and leaves its record "admitted", so an admitted record outside the set is
// committed.
func admissionState(stored string, unsettled bool) string {
	if stored == "admitted" && !unsettled {
		return "committed"
	}
	return stored
}

// Record is a stock admission as the admin API shows it and its admin records keep it (JSON).
type Record struct {
	ID         string `json:"id"`
	ProductID  string `json:"product_id"`
	User       string `json:"user"`
	Quantity   int64  `json:"quantity"`
	State      string `json:"state"`
	AdmittedAt string `json:"admitted_at"`
}

// adminRecord is a stock admission's admin record, as FindStored finds it: the scripts' line
// ("<state> <user> <qty> <at ms> ...", scripts/lib.lua) or an earlier build's JSON.
func adminRecord(ctx context.Context, svc *Service, id string) (Record, bool, error) {
	st, found, err := svc.FindStored(ctx, tableOf(stockOf(svc)), id)
	if err != nil || !found {
		return Record{}, false, err
	}
	var rec Record
	if strings.HasPrefix(st.Body, "{") {
		return rec, json.Unmarshal([]byte(st.Body), &rec) == nil, nil
	}
	f := strings.Fields(st.Body)
	if len(f) < 4 {
		return Record{}, false, nil
	}
	qty, err := strconv.ParseInt(f[2], 10, 64)
	return Record{ID: st.ID, ProductID: st.Owner, User: f[1], Quantity: qty, State: f[0]}, err == nil, nil
}

// orphaned reads edgeq_orphaned_admissions_total{route, result} from st's registry.
func (st *stack) orphaned(route, result string) float64 {
	st.T.Helper()
	families, err := st.Reg.Gather()
	if err != nil {
		st.T.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "edgeq_orphaned_admissions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// sweep is the stock kind's slow beat on svc: its gauge and its orphans (SweepingKind).
func sweep(ctx context.Context, svc *Service) { stockOf(svc).(SweepingKind).Sweep(ctx) }

// useOrphans gives svc's stock kind routes' orphans settings, as a reload does (ConfiguredKind).
func useOrphans(t *testing.T, svc *Service, routes []config.Route) {
	t.Helper()
	if err := stockOf(svc).(ConfiguredKind).Use(&config.Config{Routes: routes}); err != nil {
		t.Fatal(err)
	}
}
