package stock

import (
	"net/http"

	"github.com/edgeq/edgeq/internal/web"
)

// MyAdmission is one of a buyer's own admissions (GET {prefix}/admissions/mine): what the
// buyer bought and where it stands, without the buyer's pseudonym.
type MyAdmission struct {
	ID          string `json:"id"` // the shop received it as Edgeq-Admission-Id
	ProductID   string `json:"product_id"`
	Quantity    int64  `json:"quantity"`
	State       string `json:"state"` // admitted, committed (with the ledger on), released, cancelled
	AdmittedAt  string `json:"admitted_at"`
	ReleasedAt  string `json:"released_at,omitempty"`
	CancelledAt string `json:"cancelled_at,omitempty"`
}

func myAdmission(r Record) MyAdmission {
	return MyAdmission{ID: r.ID, ProductID: r.ProductID, Quantity: r.Quantity, State: r.State,
		AdmittedAt: r.AdmittedAt, ReleasedAt: r.ReleasedAt, CancelledAt: r.CancelledAt}
}

// handleMyAdmissions answers GET {prefix}/admissions/mine?page=&page_size=: the buyer's admissions,
// newest first, the buyer identified like the first stock route's user (as GET {prefix}/auctions/mine
// identifies bidders). They come from the ledger when it is on, else from the buyer's index the event
// worker keeps (so a purchase shows once the worker has recorded it, normally within a second).
func (k *stockKind) handleMyAdmissions(w http.ResponseWriter, r *http.Request) {
	s := k.s
	buyer, page, size, ok := s.Whose(w, r, k.buyers.Load(), nil)
	if !ok {
		return
	}
	var records []Record
	var total int64
	var err error
	read := false
	if s.Ledger() != nil {
		rows, n, lerr := ledgerPage(r.Context(), s.Ledger(), buyer, page, size)
		if lerr == nil {
			for _, a := range rows {
				records = append(records, recordOf(a))
			}
			total, read = n, true
		} else {
			s.LedgerReadFailed(r, lerr)
		}
	}
	if !read {
		records, total, err = k.pageOf(r.Context(), buyer, page, size)
		if err != nil {
			s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
	}
	items := make([]MyAdmission, len(records))
	for i, rec := range records {
		items[i] = myAdmission(rec)
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}
