package stock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/vocab"
)

// Stock admissions in the ledger: the row each event writes, and what reconcile compares.

func (k *stockKind) LedgerRow(product string, msg redis.XMessage, b *ledger.Batch) error {
	recs, _, err := parseAdmissions(product, msg)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		b.Rows = append(b.Rows, ledgerAdmission(rec))
	}
	return nil
}

func ledgerAdmission(rec Record) Row {
	return Row{ID: rec.ID, ProductID: rec.ProductID, Buyer: rec.User, Quantity: rec.Quantity, State: rec.State,
		AdmittedAt: vocab.ParseMilli(rec.AdmittedAt), CommittedAt: vocab.ParseMilli(rec.CommittedAt),
		ReleasedAt: vocab.ParseMilli(rec.ReleasedAt), CancelledAt: vocab.ParseMilli(rec.CancelledAt)}
}

// recordOf is the admin API's view of a ledger row.
func recordOf(a Row) Record {
	return Record{ID: a.ID, ProductID: a.ProductID, User: a.Buyer, Quantity: a.Quantity, State: a.State,
		AdmittedAt: vocab.FormatMilli(a.AdmittedAt), ReleasedAt: vocab.FormatMilli(a.ReleasedAt),
		CancelledAt: vocab.FormatMilli(a.CancelledAt), CommittedAt: vocab.FormatMilli(a.CommittedAt)}
}

// Reconcile compares units held per product and every admission record.
func (k *stockKind) Reconcile(ctx context.Context, r *admission.Reconciliation) error {
	s := k.s
	held, err := unitsHeld(ctx, s.Ledger())
	if err != nil {
		return err
	}
	products, err := s.OwnersToCompare(ctx, k, slices.Collect(maps.Keys(held)))
	if err != nil {
		return err
	}
	r.Owners = append(r.Owners, admission.Tally{N: len(products), Noun: "products"})
	for _, p := range products {
		counts, err := s.Client().HVals(ctx, buyersKey(s.Keys(), p)).Result()
		if err != nil {
			return err
		}
		var units int64
		for _, c := range counts {
			n, _ := strconv.ParseInt(c, 10, 64)
			units += n
		}
		if units != held[p] {
			r.Differences = append(r.Differences, admission.Difference{Kind: "product", Owner: p, What: "units held",
				Store: strconv.FormatInt(units, 10), Ledger: strconv.FormatInt(held[p], 10)})
		}
	}
	rows, err := rowsSince(ctx, s.Ledger(), r.Since)
	if err != nil {
		return err
	}
	open, err := k.unsettled(ctx, time.Now().Add(time.Hour))
	if err != nil {
		return err
	}
	unsettled := map[string]bool{}
	for _, u := range open {
		unsettled[u.id] = true
	}
	return s.CompareRecords(ctx, r, admission.StoreRecords{OwnerNoun: "product",
		Noun: "admission", Open: ":{p:", Middle: "}:adm:", Days: "}:adm@", User: "user",
		ReadDay: func(value string) map[string]string {
			rec := parseStoreRecord(value)
			return map[string]string{"state": rec.state, "user": rec.user, "qty": rec.qty, "at": rec.at}
		}, // reserve.lua's, under the product's hash tag
		Read: func(owner, id string, h map[string]string) admission.Compared {
			qty, _ := strconv.ParseInt(h["qty"], 10, 64)
			return admissionCompared(Row{ID: id, ProductID: owner, Quantity: qty, State: admissionState(h["state"], unsettled[id])})
		},
		InLedger: admission.Mapped(rows, admissionCompared),
		Lookup: func(id string) (admission.Compared, bool, error) {
			// A record older than the ledger rows compared (about to expire from the store): alone.
			a, found, err := ledgerRow(ctx, s.Ledger(), id)
			return admissionCompared(a), found, err
		},
	})
}

func admissionCompared(a Row) admission.Compared {
	return admission.Compared{ID: a.ID, Owner: a.ProductID, State: a.State, Detail: fmt.Sprintf("%s, %d units, product %s", a.State, a.Quantity, a.ProductID)}
}
