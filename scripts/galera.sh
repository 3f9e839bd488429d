#!/usr/bin/env bash
# A throwaway three-node MariaDB Galera cluster for tests, as users deploy
# one: Debian's mariadb-server with galera-4, state transfers by rsync, the
# nodes run as the user mysql, and HAProxy in front. Every node listens on
# free ports of 127.0.0.1 (client, group communication, IST, SST). No system
# service or configuration file is used or touched.
#
#   scripts/galera.sh start <dir>      bootstrap node 1, join nodes 2 and 3,
#                                      start HAProxy (installing mariadb-server,
#                                      galera-4, rsync and haproxy from Debian's
#                                      packages first when missing and run as
#                                      root); prints
#                                        LEAF_TEST_GALERA_DSN=leaf:<pw>@tcp(127.0.0.1:<haproxy>)/leaf
#                                        LEAF_TEST_GALERA_NODES=<dsn of node 1>,<node 2>,<node 3>
#                                        LEAF_TEST_GALERA_DIR=<dir>
#                                      and writes them to <dir>/env
#   scripts/galera.sh stop <dir>       stop HAProxy and the nodes by their PIDs, and wait
#   scripts/galera.sh destroy <dir>    stop, and delete the nodes' data
#   scripts/galera.sh install          only install what is missing (as root)
#
# Faults, for the tests (N is 1, 2 or 3):
#
#   scripts/galera.sh kill <dir> N     SIGKILL node N (a crash) and wait until it is gone
#   scripts/galera.sh restart <dir> N  start node N again and wait until it is synced
#                                      (IST from a donor's gcache, or rsync SST)
#
# mariadbd refuses to run as root without --user; the nodes run as mysql
# (created by Debian's package), their data in a directory of its own that
# mysql owns, made with mktemp under $TMPDIR (or /tmp) and named in
# <dir>/cluster, since mysql may not reach <dir>. Run as another user, the
# nodes run as that user, their data in <dir>/cluster.d.
#
# The user "leaf" may create and drop databases named leaf* and create users,
# as with scripts/mariadb.sh: persist/mysql/mysqltest makes one fresh
# database per test on either. HAProxy sends each new connection to the
# node with the fewest (balance leastconn), so leaf's connections spread over
# the three nodes, the case where Galera's certification conflicts happen.
#
# Environment: GALERA_START_TIMEOUT (seconds to wait for each node, 120).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log() { echo "galera.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { echo "usage: $0 install | start|stop|destroy <dir> | kill|restart <dir> 1|2|3" >&2; exit 2; }

find_bin() {
	command -v "$1" 2>/dev/null && return 0
	local d
	for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
		if [ -x "$d/$1" ]; then echo "$d/$1"; return 0; fi
	done
	return 1
}

provider() {
	local p
	for p in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so /usr/lib64/galera-4/libgalera_smm.so; do
		if [ -f "$p" ]; then echo "$p"; return 0; fi
	done
	return 1
}

have_all() {
	find_bin mariadbd >/dev/null && find_bin mariadb-install-db >/dev/null &&
		find_bin mariadb >/dev/null && provider >/dev/null &&
		find_bin rsync >/dev/null && find_bin haproxy >/dev/null &&
		find_bin wsrep_sst_rsync >/dev/null
}

ensure_installed() {
	have_all && return 0
	[ "$(id -u)" = 0 ] || die "Galera not found: install mariadb-server galera-4 rsync haproxy (apt-get install ...) or run this as root"
	log "installing mariadb-server, galera-4, rsync and haproxy from Debian's packages"
	local rc=0
	apt_install mariadb-server mariadb-client galera-4 rsync haproxy || rc=$?
	[ "$rc" = 0 ] || die "apt-get install failed ($rc)"
	have_all || die "packages installed but a program is missing (mariadbd, galera, rsync, haproxy)"
}

