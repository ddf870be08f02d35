package waitroom

import (
	"context"
	"embed"

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

// run executes a queue script with the queue's keys.
func (s scriptSet) run(ctx context.Context, client redis.Scripter, script *redis.Script, keys []string, args ...any) *luascript.Reply {
	return luascript.NewReply(script.Run(ctx, client, keys, args...).Result())
}
