#!/usr/bin/env bash
# The container image without a registry: the Dockerfile's final stage, assembled on this machine.
#
#   scripts/image.sh build [ARCHIVE]      build the image, save it to ARCHIVE (bin/edgeq-image.tar)
#   scripts/image.sh check [ARCHIVE]      load ARCHIVE into a scratch store and run it: its settings and
#                                         files against the Dockerfile, `edgeq version`, `edgeq check`,
#                                         and a request through it to the demo shop
#   scripts/image.sh containerfile        print the Containerfile that build uses, and nothing else
#
# The Dockerfile's final stage starts FROM scratch, so it needs no base image; only its build stage
# (golang:1.26-bookworm) does. This script stands in for that stage: it builds the binary here with the
# same command (CGO_ENABLED=0, -trimpath, the same -ldflags) and takes the CA bundle and the time zones
# from this Debian machine (packages ca-certificates and tzdata, as in the golang image). Then it copies
# the final stage's instructions as they are into a Containerfile, each `COPY --from=build PATH` pointed
# at the file it made, and builds that with podman, offline. The user, files, environment, ports,
# entrypoint and command are therefore the Dockerfile's own; scripts/image_test.go fails when the
# final stage uses something this script does not handle, and checks the image `check` loads.
#
# podman keeps everything in a temporary store (driver vfs) removed on exit; only ARCHIVE stays, a
# docker-archive that `docker load -i` and `podman load -i` read, tagged localhost/edgeq:VERSION and
# localhost/edgeq:latest. Environment: GO (go), VERSION (dev, as in the Dockerfile; make image passes
# make's), PODMAN (podman), DOCKERFILE (Dockerfile; the tests give others),
# PODMAN_RUNTIME (runc when installed: Debian 12's crun cannot run containers where cgroup v1 and v2
# are mounted side by side).
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
VERSION=${VERSION:-dev}
PODMAN=${PODMAN:-podman}
DOCKERFILE=${DOCKERFILE:-Dockerfile}
NAME=localhost/edgeq

die() {
	echo "image: $*" >&2
	exit 1
}

# The final stage's sources in the build stage, and where this script finds each one here.
build_source() {
	case "$1" in
	/out/edgeq) echo "binary" ;;
	/etc/ssl/certs/ca-certificates.crt) echo "host:ca-certificates" ;;
	/usr/share/zoneinfo) echo "host:tzdata" ;;
	*) return 1 ;;
	esac
}

# final_stage prints the Dockerfile's last stage, from its FROM line on, without comments or blank
# lines, one instruction a line.
final_stage() {
	awk '
		/^[ \t]*(#|$)/ { next }
		toupper($1) == "FROM" { n = 0 }
		{ lines[n++] = $0 }
		END { for (i = 0; i < n; i++) print lines[i] }
	' "$DOCKERFILE"
}

# containerfile writes the Containerfile for the final stage to stdout; with a context directory as $1
# it also puts every file the stage copies into that directory.
containerfile() {
	local ctx=${1:-} line word
	local -a words opts srcs
	while IFS= read -r line; do
		[[ $line == *\\ ]] && die "Dockerfile: the final stage's instructions must fit on one line each: $line"
		read -r -a words <<<"$line"
		case "${words[0]^^}" in
		FROM)
			[ "${words[1]}" = scratch ] || die "Dockerfile: the final stage must start FROM scratch (found: $line)"
			echo "$line"
			;;
		COPY)
			[[ ${words[1]} == \[* ]] && die "Dockerfile: use COPY's plain form in the final stage: $line"
			opts=() srcs=()
			local from=""
			for word in "${words[@]:1}"; do
				case "$word" in
				--from=build) from=build ;;
				--from=*) die "Dockerfile: the final stage copies only from the build stage: $line" ;;
				--*) opts+=("$word") ;;
				*) srcs+=("$word") ;;
				esac
			done
			[ ${#srcs[@]} -ge 2 ] || die "Dockerfile: COPY needs a source and a destination: $line"
			local dest=${srcs[-1]}
			unset 'srcs[-1]'
			local -a staged=()
			for word in "${srcs[@]}"; do
				if [ "$from" = build ]; then
					build_source "$word" >/dev/null ||
						die "Dockerfile: scripts/image.sh does not know how to make the build stage's $word; teach build_source"
					staged+=("build$word")
					[ -z "$ctx" ] || stage_build "$word" "$ctx/build$word"
				else
					[ -e "$word" ] || die "Dockerfile: COPY source $word is not in the repository"
					staged+=("$word")
					[ -z "$ctx" ] || { mkdir -p "$ctx/$(dirname "$word")" && cp -a "$word" "$ctx/$word"; }
				fi
			done
			echo "COPY ${opts[*]}${opts[*]:+ }${staged[*]} $dest"
			;;
		ENV | EXPOSE | USER | ENTRYPOINT | CMD | LABEL | WORKDIR | STOPSIGNAL)
			echo "$line"
			;;
		*)
			die "Dockerfile: the final stage's ${words[0]} has no counterpart in scripts/image.sh: $line"
			;;
		esac
	done < <(final_stage)
}

