#!/usr/bin/env bash
# A throwaway PostgreSQL cluster under Patroni for tests, as users run one:
# three nodes (Debian's postgresql and patroni), synchronous_mode on, the
# leader key in the etcd cluster of LEAF_TEST_ETCD_ENDPOINTS (the one
# scripts/etcd.sh starts), every node on free ports of 127.0.0.1. No system
# service or configuration file is used or touched.
#
#   scripts/patroni.sh start <dir>      start the three nodes (installing patroni
#                                       and postgresql from Debian's packages
#                                       first when missing and run as root) and
#                                       wait for a primary and its synchronous
#                                       standby; prints
#                                         LEAF_TEST_PATRONI_DSN=postgres://leaf:<pw>@127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>/leaf?sslmode=disable&target_session_attrs=read-write
#                                         LEAF_TEST_PATRONI_DIR=<dir>
#                                       and writes them to <dir>/env
#   scripts/patroni.sh stop <dir>       stop the nodes (Patroni stops its PostgreSQL)
#   scripts/patroni.sh destroy <dir>    stop, and delete the nodes' data
#   scripts/patroni.sh install          only install what is missing (as root)
#
# Faults, for the tests:
#
#   scripts/patroni.sh primary <dir>    print the primary's number (1-3)
#   scripts/patroni.sh kill <dir> N     SIGKILL node N's Patroni and PostgreSQL (a crash of
#                                       the machine), and wait until they are gone
#   scripts/patroni.sh restart <dir> N  start node N again: it rejoins as a standby
#                                       (pg_rewind when it was the primary)
#   scripts/patroni.sh wait <dir>       wait until a primary other than a killed node
#                                       leads, with a synchronous standby when two nodes run
#
# Patroni's timing is tighter than its defaults (ttl 10 s, loop_wait 1 s,
# retry_timeout 4 s): the primary's leader key expires some 10 seconds
# after it dies, and a synchronous standby takes over.
#
# PostgreSQL refuses to run as root: run as root, Patroni and the servers
# run as the user postgres, their data in a directory of their own made
# with mktemp under $TMPDIR (or /tmp), named in <dir>/cluster.
#
# Environment: LEAF_TEST_ETCD_ENDPOINTS (required: http://host:port,...);
# PATRONI_START_TIMEOUT (seconds, 120).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log() { echo "patroni.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { echo "usage: $0 install | start|stop|destroy|primary|wait <dir> | kill|restart <dir> 1|2|3" >&2; exit 2; }

bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] && [ -x "$d/postgres" ] && echo "$d"
}

ensure_installed() {
	command -v patroni >/dev/null && bindir >/dev/null && /usr/bin/python3 -c 'import etcd' 2>/dev/null && return 0
	[ "$(id -u)" = 0 ] || die "patroni not found: install patroni python3-etcd postgresql (apt-get install ...) or run this as root"
	log "installing patroni, python3-etcd and postgresql from Debian's packages"
	local rc=0
	apt_install patroni python3-etcd postgresql postgresql-client || rc=$?
	[ "$rc" = 0 ] || die "apt-get install failed ($rc)"
}

as_server=()
if [ "$(id -u)" = 0 ]; then
	as_server=(setpriv --reuid=postgres --regid=postgres --init-groups --reset-env)
fi

is_patroni() {
	[ -n "$1" ] && alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q patroni
}

cluster_dir() {
	local dir=$1 c
	if [ -f "$dir/cluster" ] && c=$(cat "$dir/cluster") && [ -d "$c" ]; then
		echo "$c"
		return 0
	fi
	if [ "$(id -u)" = 0 ]; then
		c=$(mktemp -d "${TMPDIR:-/tmp}/leaf-patroni.XXXXXX")
		chown postgres:postgres "$c"
		chmod 700 "$c"
	else
		c="$dir/cluster.d"
		mkdir -p -m 700 "$c"
	fi
	echo "$c" >"$dir/cluster"
	echo "$c"
}

