#!/usr/bin/env bash
# Smoke test with real Redis tools: build leaf, start it on a free loopback
# port over a fresh SQLite file, drive it with redis-cli (RESP2 and -3) and
# redis-benchmark, and fail on any error reply. Stops leaf by PID (SIGTERM)
# and checks it exits 0 and gives unused IDs back (the next run continues
# at exactly the next ID).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_pkgs redis-cli redis-tools

work=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

CGO_ENABLED=0 go build -o "$work/leaf" .

start() {
	: >"$work/log"
	# As a user starts it: without the LEAF_TEST_* variables of the test
	# run, which leaf would refuse as settings it does not have.
	(
		cd "$work"
		for v in $(compgen -e); do
			case $v in LEAF_TEST_*) unset "$v" ;; esac
		done
		exec ./leaf --server.addr=127.0.0.1:0 --store.dsn="$work/leaf.db" --store.create_database
	) >"$work/log" 2>&1 &
	pid=$!
	# A safety net, not a measure: a shared machine may be slow to start it.
	wait_log "$work/log" 'msg=serving' 90 "$pid"
	port=$(sed -n 's/.*msg=serving addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/log" | head -1)
	[ -n "$port" ] || { cat "$work/log" >&2; exit 1; }
}

stop() {
	kill -TERM "$pid"
	local rc=0
	wait "$pid" || rc=$?
	pid=""
	[ "$rc" = 0 ] || { echo "leaf exited $rc on SIGTERM" >&2; cat "$work/log" >&2; exit 1; }
}

fail=0
# check NAME WANT CMD...: run a redis-cli command, compare its output.
check() {
	local name=$1 want=$2
	shift 2
	local got
	got=$("$@" 2>&1) || true
	if [ "$got" != "$want" ]; then
		echo "FAIL $name: got '$got', want '$want'" >&2
		fail=1
	else
		echo "ok   $name"
	fi
}
# no_errors NAME CMD...: run, fail if any line looks like an error.
no_errors() {
	local name=$1 out
	shift
	out=$("$@" 2>&1) || { echo "FAIL $name: exit $?: $out" >&2; fail=1; return; }
	# redis-cli prints an error reply as its text (ERR ..., NOAUTH ...), or
	# "(error) ..." on a terminal; redis-benchmark as "Error from server".
	if grep -qE '^(\(error\) |ERR |NOAUTH|WRONGPASS|NOPROTO|TRYAGAIN|Error from server)' <<<"$out" ||
		grep -q 'Error from server' <<<"$out"; then
		echo "FAIL $name:" >&2
		echo "$out" >&2
		fail=1
	else
		echo "ok   $name"
	fi
}

start
cli=(redis-cli -h 127.0.0.1 -p "$port")
check "INCR" 1 "${cli[@]}" INCR smoke
check "INCR again" 2 "${cli[@]}" INCR smoke
check "INCRBY" 12 "${cli[@]}" INCRBY smoke 10
check "RESP3 INCR" 13 "${cli[@]}" -3 INCR smoke
check "PING" PONG "${cli[@]}" PING
check "bad INCRBY" "ERR value is not an integer or out of range" "${cli[@]}" INCRBY smoke 07
no_errors "LEAF.INFO" "${cli[@]}" LEAF.INFO smoke
no_errors "LEAF.INFO -3" "${cli[@]}" -3 LEAF.INFO smoke
no_errors "INFO" "${cli[@]}" INFO
no_errors "HELLO 3" "${cli[@]}" -3 HELLO 3
no_errors "redis-benchmark INCR" redis-benchmark -h 127.0.0.1 -p "$port" -n 10000 -c 20 -q INCR smoke
no_errors "redis-benchmark INCR -P 16" redis-benchmark -h 127.0.0.1 -p "$port" -n 10000 -c 20 -P 16 -q INCR smoke
last=$("${cli[@]}" INCR smoke)
want=$((13 + 20000 + 1))
[ "$last" = "$want" ] && echo "ok   count after benchmark" || { echo "FAIL count after benchmark: $last, want $want" >&2; fail=1; }
stop

start
check "restart continues at the next ID" $((last + 1)) redis-cli -h 127.0.0.1 -p "$port" INCR smoke
stop

[ "$fail" = 0 ] || exit 1
echo "smoke: all passed"
