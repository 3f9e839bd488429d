#!/usr/bin/env bash
# A throwaway etcd cluster for tests: three members (Debian's etcd-server),
# each with its own data directory, PID file and log under <dir>/m<N>,
# listening on free ports of 127.0.0.1 (one client and one peer port each).
# No system service or configuration file is used or touched.
#
#   scripts/etcd.sh start <dir>          start the cluster (installing
#                                        etcd-server with apt-get first when
#                                        missing and run as root) and wait
#                                        until it has a leader; prints
#                                        LEAF_TEST_ETCD_ENDPOINTS=http://127.0.0.1:<port>,...
#                                        and writes it to <dir>/endpoints
#   scripts/etcd.sh stop <dir>           stop every member (SIGTERM) and wait
#
# With ETCD_PORT set (say 2379), start places the members on that port and
# the five after it: member N's client port is ETCD_PORT + 2(N-1), its peer
# port the next one (2379 to 2384), or fails when one is taken; without it,
# free random ports.
#
# One member, for fault tests; <member> is 1, 2 or 3, or "leader" (found
# through each member's /metrics). Each acts on the PID in <dir>/m<N>/etcd.pid
# and prints the member's number:
#
#   scripts/etcd.sh kill <dir> <member>    SIGKILL it (a crash) and wait until it is gone
#   scripts/etcd.sh stop <dir> <member>    stop it cleanly (SIGTERM) and wait
#   scripts/etcd.sh pause <dir> <member>   SIGSTOP it: its connections are accepted by
#                                          the kernel and never answered, a hung member
#   scripts/etcd.sh resume <dir> <member>  SIGCONT it
#   scripts/etcd.sh start <dir> <member>   start it again, on its ports and data
#   scripts/etcd.sh leader <dir>           print the leader's number
#
# A member started again keeps its ports (they are in the cluster's
# membership): it fails when another process took one meanwhile.
#
# Typical use:
#
#   eval "export $(scripts/etcd.sh start /tmp/leaf-etcd)"
#   go test -race ./persist/etcd/...
#   scripts/etcd.sh stop /tmp/leaf-etcd && rm -rf /tmp/leaf-etcd
#
# Environment: LEAF_ETCD_HEARTBEAT_MS (100) and LEAF_ETCD_ELECTION_MS (1000),
# etcd's --heartbeat-interval and --election-timeout; ETCD_START_TIMEOUT
# (seconds to wait for readiness, 60); LEAF_ETCD_TLS_DIR, when set at the
# cluster's start: its client URLs speak TLS only, with ca.pem, server.pem
# and server-key.pem of that directory, and want a client certificate
# signed by that CA (the script's own requests use client.pem and
# client-key.pem there); the endpoints printed are https://.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

members=3

log() { echo "etcd.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() {
	echo "usage: $0 start|stop <dir> | kill|stop|pause|resume|start <dir> <1-$members|leader> | leader <dir>" >&2
	exit 2
}

# etcd reads ETCD_* variables as flags: none of the caller's may reach it.
unset_etcd_env() {
	local v
	for v in $(compgen -e | grep '^ETCD_' || true); do unset "$v"; done
}

ensure_installed() {
	command -v etcd >/dev/null 2>&1 && command -v curl >/dev/null 2>&1 && return 0
	need_pkgs etcd etcd-server || die "etcd not found: install etcd-server (apt-get install etcd-server) or run this as root"
	need_pkgs curl curl || die "curl not found: install curl"
}

# is_etcd PID: the process is alive and is an etcd (not a recycled PID).
is_etcd() {
	[ -n "$1" ] && alive "$1" && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = etcd ]
}

