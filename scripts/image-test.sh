#!/usr/bin/env bash
# The container image, for real, with podman: make build and
# scripts/image.sh build it once; then it must print the build's version,
# refuse to listen beyond loopback without a password, and, run with one,
# serve INCR on a published loopback port as a non-root PID 1, pass its
# HEALTHCHECK, answer /readyz, keep its SQLite file in the /data volume,
# exit 0 on `podman stop` and continue at exactly the next ID (no repeat,
# no gap) both in the same container started again and in a new container
# on the volume. Everything it makes is removed at exit.
#
# Installs podman and runc (and redis-tools) from Debian's packages when
# run as root. Skips, saying why, where podman cannot be had or run; under
# CI=true that fails instead, unless podman cannot be installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

# installable: podman can come from apt-get here (root, a candidate).
installable() {
	[ "$(id -u)" = 0 ] && command -v apt-cache >/dev/null 2>&1 &&
		apt-cache policy podman 2>/dev/null | grep -q 'Candidate: [0-9]'
}
# unavailable REASON: skip, or under CI=true fail where podman is installable.
unavailable() {
	if [ "${CI:-}" = true ] && installable; then
		echo "FAIL image: $* (podman is installable here, so CI=true must run this test)" >&2
		exit 1
	fi
	echo "image test skipped: $*" >&2
	exit 0
}

need_pkgs redis-cli redis-tools
need_pkgs podman podman runc || unavailable "podman could not be installed"
# Debian's podman may pick crun, which this kind of kernel refuses; runc works.
need_pkgs runc runc || true
podman=(podman)
if command -v runc >/dev/null 2>&1; then podman+=(--runtime "$(command -v runc)"); fi

# Containers inherit podman's default rlimits (nofile 1048576), which an
# unprivileged sandbox's hard limits refuse: give the ones this shell has.
cap() { if [ "$1" = unlimited ] || [ "$1" -gt "$2" ]; then echo "$2"; else echo "$1"; fi; }
nofile=$(cap "$(ulimit -Hn)" 65536)
nproc=$(cap "$(ulimit -Hu)" 4096)
limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

id=$$
img=localhost/leaf-imagetest:$id
vol=leaf-imagetest-$id
ctr=leaf-imagetest-$id
pw=imagetest-$id
# podman's own complaints (without systemd it cannot arm healthcheck
# timers, and says so at every start) go here, shown on failure.
log=$(mktemp)
pm() { "${podman[@]}" "$@" 2>>"$log"; }
cleanup() {
	pm rm -f -t 0 "$ctr" >/dev/null || true
	pm volume rm -f "$vol" >/dev/null || true
	pm rmi -f "$img" >/dev/null || true
	if [ "${fail:-0}" != 0 ]; then
		echo "podman said:" >&2
		tail -20 "$log" >&2
	fi
	rm -f "$log"
}
trap cleanup EXIT

version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
revision=$(git rev-parse HEAD 2>/dev/null || true)
make -s build VERSION="$version" REVISION="$revision"
VERSION=$version REVISION=$revision CONTAINER_ENGINE=podman scripts/image.sh "$img" >>"$log" 2>&1 ||
	unavailable "podman could not build the image"

fail=0
ok() { echo "ok   image: $1"; }
bad() {
	echo "FAIL image: $1" >&2
	fail=1
}
# expect NAME WANT GOT
expect() { if [ "$3" = "$2" ]; then ok "$1"; else bad "$1: got '$3', want '$2'"; fi; }

out=$(pm run --rm --no-healthcheck "${limits[@]}" "$img" --version) ||
	unavailable "podman cannot run a container here: $(tail -3 "$log")"
want="leaf $version revision ${revision:-unknown} "
case "$out" in "$want"*) ok "--version: $out" ;; *) bad "--version: got '$out', want '$want...'" ;; esac

rc=0
out=$("${podman[@]}" run --rm --no-healthcheck "${limits[@]}" "$img" 2>&1) || rc=$?
if [ "$rc" != 0 ] && grep -q 'server.protected_mode' <<<"$out"; then
	ok "refuses to listen beyond loopback without a password (exit $rc)"
else
	bad "started without a password: exit $rc: $out"
fi

port="" hport=""
# run: a new container on the volume, with published loopback ports.
run() {
	local try
	for try in 1 2 3; do
		port=$(free_port) hport=$(free_port)
		# The healthcheck runs on demand below: no timer, which would
		# need systemd.
		pm run -d --name "$ctr" "${limits[@]}" --health-interval=disable \
			-p "127.0.0.1:$port:6380" -p "127.0.0.1:$hport:8080" -v "$vol:/data" \
			-e LEAF_SERVER_PASSWORD="$pw" "$img" >/dev/null && return 0
		pm rm -f -t 0 "$ctr" >/dev/null || true
	done
	bad "podman run failed 3 times"
	exit 1
}
cli() { redis-cli -h 127.0.0.1 -p "$port" -a "$pw" --no-auth-warning "$@"; }
# serving: wait until leaf answers PING through the published port.
serving() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ "$(cli PING 2>/dev/null)" = PONG ] && return 0
		sleep 0.1
	done
	bad "no PONG on 127.0.0.1:$port within 60s"
	"${podman[@]}" logs "$ctr" >&2 2>&1 || true
	exit 1
}
# stop: podman stop (SIGTERM to leaf, PID 1); leaf must exit 0 after
# giving unused IDs back.
stop() {
	pm stop -t 30 "$ctr" >/dev/null
	expect "exit code on podman stop" 0 "$(pm inspect -f '{{.State.ExitCode}}' "$ctr")"
	local logs
	logs=$("${podman[@]}" logs "$ctr" 2>&1) # leaf logs on stderr
	if grep -q 'msg=stopped' <<<"$logs" && ! grep -q 'giving back unused IDs' <<<"$logs"; then
		ok "clean stop: unused IDs given back"
	else
		bad "no clean stop:"
		echo "$logs" | tail -20 >&2
	fi
}

run
serving
expect "INCR" 1 "$(cli INCR order)"
expect "INCR again" 2 "$(cli INCR order)"
expect "INCRBY" 12 "$(cli INCRBY order 10)"

pid=$(pm inspect -f '{{.State.Pid}}' "$ctr")
expect "runs as the user leaf (uid)" 65532 "$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")"
expect "leaf is PID 1 in the container" 1 "$(awk '/^NSpid:/ {print $NF}' "/proc/$pid/status")"
if out=$(pm healthcheck run "$ctr"); then ok "HEALTHCHECK (leaf health)"; else bad "HEALTHCHECK: $out"; fi
status=$(exec 3<>"/dev/tcp/127.0.0.1/$hport" && printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3 && head -1 <&3 | tr -d '\r')
expect "GET /readyz on the published HTTP port" "HTTP/1.0 200 OK" "$status"
mount=$(pm volume inspect -f '{{.Mountpoint}}' "$vol")
expect "data/leaf.db is in the volume, the user's" 65532 "$(stat -c %u "$mount/leaf.db" 2>&1)"

stop
pm start "$ctr" >/dev/null
serving
expect "the same container started again continues at the next ID" 13 "$(cli INCR order)"
stop
pm rm "$ctr" >/dev/null

run
serving
expect "a new container on the volume continues at the next ID" 14 "$(cli INCR order)"
stop

[ "$fail" = 0 ] || exit 1
echo "image: all passed"
