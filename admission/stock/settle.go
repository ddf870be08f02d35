package stock

// An operator settles a stock admission by hand (the admin API): cancel or commit.

import (
	"fmt"
	"net/http"
	"time"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// adminCancel cancels an admission: the shop cancelled the order, or the operator decided
// an unsettled one. Its units go back to stock and the buyer may buy again; the cancelled event
// reaches the admin indexes (and the ledger) through the worker. 409 ALREADY_GIVEN_BACK when it was
// released or cancelled already; 404 until the worker has recorded the admission (a moment after it).
func (k *stockKind) adminCancel(w http.ResponseWriter, r *http.Request) {
	s, id, ctx := k.s, r.PathValue("id"), r.Context()
	rec, ok := k.settleable(w, r, id)
	if !ok {
		return
	}
	at, err := time.Parse(vocab.MilliTime, rec.AdmittedAt)
	if err != nil {
		s.Responder().Error(w, r, web.ErrInternal.Because(fmt.Errorf("admission %s: admitted_at %q", id, rec.AdmittedAt)))
		return
	}
	c := admission.Claim{Owner: rec.ProductID, User: rec.User, ID: id, Value: rec.Quantity}
	res, err := cancelScript.Run(ctx, s.Client(), k.keys(c), id, rec.User, rec.Quantity, at.UnixMilli(),
		k.recordKeep()).Int64Slice()
	if err != nil || len(res) != 2 {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(fmt.Errorf("cancel: %v %v", res, err)))
		return
	}
	if res[0] != 0 {
		state := "released"
		if res[0] == 4 {
			state = "cancelled"
		}
		s.Responder().Error(w, r, errAlreadyGivenBack.With("state", state))
		return
	}
	k.Forget(rec.ProductID)
	s.Count(k, "cancelled")
	s.CountSettled(k, c, report.Cancelled)
	web.RequestFrom(ctx).Logger().Info("admission cancelled by an operator", "id", id, "product", rec.ProductID,
		"quantity", rec.Quantity, "remaining_stock", res[1])
	web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "product_id": rec.ProductID, "state": "cancelled",
		"quantity": rec.Quantity, "remaining_stock": res[1]})
}

// adminCommit settles an unsettled admission as sold: the operator found the shop's order
// of an admission whose replica died before its settlement. The units stay sold; the buyer's
// in-flight claim ends. 409 ALREADY_GIVEN_BACK when it was released or cancelled.
func (k *stockKind) adminCommit(w http.ResponseWriter, r *http.Request) {
	s, id, ctx := k.s, r.PathValue("id"), r.Context()
	rec, ok := k.settleable(w, r, id)
	if !ok {
		return
	}
	c := admission.Claim{Owner: rec.ProductID, User: rec.User, ID: id, Value: rec.Quantity}
	code, err := commitScript.Run(ctx, s.Client(), k.keys(c), id, admission.Flag(s.Ledger() != nil), rec.User).Int64()
	if err != nil {
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	if code == 2 {
		s.Responder().Error(w, r, errAlreadyGivenBack)
		return
	}
	if rec.State != "committed" {
		s.CountSettled(k, c, report.Committed) // the report's sold: an operator's commit is the shop's yes
	}
	web.RequestFrom(ctx).Logger().Info("admission committed by an operator", "id", id, "product", rec.ProductID)
	web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "product_id": rec.ProductID, "state": "committed"})
}

// settleable reads the admission an operator settles by hand (cancel, commit): its record, or the
// answer already written (a malformed id, none recorded yet, one given back already).
func (k *stockKind) settleable(w http.ResponseWriter, r *http.Request, id string) (Record, bool) {
	s := k.s
	if _, ok := k.admissionID(w, r); !ok {
		return Record{}, false
	}
	rec, found, err := k.adminRecord(r.Context(), id)
	if err == nil && !found {
		// Not in the admin indexes yet (the worker that read its event may have died with its replica:
		// another takes it over after ClaimIdle): its record under its product tells.
		rec, found, err = k.productRecord(r.Context(), id)
	}
	switch {
	case err != nil:
		s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !found:
		s.Responder().Error(w, r, errAdmissionNotFound)
	case rec.State == "released" || rec.State == "cancelled":
		s.Responder().Error(w, r, errAlreadyGivenBack.With("state", rec.State))
	default:
		return rec, true
	}
	return Record{}, false
}