# The user the nodes run as, and the prefix that runs a client as that
# user (the root account of each node authenticates by unix_socket).
server_user=$(id -un)
as_server=()
if [ "$(id -u)" = 0 ]; then
	server_user=mysql
	as_server=(setpriv --reuid=mysql --regid=mysql --init-groups --reset-env)
fi

is_mariadbd() {
	[ -n "$1" ] && alive "$1" &&
		case "$(cat "/proc/$1/comm" 2>/dev/null || ps -p "$1" -o comm= 2>/dev/null)" in
		mariadbd* | mysqld*) true ;;
		*) false ;;
		esac
}

is_haproxy() {
	[ -n "$1" ] && alive "$1" && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = haproxy ]
}

# cluster_dir DIR: where the nodes' data live (made on first use).
cluster_dir() {
	local dir=$1 c
	if [ -f "$dir/cluster" ] && c=$(cat "$dir/cluster") && [ -d "$c" ]; then
		echo "$c"
		return 0
	fi
	if [ "$(id -u)" = 0 ]; then
		id mysql >/dev/null 2>&1 || die "no user mysql (Debian's mariadb-server package creates it)"
		c=$(mktemp -d "${TMPDIR:-/tmp}/leaf-galera.XXXXXX")
		chown mysql:mysql "$c"
		chmod 700 "$c"
	else
		c="$dir/cluster.d"
		mkdir -p -m 700 "$c"
	fi
	echo "$c" >"$dir/cluster"
	echo "$c"
}

# ports DIR: read (or pick and keep) the ports of the three nodes and of
# HAProxy: P_CLIENT[i], P_GCOMM[i], P_IST[i], P_SST[i], P_PROXY.
declare -a P_CLIENT P_GCOMM P_IST P_SST
P_PROXY=""
ports() {
	local dir=$1 i
	if [ ! -f "$dir/ports" ]; then
		local picked=() p
		while [ "${#picked[@]}" -lt 13 ]; do
			p=$(free_port)
			case " ${picked[*]} " in *" $p "*) continue ;; esac
			picked+=("$p")
		done
		echo "${picked[*]}" >"$dir/ports"
	fi
	local all
	read -r -a all <"$dir/ports"
	for i in 1 2 3; do
		P_CLIENT[i]=${all[4 * (i - 1)]}
		P_GCOMM[i]=${all[4 * (i - 1) + 1]}
		P_IST[i]=${all[4 * (i - 1) + 2]}
		P_SST[i]=${all[4 * (i - 1) + 3]}
	done
	P_PROXY=${all[12]}
}

# write_cnf CLUSTER N: node N's option file. Failure detection is quicker
# than Galera's defaults (a node killed on loopback is declared gone in
# about two seconds, not five to fifteen), so tests wait less; the rest is
# what Galera's documentation asks for.
write_cnf() {
	local cluster=$1 n=$2 node="$1/node$2" members="" i
	for i in 1 2 3; do members+="${members:+,}127.0.0.1:${P_GCOMM[i]}"; done
	"${as_server[@]}" mkdir -p "$node/tmp" "$node/data"
	"${as_server[@]}" tee "$node/my.cnf" >/dev/null <<-CNF
		[mysqld]
		datadir=$node/data
		tmpdir=$node/tmp
		socket=$node/mariadb.sock
		pid-file=$node/mariadbd.pid
		log-error=$node/error.log
		port=${P_CLIENT[n]}
		bind-address=127.0.0.1
		skip-name-resolve
		character-set-server=utf8mb4
		collation-server=utf8mb4_general_ci
		max-connections=500
		innodb-buffer-pool-size=64M
		innodb-log-file-size=16M
		innodb-flush-log-at-trx-commit=2
		binlog_format=ROW
		default_storage_engine=InnoDB
		innodb_autoinc_lock_mode=2
		wsrep_on=ON
		wsrep_provider=$(provider)
		wsrep_cluster_name=leaf_test
		wsrep_cluster_address=gcomm://$members
		wsrep_node_name=node$n
		wsrep_node_address=127.0.0.1:${P_GCOMM[n]}
		wsrep_node_incoming_address=127.0.0.1:${P_CLIENT[n]}
		wsrep_sst_method=rsync
		wsrep_sst_receive_address=127.0.0.1:${P_SST[n]}
		wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:${P_GCOMM[n]};ist.recv_addr=127.0.0.1:${P_IST[n]};gcache.size=64M;evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S;evs.inactive_check_period=PT0.5S;evs.install_timeout=PT4S;pc.wait_prim_timeout=PT30S"
	CNF
}