# ports DIR: P_PG[i] and P_API[i] of the three nodes, picked once.
declare -a P_PG P_API
ports() {
	local dir=$1 i
	if [ ! -f "$dir/ports" ]; then
		local picked=() p
		while [ "${#picked[@]}" -lt 6 ]; do
			p=$(free_port)
			case " ${picked[*]} " in *" $p "*) continue ;; esac
			picked+=("$p")
		done
		echo "${picked[*]}" >"$dir/ports"
	fi
	local all
	read -r -a all <"$dir/ports"
	for i in 1 2 3; do
		P_PG[i]=${all[2 * (i - 1)]}
		P_API[i]=${all[2 * (i - 1) + 1]}
	done
}

# write_config DIR CLUSTER N: node N's patroni.yml.
write_config() {
	local dir=$1 cluster=$2 n=$3 node="$2/node$3" hosts
	hosts=$(echo "$LEAF_TEST_ETCD_ENDPOINTS" | sed 's|https\?://||g')
	"${as_server[@]}" mkdir -p "$node"
	"${as_server[@]}" tee "$node/patroni.yml" >/dev/null <<-YML
		scope: $(cat "$dir/scope")
		namespace: /leaf-patroni/
		name: node$n
		log:
		  level: WARNING
		restapi:
		  listen: 127.0.0.1:${P_API[n]}
		  connect_address: 127.0.0.1:${P_API[n]}
		etcd3:
		  hosts: $hosts
		bootstrap:
		  dcs:
		    ttl: 10
		    loop_wait: 1
		    retry_timeout: 4
		    maximum_lag_on_failover: 16777216
		    synchronous_mode: true
		    postgresql:
		      use_pg_rewind: true
		      use_slots: true
		      parameters:
		        max_connections: 300
		        shared_buffers: 32MB
		        wal_level: replica
		        hot_standby: "on"
		        wal_log_hints: "on"
		        max_wal_senders: 10
		        max_replication_slots: 10
		        fsync: "off"
		        full_page_writes: "on"
		  initdb:
		    - encoding: UTF8
		    - locale: C.UTF-8
		    - auth-local: peer
		    - auth-host: scram-sha-256
		  pg_hba:
		    - local all all peer
		    - host replication replicator 127.0.0.1/32 scram-sha-256
		    - host all all 127.0.0.1/32 scram-sha-256
		postgresql:
		  listen: 127.0.0.1:${P_PG[n]}
		  connect_address: 127.0.0.1:${P_PG[n]}
		  data_dir: $node/data
		  bin_dir: $(bindir)
		  pgpass: $node/pgpass
		  basebackup:
		    - checkpoint: fast
		  authentication:
		    superuser:
		      username: postgres
		      password: $(cat "$dir/password")
		    replication:
		      username: replicator
		      password: $(cat "$dir/password")
		    rewind:
		      username: postgres
		      password: $(cat "$dir/password")
		  parameters:
		    unix_socket_directories: $node
	YML
	"${as_server[@]}" chmod 600 "$node/patroni.yml"
}

# api N PATH: GET a path of node N's REST API; the HTTP status on stdout.
api() {
	local n=$1 path=$2
	/usr/bin/python3 - "${P_API[n]}" "$path" <<-'PY' 2>/dev/null || echo 000
		import sys, urllib.request, urllib.error
		try:
		    print(urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=2).status)
		except urllib.error.HTTPError as e:
		    print(e.code)
	PY
}

start_node() {
	local dir=$1 cluster=$2 n=$3
	if [ -f "$dir/node$n.pid" ] && is_patroni "$(cat "$dir/node$n.pid")"; then
		return 0
	fi
	port_free "${P_PG[n]}" && port_free "${P_API[n]}" || die "a port of node $n is taken (ports in $dir/ports)"
	"${as_server[@]}" patroni "$cluster/node$n/patroni.yml" </dev/null >>"$dir/node$n.log" 2>&1 &
	echo $! >"$dir/node$n.pid"
	log "node $n started (pid $!, postgres on 127.0.0.1:${P_PG[n]})"
}

