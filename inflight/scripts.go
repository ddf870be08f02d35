package inflight

import (
	"embed"

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
