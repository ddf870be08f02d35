package waitroom

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// scriptSet holds the queue scripts (internal/store/luascript: the clock, lib.lua, the operation).
type scriptSet struct {
	upsert, remove, assign, advance, token, finish, heartbeat, lookup, increment, renew, invite, invites *redis.Script
}

// scripts are the waiting room's script files.
var scripts = luascript.From(scriptFiles, "scripts")

func loadScripts() scriptSet {
	load := scripts.Script
	return scriptSet{
		upsert: load("upsert.lua"), remove: load("delete.lua"), assign: load("assign.lua"),
		advance: load("advance.lua"), token: load("token.lua"), finish: load("finish.lua"),
		heartbeat: load("heartbeat.lua"), lookup: load("lookup.lua"), increment: load("increment.lua"),
		renew: load("renew.lua"), invite: load("invite.lua"), invites: load("invites.lua"),
	}
}

// Position states, as stored by the scripts (lib.lua ST_ constants).
type State int

const (
	StateWaiting   State = 0
	StateServed    State = 1 // reached, no token yet
	StateToken     State = 2 // token issued and live
	StateCompleted State = 3
	StateAbandoned State = 4
	StateExpired   State = 5 // position or token expired
	StateSkipped   State = 6 // abandoned while waiting, skipped when reached
)

// Status is the queue_status name of a state (the status body's; docs/reference.md "Waiting room").
func (s State) Status() string {
	switch s {
	case StateWaiting:
		return "waiting"
	case StateServed, StateToken:
		return "served"
	case StateCompleted:
		return "completed"
	case StateAbandoned, StateSkipped:
		return "abandoned"
	case StateExpired:
		return "expired"
	}
	return "unknown"
}

// Final reports whether the visitor's turn is over.
func (s State) Final() bool { return s >= StateCompleted }

// reply reads script replies field by field, checking types instead of asserting them; the first
// mismatch is kept in err.
type reply struct {
	items []any
	err   error
}

var errReply = errors.New("waitroom: unexpected script reply")

func newReply(v any, err error) *reply {
	if err != nil {
		return &reply{err: err}
	}
	items, ok := v.([]any)
	if !ok {
		return &reply{err: fmt.Errorf("%w: %T", errReply, v)}
	}
	return &reply{items: items}
}

func (r *reply) at(i int) any {
	if r.err != nil {
		return nil
	}
	if i >= len(r.items) {
		r.err = fmt.Errorf("%w: no item %d in %v", errReply, i, r.items)
		return nil
	}
	return r.items[i]
}

func (r *reply) int(i int) int64 {
	switch v := r.at(i).(type) {
	case int64:
		return v
	case string:
		if v == "" {
			return 0 // a field the hash does not have
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("%w: item %d %q", errReply, i, v)
		}
		return n
	case nil:
		return 0
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: item %d is %T", errReply, i, v)
		}
		return 0
	}
}

func (r *reply) str(i int) string {
	switch v := r.at(i).(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case nil:
		return ""
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: item %d is %T", errReply, i, v)
		}
		return ""
	}
}

func (r *reply) list(i int) *reply {
	v := r.at(i)
	if r.err != nil {
		return &reply{err: r.err}
	}
	items, ok := v.([]any)
	if !ok {
		r.err = fmt.Errorf("%w: item %d is %T, want a list", errReply, i, v)
		return &reply{err: r.err}
	}
	return &reply{items: items}
}

func (r *reply) len() int { return len(r.items) }

// run executes a queue script with the queue's keys.
func (s scriptSet) run(ctx context.Context, client redis.Scripter, script *redis.Script, keys []string, args ...any) *reply {
	return newReply(script.Run(ctx, client, keys, args...).Result())
}
