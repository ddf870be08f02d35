package inflight

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is an in-flight operation's script (internal/store/luascript: the clock, lib.lua, the
// operation).
func script(name string) *redis.Script { return luascript.From(scriptFiles, "scripts").Script(name) }

var (
	acquireScript = script("acquire.lua")
	releaseScript = script("release.lua")
	renewScript   = script("renew.lua")
)

// acquire.lua's codes.
const (
	codeHeld       = 0
	codeWaiting    = 1
	codeFull       = 2
	codeClientFull = 3
)

var errReply = errors.New("inflight: unexpected script reply")

// ints runs a script and reads its reply as integers: one for a plain integer reply, each item of a
// list otherwise. It checks types instead of asserting them.
func ints(ctx context.Context, c redis.Scripter, s *redis.Script, keys []string, args ...any) ([]int64, error) {
	v, err := s.Run(ctx, c, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	out := make([]int64, len(items))
	for i, item := range items {
		n, ok := item.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: item %d is %T", errReply, i, item)
		}
		out[i] = n
	}
	return out, nil
}