# free_ports N: N distinct random ports on 127.0.0.1 that nothing listens on
# now, below the kernel's range of ephemeral ports: a member restarted on
# its ports must not find one taken by a client's outgoing connection
# (the clients of a member that is down keep dialling it). A member may
# still lose a race for one; start retries then.
free_ports() {
	local want=$1 got=() port i low=32768
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	[ "$low" -gt 11000 ] || die "the ephemeral port range starts at $low: no room below it"
	for ((i = 0; i < 200 && ${#got[@]} < want; i++)); do
		port=$((10000 + (RANDOM * 32768 + RANDOM) % (low - 10000)))
		case " ${got[*]} " in *" $port "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then got+=("$port"); fi
	done
	[ ${#got[@]} -eq "$want" ] || die "no free ports found"
	echo "${got[@]}"
}

# port N KIND: member N's client or peer port, from <dir>/ports.
port() {
	local ports
	read -r -a ports <"$dir/ports"
	case $2 in
	client) echo "${ports[$((2 * ($1 - 1)))]}" ;;
	peer) echo "${ports[$((2 * ($1 - 1) + 1))]}" ;;
	esac
}

pid_of() { cat "$dir/m$1/etcd.pid" 2>/dev/null || true; }

# tls_dir: the TLS directory the cluster was started with, or nothing.
tls_dir() { cat "$dir/tls" 2>/dev/null || true; }

# client_url N: member N's client URL.
client_url() {
	if [ -n "$(tls_dir)" ]; then echo "https://127.0.0.1:$(port "$1" client)"; else echo "http://127.0.0.1:$(port "$1" client)"; fi
}

# get N PATH: GET member N's client URL PATH, 2 s at most (a paused member
# never answers).
get() {
	local t tls=()
	t=$(tls_dir)
	[ -z "$t" ] || tls=(--cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client-key.pem")
	curl -fsS --max-time 2 "${tls[@]}" "$(client_url "$1")$2" 2>/dev/null
}

# launch N STATE: start member N in the background (STATE: new or existing).
launch() {
	local n=$1 m="$dir/m$1" cluster="" i t tls=()
	for ((i = 1; i <= members; i++)); do
		cluster+="${cluster:+,}m$i=http://127.0.0.1:$(port "$i" peer)"
	done
	t=$(tls_dir)
	[ -z "$t" ] || tls=(--cert-file "$t/server.pem" --key-file "$t/server-key.pem"
		--trusted-ca-file "$t/ca.pem" --client-cert-auth)
	mkdir -p "$m"
	(
		unset_etcd_env
		exec etcd --name "m$n" --data-dir "$m/data" "${tls[@]}" \
			--listen-client-urls "$(client_url "$n")" \
			--advertise-client-urls "$(client_url "$n")" \
			--listen-peer-urls "http://127.0.0.1:$(port "$n" peer)" \
			--initial-advertise-peer-urls "http://127.0.0.1:$(port "$n" peer)" \
			--initial-cluster "$cluster" --initial-cluster-token "leaf-$(basename "$dir")" \
			--initial-cluster-state "$2" \
			--heartbeat-interval "${LEAF_ETCD_HEARTBEAT_MS:-100}" \
			--election-timeout "${LEAF_ETCD_ELECTION_MS:-1000}" \
			--auto-compaction-mode revision --auto-compaction-retention 10000 \
			--logger zap --log-outputs stderr --log-level warn
	) </dev/null >>"$m/etcd.log" 2>&1 &
	local pid=$! i
	echo "$pid" >"$m/etcd.pid"
	# Until the subshell has exec'd etcd, the PID is a bash's: is_etcd
	# would take the member for gone.
	for ((i = 0; i < 500; i++)); do
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = etcd ] && return 0
		alive "$pid" || return 0
		sleep 0.02
	done
}

# answers N PATH PATTERN: member N's answer to PATH has a line matching
# PATTERN. (Not a pipe into grep -q: under pipefail, grep leaving early
# fails curl.)
answers() {
	local body
	body=$(get "$1" "$2") || return 1
	grep -q -- "$3" <<<"$body"
}

# healthy N: member N answers /health with a leader behind it.
healthy() { answers "$1" /health '"health":"true"'; }

start_cluster() {
	local i ok attempt
	if [ -f "$dir/endpoints" ] && [ -f "$dir/ports" ]; then
		# Started before: the members that are down come back on their
		# ports and data.
		for ((i = 1; i <= members; i++)); do
			is_etcd "$(pid_of "$i")" || launch "$i" existing
		done
		wait_cluster || die "cluster not healthy after ${ETCD_START_TIMEOUT:-60}s; logs: $dir/m*/etcd.log"
		cat "$dir/endpoints"
		return 0
	fi
	if [ -n "${LEAF_ETCD_TLS_DIR:-}" ]; then
		(cd "$LEAF_ETCD_TLS_DIR" && pwd) >"$dir/tls"
	else
		rm -f "$dir/tls"
	fi
	local want=${ETCD_PORT:-}
	if [ -n "$want" ]; then
		valid_port "$want" && valid_port $((want + 2 * members - 1)) ||
			die "ETCD_PORT '$want': not a port number with $((2 * members - 1)) more after it"
	fi
	for attempt in 1 2 3; do
		if [ -n "$want" ]; then
			# The caller's ports or none: a recipe that names them must
			# not find the cluster elsewhere.
			[ "$attempt" = 1 ] || die "a port from $want to $((want + 2 * members - 1)) was taken"
			for ((i = want; i < want + 2 * members; i++)); do
				port_free "$i" || die "port $i on 127.0.0.1 is taken: choose another ETCD_PORT, or none for free ports"
			done
			echo $(seq "$want" $((want + 2 * members - 1))) >"$dir/ports"
		else
			free_ports $((2 * members)) >"$dir/ports"
		fi
		for ((i = 1; i <= members; i++)); do
			rm -rf "$dir/m$i"
			launch "$i" new
		done
		log "starting $members members on 127.0.0.1 ports $(cat "$dir/ports") (attempt $attempt)"
		if wait_cluster; then ok=1; break; fi
		# A cluster that never formed holds nothing: kill it, and try again
		# on other ports (one may have been taken, by a process or by a
		# cluster starting at the same time).
		kill_all
		if grep -qi 'address already in use' "$dir"/m*/etcd.log 2>/dev/null; then
			log "a port was taken, trying others"
		else
			tail -n 5 "$dir"/m*/etcd.log >&2 || true
			log "cluster not healthy after ${ETCD_START_TIMEOUT:-60}s, trying again"
		fi
	done
	[ -n "${ok:-}" ] || die "no healthy cluster after $attempt attempts; logs: $dir/m*/etcd.log"
	local eps=""
	for ((i = 1; i <= members; i++)); do eps+="${eps:+,}$(client_url "$i")"; done
	echo "LEAF_TEST_ETCD_ENDPOINTS=$eps" >"$dir/endpoints"
	log "ready: $eps (data under $dir)"
	cat "$dir/endpoints"
}

# wait_cluster: every member is up and healthy, or fail when one exits or
# the timeout passes.
wait_cluster() {
	local deadline=$((SECONDS + ${ETCD_START_TIMEOUT:-60})) i up
	while [ "$SECONDS" -lt "$deadline" ]; do
		up=0
		for ((i = 1; i <= members; i++)); do
			is_etcd "$(pid_of "$i")" || return 1
			healthy "$i" && up=$((up + 1))
		done
		[ "$up" -eq "$members" ] && return 0
		sleep 0.2
	done
	return 1
}

stop_all() {
	local i
	for ((i = 1; i <= members; i++)); do stop_member "$i" >/dev/null; done
}

kill_all() {
	local i
	for ((i = 1; i <= members; i++)); do
		if is_etcd "$(pid_of "$i")"; then kill_member "$i" >/dev/null; fi
	done
}

# leader: the number of the member that reports itself leader; while an
# election runs (or the old leader is paused and still thinks it leads),
# wait until exactly one running member does.
leader() {
	local deadline=$((SECONDS + 30)) i found
	while [ "$SECONDS" -lt "$deadline" ]; do
		found=()
		for ((i = 1; i <= members; i++)); do
			if answers "$i" /metrics '^etcd_server_is_leader 1'; then found+=("$i"); fi
		done
		if [ ${#found[@]} -eq 1 ]; then
			echo "${found[0]}"
			return 0
		fi
		sleep 0.1
	done
	die "no single leader after 30s"
}

# member ARG: ARG as a member number (resolving "leader").
member() {
	case $1 in
	leader) leader ;;
	[1-9]) [ "$1" -le "$members" ] || usage; echo "$1" ;;
	*) usage ;;
	esac
}

running_member() {
	local pid
	pid=$(pid_of "$1")
	is_etcd "$pid" || die "member $1 is not running"
	echo "$pid"
}

stop_member() {
	local n=$1 pid
	pid=$(pid_of "$n")
	if is_etcd "$pid"; then
		stop_pid "$pid" 30 || log "member $n still running after 30s, killed"
	fi
	rm -f "$dir/m$n/etcd.pid"
	echo "$n"
}

kill_member() {
	local n=$1 pid
	pid=$(running_member "$n")
	kill -KILL "$pid"
	wait_gone "$pid" 30 || die "member $n (pid $pid) still alive 30s after SIGKILL"
	rm -f "$dir/m$n/etcd.pid"
	echo "$n"
}

start_member() {
	local n=$1 deadline
	[ -f "$dir/ports" ] || die "no cluster in $dir"
	if ! is_etcd "$(pid_of "$n")"; then
		launch "$n" existing
	fi
	# Without a quorum the member cannot be healthy: wait until it
	# answers at all.
	deadline=$((SECONDS + ${ETCD_START_TIMEOUT:-60}))
	until get "$n" /version >/dev/null; do
		is_etcd "$(pid_of "$n")" || { tail -n 20 "$dir/m$n/etcd.log" >&2; die "member $n exited"; }
		[ "$SECONDS" -lt "$deadline" ] || die "member $n not answering after ${ETCD_START_TIMEOUT:-60}s"
		sleep 0.1
	done
	echo "$n"
}

[ $# -ge 2 ] && [ $# -le 3 ] || usage
mkdir -p "$2"
dir=$(cd "$2" && pwd)
cmd=$1
if [ $# -eq 2 ]; then
	case $cmd in
	start) ensure_installed && start_cluster ;;
	stop) [ -f "$dir/ports" ] && stop_all >/dev/null; log "stopped" ;;
	leader) leader ;;
	*) usage ;;
	esac
	exit 0
fi
n=$(member "$3")
case $cmd in
kill) kill_member "$n" ;;
stop) stop_member "$n" ;;
pause | resume)
	pid=$(running_member "$n")
	if [ "$cmd" = pause ]; then kill -STOP "$pid"; else kill -CONT "$pid"; fi
	echo "$n"
	;;
start) start_member "$n" ;;
*) usage ;;
esac
