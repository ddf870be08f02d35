#!/usr/bin/env bash
# List every fuzz target of the module as PKG:NAME (./proxy:FuzzCheckHost), one per line, sorted:
# every `func FuzzX(f *testing.F)` in a _test.go file below the current directory. `make fuzz` fuzzes
# them all, so a new Fuzz function is fuzzed without anyone adding it to a list.
set -eu
grep -rE --include='*_test.go' --exclude-dir=node_modules --exclude-dir=testdata -o '^func Fuzz[A-Za-z0-9_]+\(' . |
	sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+)\($|./\1:\2|; s|^\./[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+)\($|.:\1|' |
	sort -u
