package raffle

// The raffle's views: its admin API (open a drawing, read one, list and read the entries) and a
// user's own entries (GET {prefix}/drawings/mine), the user identified like the first raffle route's.

import (
	"encoding/json"
	"net/http"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

func (k *kind) RegisterPublic(mux *http.ServeMux) {
	mux.HandleFunc("GET "+k.s.Prefix()+"/drawings/mine", k.handleMine)
}

func (k *kind) RegisterAdmin(admin *http.ServeMux) {
	admin.HandleFunc("PUT /api/drawings/{id}", k.adminOpen)
	admin.HandleFunc("GET /api/drawings/{id}", k.adminDrawing)
	admin.HandleFunc("GET /api/entries", k.adminEntries)
	admin.HandleFunc("GET /api/entries/{id}", k.adminEntry)
}

// Drawing is a drawing as the admin API shows it.
type Drawing struct {
	ID      string `json:"id"`
	Entries int64  `json:"entries"` // entries held: entered and not given back
}

// pathID is the path's {id}, answered 400 when it is not an id.
func (k *kind) pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !config.ID.MatchString(id) {
		k.s.Responder().Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return "", false
	}
	return id, true
}

// adminOpen opens a drawing (PUT /api/drawings/{id}): 201 when new, 200 when it was open already.
func (k *kind) adminOpen(w http.ResponseWriter, r *http.Request) {
	id, ok := k.pathID(w, r)
	if !ok {
		return
	}
	created, err := k.open(r.Context(), id)
	if err != nil {
		k.s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	web.WriteJSON(w, status, Drawing{ID: id})
}

// adminDrawing answers GET /api/drawings/{id}.
func (k *kind) adminDrawing(w http.ResponseWriter, r *http.Request) {
	id, ok := k.pathID(w, r)
	if !ok {
		return
	}
	v, err := k.s.Client().HGetAll(r.Context(), k.key(id, "drawing")).Result()
	switch {
	case err != nil:
		k.s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
	case len(v) == 0:
		k.s.Responder().Error(w, r, ErrDrawingNotFound)
	default:
		n, _ := json.Number(v["entries"]).Int64()
		web.WriteJSON(w, http.StatusOK, Drawing{ID: id, Entries: n})
	}
}

// adminEntries lists every entry's admin record, newest first (GET /api/entries?page=&page_size=).
func (k *kind) adminEntries(w http.ResponseWriter, r *http.Request) {
	page, size, e := admission.Paging(r)
	if e != nil {
		k.s.Responder().Error(w, r, e)
		return
	}
	items, total, err := k.s.ReadRecords(r.Context(), k.table, "", page, size)
	if err != nil {
		k.s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	admission.WritePage(w, items, total, page, size, false)
}

// adminEntry answers GET /api/entries/{id}: one entry's admin record.
func (k *kind) adminEntry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, found, err := k.s.FindRecord(r.Context(), k.table, id)
	switch {
	case err != nil:
		k.s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !found:
		k.s.Responder().Error(w, r, web.ErrNotFound)
	default:
		web.WriteJSON(w, http.StatusOK, body)
	}
}

// handleMine answers GET {prefix}/drawings/mine?page=&page_size=: the user's own entries, newest
// first, from the ledger when there is one (Edgeq-Source: ledger), else from the admin records. The
// user's pseudonym is not shown.
func (k *kind) handleMine(w http.ResponseWriter, r *http.Request) {
	user, page, size, ok := k.s.Whose(w, r, k.people.Load(), nil)
	if !ok {
		return
	}
	ctx := r.Context()
	if k.s.Ledger() != nil {
		rows, total, err := k.entriesOf(ctx, user, page, size)
		if err == nil {
			items := make([]Entry, len(rows))
			for i, row := range rows {
				items[i] = entryOf(row)
			}
			admission.WritePage(w, items, total, page, size, true)
			return
		}
		k.s.Logger().Warn("raffle: reading the ledger failed; answering from the store", "error", err.Error())
	}
	bodies, total, err := k.s.ReadRecords(ctx, k.table, user, page, size)
	if err != nil {
		k.s.Responder().Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	items := make([]Entry, 0, len(bodies))
	for _, b := range bodies {
		var e Entry
		if json.Unmarshal(b, &e) == nil {
			e.User = ""
			items = append(items, e)
		}
	}
	admission.WritePage(w, items, total, page, size, false)
}

// entryOf is a ledger row as a user's listing shows it.
func entryOf(row Row) Entry {
	e := Entry{ID: row.ID, Drawing: row.Drawing, State: row.State}
	if !row.EnteredAt.IsZero() {
		e.EnteredAt = vocab.FormatTime(row.EnteredAt)
	}
	if !row.CommittedAt.IsZero() {
		e.CommittedAt = vocab.FormatTime(row.CommittedAt)
	}
	if !row.ReleasedAt.IsZero() {
		e.ReleasedAt = vocab.FormatTime(row.ReleasedAt)
	}
	return e
}