# stage_build makes one of the build stage's files at $2.
stage_build() {
	local src=$1 to=$2
	mkdir -p "$(dirname "$to")"
	case "$(build_source "$src")" in
	binary)
		echo "image: go build ./cmd/edgeq (version $VERSION)" >&2
		# The Dockerfile's build stage runs this same command.
		CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o "$to" ./cmd/edgeq
		chmod 0755 "$to"
		;;
	host:*)
		local pkg
		pkg=$(build_source "$src")
		[ -e "$src" ] || die "$src is missing here (apt-get install ${pkg#host:})"
		cp -a "$src" "$to"
		;;
	esac
}

# podman runs podman on a store of its own under $1.
podman_in() {
	local dir=$1
	shift
	local -a global=(--root "$dir/storage" --runroot "$dir/run" --tmpdir "$dir/libpod"
		--storage-driver vfs --cgroup-manager cgroupfs --events-backend file)
	local runtime=${PODMAN_RUNTIME:-}
	if [ -z "$runtime" ] && command -v runc >/dev/null 2>&1; then
		runtime=runc
	fi
	[ -z "$runtime" ] || global+=(--runtime "$runtime")
	"$PODMAN" "${global[@]}" "$@"
}

need_podman() {
	command -v "$PODMAN" >/dev/null 2>&1 ||
		die "podman is not installed (apt-get install podman runc; .ci/run installs them)"
}

# scratch_store makes a temporary podman store, removed (with everything in it) when the script exits.
scratch_store() {
	store=$(mktemp -d "${TMPDIR:-/tmp}/edgeq-image.XXXXXX")
	trap 'cleanup' EXIT
}

cleanup() {
	local status=$?
	if [ -n "${store:-}" ]; then
		podman_in "$store" rm --all --force --time 0 >/dev/null 2>&1 || true
		podman_in "$store" rmi --all --force >/dev/null 2>&1 || true
		# vfs leaves no mounts behind, but a container's /dev/shm may still be mounted after a failure.
		grep -o " $store/[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r umount -l 2>/dev/null || true
		rm -rf "$store"
	fi
	[ -z "${shop_pid:-}" ] || kill "$shop_pid" 2>/dev/null || true
	exit "$status"
}

mb() {
	awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1000000 }'
}

