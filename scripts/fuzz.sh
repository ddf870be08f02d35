#!/usr/bin/env bash
# Fuzz one target for a while: scripts/fuzz.sh PKG NAME FUZZTIME [GO]
#
# A real finding fails: Go writes the input under PKG/testdata/fuzz/NAME/ and prints
# "Failing input written to ...". Go 1.26's fuzz coordinator can also fail a clean run right at the
# end of -fuzztime with a bare "context deadline exceeded" (golang/go#75804, fixed in Go 1.27) when
# a busy machine leaves a worker mid-call at the deadline. A run that ends exactly that way - no
# input written, nothing but that line under the FAIL, and the FAIL within 2 s of FUZZTIME (a hang
# in the target runs longer) - is reported and fuzzed once more; the second run decides.
set -u
pkg=$1 name=$2 fuzztime=$3 go=${4:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() {
	"$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"
	return "${PIPESTATUS[0]}"
}

# seconds prints a -fuzztime duration in seconds ("10s", "2m"); it fails for counts ("1000x"), which
# have no deadline to race.
seconds() {
	case "$1" in
	*[0-9]s) echo "${1%s}" ;;
	*[0-9]m) echo "$((${1%m} * 60))" ;;
	*) return 1 ;;
	esac
}

coordinator_race() {
	grep -q 'Failing input written' "$log" && return 1
	[ "$(sed -n "/^--- FAIL: ${name} /,/^FAIL\$/p" "$log" | sed '1d;$d' | tr -d ' \t')" = "contextdeadlineexceeded" ] || return 1
	local limit took
	limit=$(seconds "$fuzztime") || return 1
	took=$(sed -n "s/^--- FAIL: ${name} (\([0-9.]*\)s)\$/\1/p" "$log")
	awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t != "" && t + 0 >= l + 0 && t + 0 < l + 2) }'
}

run
status=$?
[ "$status" -eq 0 ] && exit 0
if coordinator_race; then
	echo "fuzz: $name: Go's fuzz coordinator stopped at the deadline with a bare 'context deadline exceeded'"
	echo "fuzz: and wrote no failing input (golang/go#75804); fuzzing $name once more"
	run
	exit $?
fi
exit "$status"