# client CLUSTER N SQL: run SQL on node N, over its socket, as the account
# that mariadb-install-db made for the server's system user (unix_socket).
client() {
	"${as_server[@]}" "$(find_bin mariadb)" --no-defaults -S "$1/node$2/mariadb.sock" -u "$server_user" \
		--connect-timeout=2 -N -B -e "$3"
}

# wsrep CLUSTER N VARIABLE: a wsrep status variable of node N ("" when down).
wsrep() {
	client "$1" "$2" "SHOW GLOBAL STATUS LIKE '$3'" 2>/dev/null | awk '{print $2}' || true
}

# start_node DIR CLUSTER N [--wsrep-new-cluster]: start node N and wait until
# it is synced with the cluster (its state transfer done).
start_node() {
	local dir=$1 cluster=$2 n=$3 extra=${4:-} node="$2/node$3"
	if [ -f "$dir/node$n.pid" ] && is_mariadbd "$(cat "$dir/node$n.pid")"; then
		log "node $n already running (pid $(cat "$dir/node$n.pid"))"
		return 0
	fi
	if ! port_free "${P_CLIENT[n]}" || ! port_free "${P_GCOMM[n]}" || ! port_free "${P_IST[n]}" ||
		! port_free "${P_SST[n]}"; then
		die "a port of node $n is taken by another program (ports in $dir/ports)"
	fi
	# After a crash grastate.dat holds no position (seqno -1) and the node
	# would ask for a whole copy of the data (SST, tens of seconds): the
	# position recovered from InnoDB lets it catch up from a donor's
	# gcache instead (IST), as Debian's galera_recovery does under systemd.
	if [ -z "$extra" ] && grep -q '^seqno: *-1' "$node/data/grastate.dat" 2>/dev/null; then
		local pos
		"$(find_bin mariadbd)" --defaults-file="$node/my.cnf" --user="$server_user" --wsrep-recover \
			--log-error="$node/recover.log" </dev/null >/dev/null 2>&1 || true
		pos=$(sed -n 's/.*WSREP: Recovered position: *\([0-9a-f-]*:[0-9-]*\).*/\1/p' "$node/recover.log" 2>/dev/null | tail -n 1)
		"${as_server[@]}" rm -f "$node/recover.log"
		if [ -n "$pos" ] && [ "${pos##*:}" != -1 ]; then
			log "node $n recovered position $pos"
			extra="--wsrep-start-position=$pos"
		fi
	fi
	log "starting node $n on 127.0.0.1:${P_CLIENT[n]} ${extra}"
	: >"$dir/node$n.out"
	# mariadbd switches to --user itself; the PID stays that of this job.
	"$(find_bin mariadbd)" --defaults-file="$node/my.cnf" --user="$server_user" $extra \
		</dev/null >>"$dir/node$n.out" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/node$n.pid"
	local deadline=$((SECONDS + ${GALERA_START_TIMEOUT:-120}))
	while [ "$SECONDS" -lt "$deadline" ]; do
		if ! alive "$pid"; then
			tail -n 30 "$node/error.log" >&2 || true
			die "node $n exited; log: $node/error.log"
		fi
		if [ "$(wsrep "$cluster" "$n" wsrep_local_state_comment)" = Synced ] &&
			[ "$(wsrep "$cluster" "$n" wsrep_ready)" = ON ]; then
			log "node $n synced (pid $pid)"
			return 0
		fi
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null || true
	tail -n 30 "$node/error.log" >&2 || true
	die "node $n not synced after ${GALERA_START_TIMEOUT:-120}s; log: $node/error.log"
}

