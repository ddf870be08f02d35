package admission

// The admission admin API (docs/reference.md): its routes (each kind adds its own views: ViewedKind),
// and what every kind's views share: paging, listOwners, the Edgeq-Source header of an answer read
// from the ledger, the user of a path. Dead letters are in deadletters.go.

import (
	"context"
	"net/http"
	"regexp"
	"slices"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/web"
)

// MaxAdminBody bounds the JSON body of a kind's admin write (an owner created or changed).
const MaxAdminBody = 64 << 10

// RegisterAdmin adds the admission admin API to the admin mux: every kind's
// views and the dead letters they share.
func (s *Service) RegisterAdmin(mux *http.ServeMux) {
	for _, k := range s.kinds {
		if v, ok := k.(ViewedKind); ok {
			v.RegisterAdmin(mux)
		}
	}
	mux.HandleFunc("GET /api/dead-letters", s.adminDeadLetters)
	mux.HandleFunc("POST /api/dead-letters/{id}/retry", s.adminRetry)
	mux.HandleFunc("DELETE /api/dead-letters/{id}", s.adminDismiss)
}

// Register adds every kind's public reads under the prefix.
func (s *Service) Register(mux *http.ServeMux) {
	for _, k := range s.kinds {
		if v, ok := k.(ViewedKind); ok {
			v.RegisterPublic(mux)
		}
	}
}

// ListOwners answers an admin list of a kind's owners sorted by id: every one,
// or a page of them with page and page_size (then only that page's owners are read with load).
func ListOwners[T any](s *Service, w http.ResponseWriter, r *http.Request, k Kind, load func(ctx context.Context, id string) (T, bool, error)) {
	page, size, e := web.Paging(r, 0)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	ids, err := s.client.SMembers(r.Context(), k.OwnersKey()).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	slices.Sort(ids)
	lo, hi, size := web.Window(int64(len(ids)), page, size)
	items := []T{}
	for _, id := range ids[lo:hi] {
		item, found, err := load(r.Context(), id)
		if err != nil {
			s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
			return
		}
		if found {
			items = append(items, item)
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": len(ids), "page": page, "page_size": size})
}

// HeaderSource tells, with the ledger on, where an admin history answer was read: "ledger", or
// "store" when the ledger could not be read (or did not have the record yet).
const HeaderSource = "Edgeq-Source"

func writeLedgerPage[T any](w http.ResponseWriter, items []T, total, page, size int64) {
	w.Header().Set(HeaderSource, "ledger")
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

// FromLedger answers a page of history from the ledger (read), each row as of makes it; false when
// the ledger could not be read (logged), and the store answers instead.
func FromLedger[R, T any](s *Service, w http.ResponseWriter, r *http.Request, page, size int64, of func(R) T, read func() ([]R, int64, error)) bool {
	rows, total, err := read()
	if err != nil {
		s.LedgerReadFailed(r, err)
		return false
	}
	items := make([]T, len(rows))
	for i, row := range rows {
		items[i] = of(row)
	}
	writeLedgerPage(w, items, total, page, size)
	return true
}

// LedgerReadFailed notes a history read that falls back to the store: the store keeps the last
// records_retention of records.
func (s *Service) LedgerReadFailed(r *http.Request, err error) {
	web.RequestFrom(r.Context()).Logger().Warn("ledger: reading the history failed; answering from the store", "error", err.Error())
}

// PathID is the path's {id} of an owner; a malformed one is answered 400.
func (s *Service) PathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !config.ID.MatchString(id) {
		s.responder.Error(w, r, web.ErrInvalidRequest.With("field", "id"))
		return "", false
	}
	return id, true
}

// Paging reads page (from 1) and page_size (1..100, default 20).
func Paging(r *http.Request) (page, size int64, e *web.Error) {
	return web.Paging(r, 20)
}

var pseudonymSyntax = regexp.MustCompile(`^[0-9a-f]{32}$`)

// userParam is the pseudonym of the path's {user}: the user id as the route sees it (the cookie or
// header value, or the queue request id), or, with ?pseudonym=1, the pseudonym the records show.
func (s *Service) userParam(r *http.Request) (string, *web.Error) {
	user := r.PathValue("user")
	if r.URL.Query().Get("pseudonym") != "1" {
		return s.pseudonyms.identity(user, "path")
	}
	if !pseudonymSyntax.MatchString(user) {
		return "", web.ErrInvalidRequest.With("field", "user")
	}
	return user, nil
}

// WriteFound answers v (200), or 404 notFound when it was not found, or 503 when the store could not
// be read.
func (s *Service) WriteFound(w http.ResponseWriter, r *http.Request, v any, found bool, err error, notFound *web.Error) {
	switch {
	case err != nil:
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
	case !found:
		s.responder.Error(w, r, notFound)
	default:
		web.WriteJSON(w, http.StatusOK, v)
	}
}

// PathUser is the pseudonym of the path's {user} (userParam), a malformed one answered 400.
func (s *Service) PathUser(w http.ResponseWriter, r *http.Request) (string, bool) {
	user, e := s.userParam(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return "", false
	}
	return user, true
}