# primary_of DIR: the number of the node whose API says it leads.
primary_of() {
	local i
	for i in 1 2 3; do
		if [ "$(api "$i" /primary)" = 200 ]; then echo "$i"; return 0; fi
	done
	return 1
}

# wait_ready DIR: a primary, and a synchronous standby when two or more
# nodes run.
wait_ready() {
	local dir=$1 deadline=$((SECONDS + ${PATRONI_START_TIMEOUT:-120})) p i running sync
	while [ "$SECONDS" -lt "$deadline" ]; do
		running=0
		for i in 1 2 3; do
			if [ -f "$dir/node$i.pid" ] && is_patroni "$(cat "$dir/node$i.pid")"; then running=$((running + 1)); fi
		done
		if p=$(primary_of "$dir"); then
			sync=""
			for i in 1 2 3; do
				[ "$i" = "$p" ] && continue
				if [ "$(api "$i" /sync)" = 200 ]; then sync=$i; fi
			done
			if [ "$running" -lt 2 ] || [ -n "$sync" ]; then
				echo "$p"
				return 0
			fi
		fi
		sleep 0.3
	done
	for i in 1 2 3; do tail -n 20 "$dir/node$i.log" >&2 2>/dev/null || true; done
	die "no primary with a synchronous standby after ${PATRONI_START_TIMEOUT:-120}s"
}

psql_admin() {
	local cluster=$1 n=$2 sql=$3
	"${as_server[@]}" "$(bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$cluster/node$n" -p "${P_PG[n]}" \
		-U postgres -d postgres -c "$sql"
}

