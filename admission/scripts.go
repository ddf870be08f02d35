package admission

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// scripts are the admission scripts (internal/store/luascript: the clock, lib.lua, the operation).
var scripts = luascript.From(scriptFiles, "scripts")

// script is an admission operation's script.
func script(name string) *redis.Script { return scripts.Script(name) }

// The pipeline's scripts; each kind's are in its own files.
var (
	applyScript  = scripts.Alone("apply.lua") // the event worker's (apply.go)
	deleteScript = script("delete.lua")       // an admin record's deletion (records.go)

	oldDeleteScript = script("olddelete.lua")    // an earlier build's admin record's deletion (oldrecords.go)
	drainScript     = scripts.Alone("drain.lua") // earlier builds' admin records past the retention (oldrecords.go)
	commitsScript   = script("commits.lua")      // batched commits (committer.go)
	trimScript      = scripts.Alone("trim.lua")  // the event streams' trim (trim.go)
	leaseScript     = script("lease.lua")        // a replica's liveness lease (lease.go)
	indexScript     = scripts.Alone("index.lua") // the ids' index and spellings (spellings.go)
)