build() {
	local archive=${1:-bin/edgeq-image.tar}
	need_podman
	scratch_store
	local ctx=$store/context
	mkdir -p "$ctx"
	containerfile "$ctx" >"$ctx/Containerfile"
	podman_in "$store" build --quiet --layers=false --format docker --identity-label=false --file "$ctx/Containerfile" \
		--tag "$NAME:$VERSION" --tag "$NAME:latest" "$ctx" >/dev/null
	mkdir -p "$(dirname "$archive")"
	rm -f "$archive"
	podman_in "$store" save --quiet --format docker-archive --output "$archive" "$NAME:$VERSION" "$NAME:latest"
	local size gz
	size=$(podman_in "$store" image inspect --format '{{.Size}}' "$NAME:$VERSION")
	gz=$(gzip -c "$archive" | wc -c)
	echo "image: $archive ($NAME:$VERSION, $NAME:latest): $(mb "$size") uncompressed, $(mb "$gz") compressed (gzip)"
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on (checked, not reserved) and that is
# none of its arguments: below the kernel's ephemeral range, where the local end of any outgoing
# connection could take it before edgeq binds it.
free_port() {
	local low=32768 port
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
	[ "$low" -gt 11024 ] || low=32768
	for _ in $(seq 50); do
		port=$((10000 + RANDOM % (low - 10000)))
		case " $* " in *" $port "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	die "no free port found"
}

check() {
	local archive=${1:-bin/edgeq-image.tar}
	[ -f "$archive" ] || die "$archive does not exist (make image builds it)"
	need_podman
	command -v curl >/dev/null 2>&1 || die "curl is not installed (apt-get install curl)"
	local started=$SECONDS
	scratch_store
	podman_in "$store" load --quiet --input "$archive" >/dev/null
	# The version the archive was built with: its tag beside latest.
	local version
	version=$(podman_in "$store" images --format '{{.Tag}}' "$NAME" | grep -vx latest | head -n 1)
	[ -n "$version" ] || die "$archive holds no $NAME:VERSION image"
	local image=$NAME:$version
	# Podman's defaults for a root container (1048576 open files and processes) are above what
	# some machines allow, and the container would not start; these are plenty for edgeq's checks.
	local -a run=(run --rm --network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

	# The image's settings and files against the Dockerfile (scripts/image_test.go).
	podman_in "$store" image inspect "$image" >"$store/inspect.json"
	local rootfs=$store/rootfs container
	mkdir -p "$rootfs"
	container=$(podman_in "$store" create "$image")
	podman_in "$store" export "$container" | tar -x -C "$rootfs"
	podman_in "$store" rm "$container" >/dev/null
	EDGEQ_IMAGE_INSPECT=$store/inspect.json EDGEQ_IMAGE_ROOTFS=$rootfs \
		"$GO" test -count=1 -tags imagecheck -run '^TestImageMatchesDockerfile$' ./scripts/ >"$store/test.log" 2>&1 ||
		{ cat "$store/test.log"; die "the image does not match the Dockerfile"; }
	! grep -q 'no tests to run' "$store/test.log" || die "TestImageMatchesDockerfile did not run (the imagecheck build tag)"
	echo "image: settings and files match the Dockerfile's final stage"

	# edgeq version, and the example configuration checked by the image's own binary.
	local out
	out=$(podman_in "$store" "${run[@]}" "$image" version 2>&1) || { echo "$out"; die "edgeq version failed in the image (podman run; where crun cannot start it, apt-get install runc)"; }
	local -a lines
	mapfile -t lines <<<"$out"
	printf 'image: | %s\n' "${lines[@]}"
	[[ $out == *"$version"* ]] || die "edgeq version does not print $version"
	out=$(podman_in "$store" "${run[@]}" "$image" check -config /etc/edgeq/config.yaml 2>&1) ||
		{ echo "$out"; die "edgeq check -config /etc/edgeq/config.yaml failed in the image"; }
	echo "image: | $out"

	# The image's own command (serve the baked-in example configuration) in front of the demo shop
	# on this machine, on host networking; ports moved off the defaults by environment variables.
	local shop_port edgeq_port admin_port
	shop_port=$(free_port)
	edgeq_port=$(free_port "$shop_port")
	admin_port=$(free_port "$shop_port" "$edgeq_port")
	CGO_ENABLED=0 "$GO" build -o "$store/demoshop" ./cmd/demoshop
	"$store/demoshop" -listen "127.0.0.1:$shop_port" 2>"$store/shop.log" &
	shop_pid=$!
	container=$(podman_in "$store" "${run[@]/--rm/--detach}" \
		-e "EDGEQ_SERVER_LISTEN=127.0.0.1:$edgeq_port" -e "EDGEQ_ADMIN_LISTEN=127.0.0.1:$admin_port" \
		-e "EDGEQ_ORIGIN_URL=http://127.0.0.1:$shop_port" "$image")
	local ready=""
	for _ in $(seq 100); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/readyz" 2>/dev/null; then
			ready=1
			break
		fi
		sleep 0.2
	done
	[ -n "$ready" ] || { podman_in "$store" logs "$container" || true; die "edgeq in the image never became ready"; }

	local pid ids
	pid=$(podman_in "$store" inspect --format '{{.State.Pid}}' "$container")
	ids=$(awk '/^(Uid|Gid):/ { printf "%s %s %s %s %s ", $1, $2, $3, $4, $5 }' "/proc/$pid/status")
	[ "$ids" = "Uid: 65532 65532 65532 65532 Gid: 65532 65532 65532 65532 " ] ||
		die "edgeq in the image does not run as 65532:65532 ($ids)"
	echo "image: edgeq serves as uid 65532, gid 65532"

	local headers body
	headers=$store/headers body=$store/body
	curl -fsS -D "$headers" -o "$body" "http://127.0.0.1:$edgeq_port/products/1" ||
		{ podman_in "$store" logs "$container" || true; die "GET /products/1 through the image failed"; }
	grep -qi '^Edgeq-Token: ' "$headers" || die "GET /products/1: no Edgeq-Token (the drop queue did not admit it)"
	grep -q '<title>.*Demo Shop</title>' "$body" || die "GET /products/1: not the demo shop's page"
	echo "image: GET /products/1 through the image: 200, admitted by the drop queue, the demo shop's page"

	podman_in "$store" stop --time 30 "$container" >/dev/null
	local status
	status=$(podman_in "$store" inspect --format '{{.State.ExitCode}}' "$container")
	[ "$status" = 0 ] || { podman_in "$store" logs "$container" || true; die "edgeq exited $status on SIGTERM"; }
	echo "image: stopped cleanly (exit 0); checked in $((SECONDS - started)) s"
}

case "${1:-}" in
build) build "${2:-}" ;;
check) check "${2:-}" ;;
containerfile) containerfile ;;
*)
	echo "usage: scripts/image.sh build|check [ARCHIVE] | containerfile" >&2
	exit 2
	;;
esac
