// Package luascript builds a package's Redis scripts from its embedded Lua files, the one way: every
// operation's script is this package's clock.lua (now_ms, the one clock of every replica: Redis TIME),
// then the package's lib.lua (its keys, constants and helpers), then the operation's own file. The
// scripts run with EVALSHA (go-redis falls back to EVAL when Redis does not have them yet).
package luascript

import (
	_ "embed"
	"io/fs"
	"sync"

	"github.com/redis/go-redis/v9"
)

//go:embed clock.lua
var clock string

// Files are a package's embedded scripts directory, holding its lib.lua and one file per operation.
type Files struct {
	fsys fs.FS
	dir  string
}

// From reads the scripts in dir of fsys (a package's //go:embed scripts/*.lua).
func From(fsys fs.FS, dir string) Files { return Files{fsys: fsys, dir: dir} }

// Script is the operation in file name, after the clock and the package's lib.lua.
func (f Files) Script(name string) *redis.Script {
	return Named(name, redis.NewScript(f.Lib()+"\n"+f.Read(name)))
}

// Alone is the operation in file name by itself (a script that needs neither the clock nor lib.lua).
func (f Files) Alone(name string) *redis.Script { return Named(name, redis.NewScript(f.Read(name))) }

// names maps the SHA1 of every script built here (or named with Named) to its file's name, so that
// traces of store calls name a script (EVALSHA reserve.lua) rather than its hash. Written as packages
// build their scripts (at start), read after.
var names sync.Map

// Named gives s, a script built elsewhere, its name for traces, and returns it.
func Named(name string, s *redis.Script) *redis.Script {
	names.Store(s.Hash(), name)
	return s
}

// Name is the file name of the script with SHA1 hash sha, "" for a script not built here.
func Name(sha string) string {
	if name, ok := names.Load(sha); ok {
		return name.(string)
	}
	return ""
}

// Lib is the prelude of every Script: the clock, then the package's lib.lua.
func (f Files) Lib() string { return clock + "\n" + f.Read("lib.lua") }

// Read returns one embedded file; it panics when the file is missing, which only a build without the
// files can cause.
func (f Files) Read(name string) string {
	b, err := fs.ReadFile(f.fsys, f.dir+"/"+name)
	if err != nil {
		panic(err)
	}
	return string(b)
}