# running_nodes DIR: the numbers of the nodes whose process runs.
running_nodes() {
	local i
	for i in 1 2 3; do
		if [ -f "$1/node$i.pid" ] && is_mariadbd "$(cat "$1/node$i.pid")"; then echo "$i"; fi
	done
}

start_proxy() {
	local dir=$1 cluster=$2
	if [ -f "$dir/haproxy.pid" ] && is_haproxy "$(cat "$dir/haproxy.pid")"; then return 0; fi
	# A plain TCP check: a node that is up but not yet synced answers, and
	# refuses statements with 1047 (WSREP has not yet prepared node for
	# application use), which leaf retries.
	cat >"$dir/haproxy.cfg" <<-CFG
		global
		  maxconn 2000
		defaults
		  mode tcp
		  timeout connect 2s
		  timeout client 10m
		  timeout server 10m
		  retries 2
		  option redispatch
		listen galera
		  bind 127.0.0.1:$P_PROXY
		  balance leastconn
		  default-server inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
		  server node1 127.0.0.1:${P_CLIENT[1]} check
		  server node2 127.0.0.1:${P_CLIENT[2]} check
		  server node3 127.0.0.1:${P_CLIENT[3]} check
	CFG
	"$(find_bin haproxy)" -f "$dir/haproxy.cfg" -db </dev/null >>"$dir/haproxy.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/haproxy.pid"
	local i
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || { cat "$dir/haproxy.log" >&2; die "haproxy exited"; }
		port_free "$P_PROXY" || return 0
		sleep 0.1
	done
	die "haproxy does not listen on $P_PROXY"
}