start() {
	local dir
	mkdir -p "$1"
	dir=$(cd "$1" && pwd)
	[ -n "${LEAF_TEST_ETCD_ENDPOINTS:-}" ] || die "LEAF_TEST_ETCD_ENDPOINTS is not set: start etcd with scripts/etcd.sh first"
	ensure_installed
	local cluster i
	cluster=$(cluster_dir "$dir")
	ports "$dir"
	[ -f "$dir/password" ] || (umask 077 && od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$dir/password")
	[ -f "$dir/scope" ] || echo "leaf-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')" >"$dir/scope"
	for i in 1 2 3; do write_config "$dir" "$cluster" "$i"; done
	# Node 1 first, so that it bootstraps; the others clone it.
	start_node "$dir" "$cluster" 1
	local p
	p=$(wait_ready "$dir")
	local pw
	pw=$(cat "$dir/password")
	psql_admin "$cluster" "$p" "DO \$\$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'leaf') THEN
				CREATE ROLE leaf LOGIN CREATEDB CREATEROLE;
			END IF;
		END \$\$;
		ALTER ROLE leaf PASSWORD '$pw';
		GRANT pg_signal_backend TO leaf;" >/dev/null || die "could not create the role leaf"
	if ! psql_admin "$cluster" "$p" "SELECT 1 FROM pg_database WHERE datname = 'leaf'" -t | grep -q 1; then
		psql_admin "$cluster" "$p" "CREATE DATABASE leaf OWNER leaf" >/dev/null || die "could not create the database leaf"
	fi
	start_node "$dir" "$cluster" 2
	start_node "$dir" "$cluster" 3
	wait_ready "$dir" >/dev/null
	local hosts=""
	for i in 1 2 3; do hosts+="${hosts:+,}127.0.0.1:${P_PG[i]}"; done
	{
		echo "LEAF_TEST_PATRONI_DSN=postgres://leaf:$pw@$hosts/leaf?sslmode=disable&target_session_attrs=read-write"
		echo "LEAF_TEST_PATRONI_DIR=$dir"
	} >"$dir/env"
	chmod 600 "$dir/env"
	log "ready: primary node $(primary_of "$dir") (data $cluster)"
	cat "$dir/env"
}

# postmaster CLUSTER N: the PID of node N's postmaster ("" when none runs).
postmaster() {
	local f="$1/node$2/data/postmaster.pid" pid
	[ -f "$f" ] || return 0
	pid=$(head -n 1 "$f")
	if alive "$pid"; then echo "$pid"; fi
}

crash() {
	local dir=$1 n=$2 cluster pid pm kids
	cluster=$(cat "$dir/cluster")
	pid=$(running_pid "$dir/node$n.pid" is_patroni)
	pm=$(postmaster "$cluster" "$n")
	# Patroni first, so that it restarts nothing; then the postmaster,
	# stopped before its backends are found, as scripts/postgres.sh does.
	kill -KILL "$pid"
	if [ -n "$pm" ]; then
		kill -STOP "$pm" 2>/dev/null || true
		kids=$(ps -o pid= --ppid "$pm" 2>/dev/null || true)
		# shellcheck disable=SC2086
		kill -KILL "$pm" $kids 2>/dev/null || true
		wait_gone "$pm" 60 || die "postgres of node $n still alive 60s after SIGKILL"
	fi
	wait_gone "$pid" 60 || die "patroni of node $n still alive 60s after SIGKILL"
	rm -f "$dir/node$n.pid"
	log "node $n killed (patroni $pid, postgres ${pm:-none})"
}

stop() {
	local dir=$1 i pid cluster pm
	cluster=$(cat "$dir/cluster" 2>/dev/null || true)
	for i in 3 2 1; do
		[ -f "$dir/node$i.pid" ] || continue
		pid=$(cat "$dir/node$i.pid")
		if is_patroni "$pid"; then stop_pid "$pid" 60 || log "node $i still running after 60s, killed"; fi
		rm -f "$dir/node$i.pid"
		if [ -n "$cluster" ]; then
			pm=$(postmaster "$cluster" "$i")
			if [ -n "$pm" ]; then kill -INT "$pm" 2>/dev/null || true; wait_gone "$pm" 30 || kill -KILL "$pm" 2>/dev/null || true; fi
		fi
	done
	log "stopped"
}

destroy() {
	local dir=$1 c
	stop "$dir"
	if [ -f "$dir/cluster" ]; then
		c=$(cat "$dir/cluster")
		case "$c" in
		*/leaf-patroni.* | */cluster.d) rm -rf "$c" ;;
		*) die "refusing to delete $c: not a cluster this script made" ;;
		esac
		rm -f "$dir/cluster"
	fi
	# The cluster's keys in etcd: a next start makes a new cluster.
	if [ -f "$dir/scope" ] && [ -n "${LEAF_TEST_ETCD_ENDPOINTS:-}" ]; then
		/usr/bin/python3 - "${LEAF_TEST_ETCD_ENDPOINTS%%,*}" "/leaf-patroni/$(cat "$dir/scope")/" <<-'PY' || log "could not delete the cluster's keys in etcd"
			import base64, json, sys, urllib.request
			key = sys.argv[2].encode()
			end = key[:-1] + bytes([key[-1] + 1])
			body = json.dumps({"key": base64.b64encode(key).decode(), "range_end": base64.b64encode(end).decode()}).encode()
			urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/v3/kv/deleterange", body), timeout=5)
		PY
	fi
	rm -f "$dir/env" "$dir/ports" "$dir/scope" "$dir/password"
	log "destroyed"
}

case "${1:-}" in
install)
	[ $# -eq 1 ] || usage
	ensure_installed
	;;
start | stop | destroy)
	[ $# -eq 2 ] || usage
	dir=$(mkdir -p "$2" && cd "$2" && pwd)
	"$1" "$dir"
	;;
primary | wait)
	[ $# -eq 2 ] || usage
	dir=$(cd "$2" && pwd)
	ports "$dir"
	if [ "$1" = primary ]; then primary_of "$dir" || die "no primary"; else wait_ready "$dir"; fi
	;;
kill | restart)
	[ $# -eq 3 ] || usage
	case "$3" in 1 | 2 | 3) ;; *) usage ;; esac
	dir=$(cd "$2" && pwd)
	ports "$dir"
	if [ "$1" = kill ]; then crash "$dir" "$3"; else start_node "$dir" "$(cat "$dir/cluster")" "$3"; fi
	;;
*) usage ;;
esac
