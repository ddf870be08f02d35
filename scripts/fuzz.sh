#!/usr/bin/env bash
# Fuzz one target for a while: scripts/fuzz.sh PKG NAME FUZZTIME [GO]
#
# A real finding fails: Go writes the input under PKG/testdata/fuzz/NAME/ and prints
# "Failing input written to ...". Go 1.26's fuzz coordinator can also fail a clean run at the end of
# -fuzztime with a bare "context deadline exceeded" (golang/go#75804, fixed in Go 1.27) when a busy
# machine leaves a worker mid-call at the deadline. That run found nothing: it is reported, the
# target's corpus is replayed deterministically, and the replay decides.
set -u
pkg=$1 name=$2 fuzztime=$3 go=${4:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && exit 0

# Exactly the coordinator's race: a FAIL line for the target followed by nothing but the bare
# deadline message, and no input written.
if ! grep -q 'Failing input written' "$log" &&
	[ "$(sed -n "/^--- FAIL: ${name} /,/^FAIL\$/p" "$log" | sed '1d;$d' | tr -d ' \t')" = "contextdeadlineexceeded" ]; then
	echo "fuzz: $name: Go's fuzz coordinator stopped with a bare 'context deadline exceeded' and wrote no"
	echo "fuzz: failing input (golang/go#75804); replaying the corpus of $name to confirm"
	exec "$go" test -count=1 -run "^${name}\$" "$pkg"
fi
exit "$status"