start() {
	local dir
	mkdir -p "$1"
	dir=$(cd "$1" && pwd)
	ensure_installed
	local cluster
	cluster=$(cluster_dir "$dir")
	ports "$dir"
	local pw=""
	if [ -f "$dir/password" ]; then pw=$(cat "$dir/password"); fi
	[ -n "$pw" ] || pw=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	(umask 077 && echo "$pw" >"$dir/password")

	local i fresh=""
	for i in 1 2 3; do write_cnf "$cluster" "$i"; done
	if [ ! -d "$cluster/node1/data/mysql" ]; then
		fresh=1
		log "initialising $cluster/node1/data"
		"${as_server[@]}" "$(find_bin mariadb-install-db)" --no-defaults --user="$server_user" \
			--datadir="$cluster/node1/data" --auth-root-authentication-method=socket --skip-test-db \
			>"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; die "mariadb-install-db failed"; }
	fi
	if [ -z "$(running_nodes "$dir")" ]; then
		# No node runs: bootstrap from the one that may (after a clean
		# stop, any; Galera marks it in grastate.dat).
		local boot=1
		for i in 1 2 3; do
			if grep -q '^safe_to_bootstrap: 1' "$cluster/node$i/data/grastate.dat" 2>/dev/null; then boot=$i; break; fi
		done
		"${as_server[@]}" sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$cluster/node$boot/data/grastate.dat" 2>/dev/null || true
		start_node "$dir" "$cluster" "$boot" --wsrep-new-cluster
	fi
	if [ -n "$fresh" ] || [ ! -f "$dir/env" ]; then
		# Replicated to every node as they join (DDL and users by TOI).
		client "$cluster" 1 "
			CREATE DATABASE IF NOT EXISTS leaf;
			DROP USER IF EXISTS ''@'localhost';
			CREATE USER IF NOT EXISTS 'leaf'@'127.0.0.1' IDENTIFIED BY '$pw';
			GRANT ALL PRIVILEGES ON \`leaf%\`.* TO 'leaf'@'127.0.0.1' WITH GRANT OPTION;
			GRANT CREATE USER ON *.* TO 'leaf'@'127.0.0.1';
			CREATE USER IF NOT EXISTS 'leaf'@'localhost' IDENTIFIED BY '$pw';
			GRANT ALL PRIVILEGES ON \`leaf%\`.* TO 'leaf'@'localhost' WITH GRANT OPTION;
			GRANT CREATE USER ON *.* TO 'leaf'@'localhost';" || die "could not create the user leaf"
	fi
	for i in 1 2 3; do start_node "$dir" "$cluster" "$i"; done
	start_proxy "$dir" "$cluster"

	local size
	size=$(wsrep "$cluster" 1 wsrep_cluster_size)
	[ "$size" = 3 ] || die "the cluster has $size nodes, not 3"
	local nodes=""
	for i in 1 2 3; do nodes+="${nodes:+,}leaf:$pw@tcp(127.0.0.1:${P_CLIENT[i]})/leaf"; done
	{
		echo "LEAF_TEST_GALERA_DSN=leaf:$pw@tcp(127.0.0.1:$P_PROXY)/leaf"
		echo "LEAF_TEST_GALERA_NODES=$nodes"
		echo "LEAF_TEST_GALERA_DIR=$dir"
	} >"$dir/env.new"
	chmod 600 "$dir/env.new"
	mv "$dir/env.new" "$dir/env"
	log "ready: 3 nodes synced, HAProxy on 127.0.0.1:$P_PROXY (data $cluster)"
	cat "$dir/env"
}

stop_node() {
	local dir=$1 n=$2 pid
	[ -f "$dir/node$n.pid" ] || return 0
	pid=$(cat "$dir/node$n.pid")
	if is_mariadbd "$pid"; then
		stop_pid "$pid" 60 || log "node $n still running after 60s, killed"
		log "node $n stopped (pid $pid)"
	fi
	rm -f "$dir/node$n.pid"
}

stop() {
	local dir=$1 pid i
	if [ -f "$dir/haproxy.pid" ]; then
		pid=$(cat "$dir/haproxy.pid")
		if is_haproxy "$pid"; then stop_pid "$pid" 10 || true; fi
		rm -f "$dir/haproxy.pid"
	fi
	# One at a time, the last one last: it is then safe to bootstrap from.
	for i in 3 2 1; do stop_node "$dir" "$i"; done
	log "stopped"
}

destroy() {
	local dir=$1 c
	stop "$dir"
	if [ -f "$dir/cluster" ]; then
		c=$(cat "$dir/cluster")
		case "$c" in
		*/leaf-galera.* | */cluster.d) rm -rf "$c" ;;
		*) die "refusing to delete $c: not a cluster this script made" ;;
		esac
		rm -f "$dir/cluster"
	fi
	rm -f "$dir/env" "$dir/ports"
	log "destroyed"
}

crash() {
	local dir=$1 n=$2 pid
	pid=$(running_pid "$dir/node$n.pid" is_mariadbd)
	kill -KILL "$pid"
	wait_gone "$pid" 60 || die "node $n (pid $pid) still alive 60s after SIGKILL"
	rm -f "$dir/node$n.pid"
	log "node $n killed (pid $pid)"
}

restart() {
	local dir=$1 n=$2 cluster
	cluster=$(cat "$dir/cluster")
	ports "$dir"
	[ -n "$(running_nodes "$dir")" ] || die "no node runs: use start to bootstrap the cluster"
	# A state transfer can fail on a busy machine (the donor's rsync
	# times out); the node then exits, and a second try usually works.
	(start_node "$dir" "$cluster" "$n") || {
		log "node $n did not come back; trying once more"
		start_node "$dir" "$cluster" "$n"
	}
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
kill | restart)
	[ $# -eq 3 ] || usage
	case "$3" in 1 | 2 | 3) ;; *) usage ;; esac
	dir=$(cd "$2" && pwd)
	if [ "$1" = kill ]; then crash "$dir" "$3"; else restart "$dir" "$3"; fi
	;;
*) usage ;;
esac
