package admission

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/web"
)

// A kind's "mine" listing (MinedKind: a user's own admissions, GET {prefix}/<owners>/mine) identifies
// its user like the kind's first route identifies the user of an admission (docs/reference.md).

// MineIdentity is how a kind's "mine" listing identifies its user: like its first route's admission
// user.
type MineIdentity struct {
	route string
	user  config.UserSource
	queue string // the route's queue: whose token identifies the user when user is "token"
}

// Use puts the configuration in force for every kind, at start and on every reload: the identities
// of their "mine" listings (the first route of each kind; without one, its listing answers 404) and
// each kind's own part (ConfiguredKind).
// An error leaves the identities as they were; each kind's part is put in force all the same.
func (s *Service) Use(cfg *config.Config) error {
	errs := []error{s.UseIdentities(cfg.Routes)}
	for _, k := range s.kinds {
		if c, ok := k.(ConfiguredKind); ok {
			errs = append(errs, c.Use(cfg))
		}
	}
	return errors.Join(errs...)
}

// UseIdentities takes the identities of the kinds' "mine" listings from routes: each kind's first
// route.
func (s *Service) UseIdentities(routes []config.Route) error {
	for _, k := range s.kinds {
		m, ok := k.(MinedKind)
		if !ok {
			continue
		}
		src, err := firstIdentity(routes, k.Name())
		if err != nil {
			return err
		}
		m.MineIdentity().Store(src)
	}
	return nil
}

func firstIdentity(routes []config.Route, typ string) (*MineIdentity, error) {
	for _, r := range routes {
		if r.Admission.Type != typ {
			continue
		}
		user, err := config.ParseUserSource(r.Admission.User)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
		if !user.FromToken && (user.Field.Kind == "form" || user.Field.Kind == "json") {
			// A GET has no body: the visitor names itself in the query, under the field's name.
			user.Field = config.FieldSource{Kind: "query", Name: user.Field.Name}
		}
		return &MineIdentity{route: r.Name, user: user, queue: r.Queue}, nil
	}
	return nil, nil
}

// mineUser is the pseudonym of the user of a "mine" listing, identified as the route does.
func (s *Service) mineUser(r *http.Request, src *MineIdentity) (string, *web.Error) {
	if !src.user.FromToken {
		return s.userOf(r, fields.New(r, s.o.MaxBodyBytes), src.user)
	}
	if s.o.Visitor != nil {
		if id, ok := s.o.Visitor(r, src.queue); ok {
			return s.pseudonyms.of(id), nil
		}
	}
	return "", errUserMissing.Because(fmt.Errorf("no valid queue token for %s", src.queue))
}

// Whose identifies the user of a "mine" listing (its pseudonym) and reads its paging; it answers and returns false when it cannot: 404 without a route to identify
// users by (src nil), then what check refuses, a bad page, or a user it cannot identify.
func (s *Service) Whose(w http.ResponseWriter, r *http.Request, src *MineIdentity, check func() *web.Error) (user string, page, size int64, ok bool) {
	var e *web.Error
	switch {
	case src == nil:
		e = web.ErrNotFound
	case check != nil:
		e = check()
	}
	if e == nil {
		page, size, e = Paging(r)
	}
	if e == nil {
		user, e = s.mineUser(r, src)
	}
	if e != nil {
		s.responder.Error(w, r, e)
		return "", 0, 0, false
	}
	return user, page, size, true
}
