package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/idmatch"
	"github.com/edgeq/edgeq/internal/web"
)

// Other spellings of guarded ids (admission.id_match; docs/reference.md
// "Other spellings of a guarded id"). A shop reads the id a request names with its own comparison: a
// case-insensitive collation finds sneaker-a for "SNEAKER-A", intval and to_i find 42 for "042" and
// "42abc". When the store does not know a request's id as spelled, an unknown-owner pass must not
// forward it if a common reading makes it a guarded id: each kind's ids are indexed under their keys
// (idmatch.GuardedKeys) in one hash beside the kind's index, written with the index in one script
// (index.lua), and an unknown id is looked up there before it passes, before a kind asks its source
// (Discoverer), and before it is refused as unknown. A known id costs nothing more: the lookup runs
// only after the store answered "unknown".

// IndexOwner adds an owner id to its kind's index and spellings.
func (s *Service) IndexOwner(ctx context.Context, k Kind, id string) error {
	keys, args := indexArgs(k, "add", id)
	return indexScript.Run(ctx, s.client, keys, args...).Err()
}

// UnindexOwner removes a deleted owner from its kind's index and spellings.
func (s *Service) UnindexOwner(ctx context.Context, k Kind, id string) error {
	keys, args := indexArgs(k, "remove", id)
	return indexScript.Run(ctx, s.client, keys, args...).Err()
}

// indexArgs are index.lua's KEYS and ARGV.
func indexArgs(k Kind, mode, id string) ([]string, []any) {
	spellings := idmatch.GuardedKeys(id)
	args := make([]any, 0, 2+len(spellings))
	args = append(args, mode, id)
	for _, key := range spellings {
		args = append(args, key)
	}
	return []string{k.OwnersKey(), k.SpellingsKey()}, args
}

// errNothingTaken marks a store failure before any script of the request ran: there is nothing to
// give back.
var errNothingTaken = errors.New("nothing was reserved")

// unknownOwner handles a request whose owner the store does not know as spelled (c.owner). A guarded
// id that a common reading makes of it decides (idmatch): the request is reserved as that id when the
// route's rule makes the two one id, refused 400 otherwise. With none, a Discoverer kind asks its
// source (discover) and, when the shop knows the owner, reserves; else the answer stays unknown (the
// route refuses it or, with an unknown-owner pass, forwards it). The claim returned is what was
// reserved; an error wrapping errNothingTaken means no script ran.
func (s *Service) unknownOwner(ctx context.Context, k Kind, rule idmatch.Rule, c Claim) (Claim, *web.Error, error) {
	near, err := s.nearOwners(ctx, k, rule, c.Owner)
	if err != nil {
		return c, nil, fmt.Errorf("looking up other spellings of %s %s: %w (%w)", k.Owner(), c.Owner, err, errNothingTaken)
	}
	if len(near) > 0 {
		as, ok := rule.Resolve(c.Owner, near)
		if !ok {
			return c, web.ErrAmbiguousID.With("field", k.Owner()).Because(fmt.Errorf("%s %q may be read by the shop as guarded %s (id_match %s)",
				k.Owner(), c.Owner, strings.Join(near, ", "), rule)), nil
		}
		c.Owner = as
		e, err := s.reserveTraced(ctx, k, c)
		return c, e, err
	}
	d, ok := k.(Discoverer)
	if !ok {
		return c, k.NotFound(), nil
	}
	found, e, err := d.Discover(ctx, c.Owner)
	if err != nil || e != nil {
		return c, e, err
	}
	if !found {
		return c, k.NotFound(), nil
	}
	e, err = s.reserveTraced(ctx, k, c)
	return c, e, err
}

// nearOwners returns the guarded ids of k, other than id itself, that a common reading or the rule
// makes id: one HMGET of the spellings index.
func (s *Service) nearOwners(ctx context.Context, k Kind, rule idmatch.Rule, id string) ([]string, error) {
	values, err := s.client.HMGet(ctx, k.SpellingsKey(), rule.Keys(id)...).Result()
	if err != nil {
		return nil, err
	}
	var near []string
	for _, v := range values {
		list, _ := v.(string)
		for _, other := range strings.Fields(list) {
			if other != id && !slices.Contains(near, other) {
				near = append(near, other)
			}
		}
	}
	return near, nil
}

// indexSpellings indexes the spellings of every owner in the kinds' indexes: those an
// earlier build created (without spellings) are guarded in every spelling from then on. index.lua is
// idempotent; the calls go in pipelines of a thousand.
func (s *Service) indexSpellings(ctx context.Context) error {
	for _, k := range s.kinds {
		ids, err := s.client.SMembers(ctx, k.OwnersKey()).Result()
		if err != nil {
			return err
		}
		// EVALSHA in a pipeline does not fall back to EVAL: the script is loaded first.
		if len(ids) > 0 {
			if err := indexScript.Load(ctx, s.client).Err(); err != nil {
				return err
			}
		}
		for len(ids) > 0 {
			batch := ids[:min(len(ids), 1000)]
			ids = ids[len(batch):]
			pipe := s.client.Pipeline()
			for _, id := range batch {
				keys, args := indexArgs(k, "add", id)
				indexScript.EvalSha(ctx, pipe, keys, args...)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// runSpellingsIndex runs indexSpellings once, at start (Run), retried every second until the store
// answers (the first failure is logged).
func (s *Service) runSpellingsIndex(ctx context.Context) {
	for failures := 0; ; failures++ {
		err := s.indexSpellings(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		if failures == 0 {
			s.logger.Warn("indexing the spellings of the admission owners failed; retried every second", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
