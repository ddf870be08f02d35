package inflight

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is an in-flight script: lib.lua followed by the operation's file. It runs with EVALSHA
// (go-redis falls back to EVAL when Redis does not have it yet).
func script(name string) *redis.Script {
	return redis.NewScript(mustRead("lib.lua") + "\n" + mustRead(name))
}

func mustRead(name string) string {
	b, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(err) // embedded at build time: only a build without the files gets here
	}
	return string(b)
}

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
