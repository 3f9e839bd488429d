#!/usr/bin/env bash
# A throwaway PostgreSQL for tests: its own cluster (initdb), listening on a
# free port on 127.0.0.1, its Unix socket in its own directory. No system
# service, cluster or configuration file is used or touched.
#
#   scripts/postgres.sh start <dir>    start it (installing Debian's postgresql
#                                      first when missing and run as root);
#                                      prints LEAF_TEST_POSTGRES_DSN=postgres://leaf:<pw>@127.0.0.1:<port>/leaf?sslmode=disable
#                                      and writes it to <dir>/dsn
#   scripts/postgres.sh stop <dir>     stop it (fast shutdown) by the PID in <dir>/postgres.pid and wait
#   scripts/postgres.sh destroy <dir>  stop it and delete its cluster
#
# An asynchronously replicated PostgreSQL, for the durability check's tests
# (a failover to such a replica can lose commits already acknowledged):
#
#   scripts/postgres.sh replica <dir> <primary-dir>
#                                      start a streaming replica of the server
#                                      started in <primary-dir> (pg_basebackup of
#                                      it, then a server of its own on a free
#                                      port); the primary keeps an empty
#                                      synchronous_standby_names, so its commits
#                                      wait for no standby. Waits until the
#                                      primary lists the replica in
#                                      pg_stat_replication, then prints
#                                        LEAF_TEST_POSTGRES_ASYNC_DSN=<the primary's DSN>
#                                        LEAF_TEST_POSTGRES_REPLICA_DSN=<the replica's DSN, read-only>
#                                      and writes the second to <dir>/dsn. stop,
#                                      destroy, kill, pause, resume and start act
#                                      on <dir> as on a primary's.
#
# Faults, for outage tests (each acts on the postmaster, by the PID in
# <dir>/postgres.pid, and on its children, the backends serving each
# connection, found by their parent PID):
#
#   scripts/postgres.sh kill <dir>     SIGKILL them all (a crash) and wait until they are gone
#   scripts/postgres.sh pause <dir>    SIGSTOP them: connections are accepted by the kernel
#                                      but never answered, as a hung server
#   scripts/postgres.sh resume <dir>   SIGCONT them
#
# PostgreSQL refuses to run as root. Run as root, the server runs as the
# user postgres (created by Debian's package), and its cluster lives in a
# directory of its own that postgres owns, made with mktemp under $TMPDIR
# (or /tmp) and named in <dir>/cluster, because postgres may not reach
# <dir> itself; destroy deletes it. Run as another user, the server runs as
# that user with its cluster in <dir>/cluster.d.
#
# start on a <dir> that was started before (and stopped or killed) reuses its
# cluster, password and port, so the DSN clients hold stays valid; only when
# that port is taken meanwhile does it pick another (and print the new DSN).
#
# The role "leaf" may create databases and roles, and end other roles'
# sessions (pg_signal_backend), but is not a superuser: what
# persist/postgres/postgrestest needs for one fresh database per test, and
# roles with the grants of an application.
# Typical use:
#
#   eval "export $(scripts/postgres.sh start /tmp/leaf-postgres)"
#   go test -race ./persist/postgres/... ./e2e
#   scripts/postgres.sh destroy /tmp/leaf-postgres && rm -rf /tmp/leaf-postgres
#
# Environment: POSTGRES_START_TIMEOUT (seconds to wait for readiness, 60).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log() { echo "postgres.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { echo "usage: $0 start|stop|destroy|kill|pause|resume <dir> | replica <dir> <primary-dir>" >&2; exit 2; }

# bindir: the directory of the newest installed server's programs (Debian
# keeps them in /usr/lib/postgresql/<major>/bin, off the PATH).
bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	if [ -n "$d" ] && [ -x "$d/postgres" ] && [ -x "$d/initdb" ]; then
		echo "$d"
		return 0
	fi
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir)
		if [ -x "$d/postgres" ] && [ -x "$d/initdb" ]; then
			echo "$d"
			return 0
		fi
	fi
	return 1
}

ensure_installed() {
	bindir >/dev/null && command -v psql >/dev/null && return 0
	[ "$(id -u)" = 0 ] || die "postgres not found: install postgresql (apt-get install postgresql) or run this as root"
	log "installing postgresql from Debian's packages"
	local rc=0
	apt_install postgresql postgresql-client || rc=$?
	[ "$rc" = 0 ] || die "apt-get install postgresql failed ($rc)"
	bindir >/dev/null || die "postgresql installed but its programs were not found"
}

# as_server: the command prefix that runs a program as the user the server
# runs as (see above). setpriv execs it: a background job's $! is its PID.
as_server=()
if [ "$(id -u)" = 0 ]; then
	as_server=(setpriv --reuid=postgres --regid=postgres --init-groups --reset-env)
fi

# is_postgres PID: the process is alive and is a postgres (not a recycled PID).
is_postgres() {
	[ -n "$1" ] && alive "$1" &&
		case "$(cat "/proc/$1/comm" 2>/dev/null || ps -p "$1" -o comm= 2>/dev/null)" in
		postgres* | postmaster*) true ;;
		*) false ;;
		esac
}

# children PID: the PIDs of the postmaster's children (each backend makes
# itself a process group of its own, so the group is not the unit).
children() { ps -o pid= --ppid "$1" 2>/dev/null || true; }

# any_postgres PID...: some of the processes is a live postgres (not a
# zombie, nor a PID another program took meanwhile).
any_postgres() {
	local p
	for p in "$@"; do
		is_postgres "$p" && return 0
	done
	return 1
}

# clear_lock CLUSTER PID: remove the lock files of a postmaster PID that is
# dead, even as a zombie not yet reaped by its new parent (the server's own
# check takes a zombie for a running postmaster): the data directory's
# postmaster.pid and the Unix socket's lock, when they name PID.
clear_lock() {
	local lock
	alive "$2" && return 0
	for lock in "$1/data/postmaster.pid" "$1"/sock/.s.PGSQL.*.lock; do
		if [ -f "$lock" ] && [ "$(head -n 1 "$lock")" = "$2" ]; then
			rm -f "$lock"
		fi
	done
}

# cluster_dir DIR: where the cluster of DIR lives (made on first use).
cluster_dir() {
	local dir=$1 c
	if [ -f "$dir/cluster" ] && c=$(cat "$dir/cluster") && [ -d "$c" ]; then
		echo "$c"
		return 0
	fi
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || die "no user postgres (Debian's postgresql package creates it)"
		c=$(mktemp -d "${TMPDIR:-/tmp}/leaf-postgres.XXXXXX")
		chown postgres:postgres "$c"
		chmod 700 "$c"
	else
		c="$dir/cluster.d"
		mkdir -p -m 700 "$c"
	fi
	echo "$c" >"$dir/cluster"
	echo "$c"
}

# psql_admin CLUSTER PORT SQL [ARG...]: run SQL as the cluster's superuser,
# over its Unix socket (peer authentication: it has no password).
psql_admin() {
	local cluster=$1 port=$2 sql=$3 bin
	shift 3
	bin=$(bindir)
	"${as_server[@]}" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$cluster/sock" -p "$port" \
		-U postgres -d postgres "$@" -c "$sql"
}

start() {
	local dir
	mkdir -p "$1"
	dir=$(cd "$1" && pwd)
	if [ -f "$dir/postgres.pid" ] && is_postgres "$(cat "$dir/postgres.pid")" && [ -f "$dir/dsn" ]; then
		log "already running (pid $(cat "$dir/postgres.pid"))"
		echo "LEAF_TEST_POSTGRES_DSN=$(cat "$dir/dsn")"
		return 0
	fi
	ensure_installed
	local bin cluster
	bin=$(bindir)
	cluster=$(cluster_dir "$dir")
	if [ ! -f "$cluster/data/PG_VERSION" ]; then
		log "initialising $cluster/data"
		# C.UTF-8 where the system has it: UTF-8 text, compared as bytes.
		local locale=C
		if locale -a 2>/dev/null | grep -qix 'c.utf-\?8'; then locale=C.UTF-8; fi
		"${as_server[@]}" "$bin/initdb" -D "$cluster/data" -U postgres -E UTF8 --locale="$locale" \
			--auth-local=peer --auth-host=scram-sha-256 --no-sync >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; die "initdb failed"; }
		"${as_server[@]}" mkdir -m 700 "$cluster/sock"
	fi

	# A restart keeps the DSN of the previous run: same password, and the
	# same port when it is still free.
	local pw="" prev_port=""
	if [ -f "$dir/dsn" ]; then
		pw=$(sed -n 's|^postgres://leaf:\([0-9a-f]*\)@.*|\1|p' "$dir/dsn")
		prev_port=$(sed -n 's|.*@127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$dir/dsn")
	fi
	[ -n "$pw" ] || pw=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

	if [ -f "$cluster/data/postmaster.pid" ]; then
		clear_lock "$cluster" "$(head -n 1 "$cluster/data/postmaster.pid")"
	fi
	local timeout=${POSTGRES_START_TIMEOUT:-60} attempt port pid ready
	for attempt in 1 2 3 4 5; do
		if [ "$attempt" = 1 ] && [ -n "$prev_port" ] && port_free "$prev_port"; then
			port=$prev_port
		else
			if [ "$attempt" = 1 ] && [ -n "$prev_port" ]; then
				log "port $prev_port of the previous run is taken: the DSN changes"
			fi
			port=$(free_port)
		fi
		log "starting postgres on 127.0.0.1:$port (attempt $attempt)"
		: >"$dir/postgres.log"
		# fsync off: a crash of the server (SIGKILL) keeps every commit,
		# only a crash of the machine would not. synchronous_commit stays
		# on, so a commit is written before it is acknowledged.
		"${as_server[@]}" "$bin/postgres" -D "$cluster/data" \
			-c listen_addresses=127.0.0.1 -c port="$port" \
			-c unix_socket_directories="$cluster/sock" \
			-c max_connections=500 -c shared_buffers=32MB \
			-c fsync=off -c full_page_writes=off \
			-c log_min_messages=warning -c log_connections=off \
			</dev/null >>"$dir/postgres.log" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/postgres.pid"
		ready=""
		local deadline=$((SECONDS + timeout))
		while [ "$SECONDS" -lt "$deadline" ]; do
			if ! alive "$pid"; then break; fi
			if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 2 2>/dev/null; then
				ready=1
				break
			fi
			sleep 0.2
		done
		[ -n "$ready" ] && break
		if alive "$pid"; then
			kill -KILL "$pid" $(children "$pid") 2>/dev/null || true
			tail -n 30 "$dir/postgres.log" >&2 || true
			die "postgres not ready after ${timeout}s; log: $dir/postgres.log"
		fi
		if grep -qi 'could not bind\|address already in use' "$dir/postgres.log" 2>/dev/null; then
			log "port $port was taken, trying another"
			continue
		fi
		tail -n 30 "$dir/postgres.log" >&2 || true
		die "postgres exited; log: $dir/postgres.log"
	done
	[ -n "$ready" ] || die "could not find a port postgres could bind"

	# Every start, before clients: the role and its password, its database
	# (a replica has them from its primary, and takes no writes).
	[ -f "$cluster/data/standby.signal" ] || create_role "$cluster" "$port" "$pw"
	PGPASSWORD=$pw PGCONNECT_TIMEOUT=5 "$bin/psql" -X -q -h 127.0.0.1 -p "$port" -U leaf -d leaf \
		-c 'SELECT 1' >/dev/null || die "the role leaf cannot log in"

	local dsn="postgres://leaf:$pw@127.0.0.1:$port/leaf?sslmode=disable"
	(umask 077 && echo "$dsn" >"$dir/dsn")
	log "ready (pid $pid, port $port, cluster $cluster)"
	echo "LEAF_TEST_POSTGRES_DSN=$dsn"
}

# create_role CLUSTER PORT PASSWORD: the role leaf with PASSWORD, and its
# database.
create_role() {
	local cluster=$1 port=$2 pw=$3
	psql_admin "$cluster" "$port" "DO \$\$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'leaf') THEN
				CREATE ROLE leaf LOGIN CREATEDB CREATEROLE;
			END IF;
		END \$\$;
		ALTER ROLE leaf PASSWORD '$pw';
		GRANT pg_signal_backend TO leaf;" >/dev/null ||
		die "could not create the role leaf"
	if ! psql_admin "$cluster" "$port" "SELECT 1 FROM pg_database WHERE datname = 'leaf'" -t | grep -q 1; then
		psql_admin "$cluster" "$port" "CREATE DATABASE leaf OWNER leaf" >/dev/null ||
			die "could not create the database leaf"
	fi
}

# replica DIR PRIMARY-DIR: an asynchronous streaming replica of the server
# of PRIMARY-DIR (see the top).
replica() {
	local dir pdir
	mkdir -p "$1"
	dir=$(cd "$1" && pwd)
	pdir=$(cd "$2" && pwd)
	[ -f "$pdir/dsn" ] && [ -f "$pdir/cluster" ] && [ -f "$pdir/postgres.pid" ] &&
		is_postgres "$(cat "$pdir/postgres.pid")" || die "no server runs in $pdir: start it first"
	local pdsn pcluster pport pw bin cluster
	pdsn=$(cat "$pdir/dsn")
	pcluster=$(cat "$pdir/cluster")
	pport=$(sed -n 's|.*@127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$pdir/dsn")
	pw=$(sed -n 's|^postgres://leaf:\([0-9a-f]*\)@.*|\1|p' "$pdir/dsn")
	bin=$(bindir)
	cluster=$(cluster_dir "$dir")
	if [ ! -f "$cluster/data/PG_VERSION" ]; then
		# The role the replica streams as; initdb's pg_hba.conf lets it
		# in from 127.0.0.1 with its password.
		psql_admin "$pcluster" "$pport" "DO \$\$ BEGIN
				IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'replicator') THEN
					CREATE ROLE replicator LOGIN REPLICATION;
				END IF;
			END \$\$;
			ALTER ROLE replicator PASSWORD '$pw';" >/dev/null || die "could not create the role replicator"
		log "copying the primary (pg_basebackup) into $cluster/data"
		# -R: standby.signal, and primary_conninfo (with the password)
		# in postgresql.auto.conf; application_name names the replica
		# in the primary's pg_stat_replication.
		"${as_server[@]}" env PGPASSWORD="$pw" "$bin/pg_basebackup" \
			-d "host=127.0.0.1 port=$pport user=replicator application_name=leaf_replica" \
			-D "$cluster/data" -R -X stream -c fast --no-sync >"$dir/basebackup.log" 2>&1 ||
			{ cat "$dir/basebackup.log" >&2; die "pg_basebackup failed"; }
		"${as_server[@]}" mkdir -p -m 700 "$cluster/sock"
		# start reads the password (and a port to try) from here.
		(umask 077 && echo "postgres://leaf:$pw@127.0.0.1:$(free_port)/leaf?sslmode=disable" >"$dir/dsn")
	fi
	start "$dir" >/dev/null
	local deadline=$((SECONDS + ${POSTGRES_START_TIMEOUT:-60})) n
	while :; do
		n=$(psql_admin "$pcluster" "$pport" \
			"SELECT count(*) FROM pg_stat_replication WHERE application_name = 'leaf_replica' AND state = 'streaming'" -t -A) || n=0
		[ "$n" -ge 1 ] && break
		[ "$SECONDS" -lt "$deadline" ] || die "the replica does not stream from the primary; log: $dir/postgres.log"
		sleep 0.2
	done
	log "replica streaming from the primary on port $pport"
	echo "LEAF_TEST_POSTGRES_ASYNC_DSN=$pdsn"
	echo "LEAF_TEST_POSTGRES_REPLICA_DSN=$(cat "$dir/dsn")"
}

stop() {
	local dir="$1" pid kids
	if [ ! -f "$dir/postgres.pid" ]; then
		log "not running (no $dir/postgres.pid)"
		return 0
	fi
	pid=$(cat "$dir/postgres.pid")
	if ! is_postgres "$pid"; then
		log "not running (pid $pid is gone)"
		rm -f "$dir/postgres.pid"
		return 0
	fi
	kids=$(children "$pid")
	# SIGINT: fast shutdown (sessions are ended, nothing is waited for).
	kill -INT "$pid"
	# A paused server (pause) acts on it only once continued.
	kill -CONT "$pid" $kids 2>/dev/null || true
	local deadline=$((SECONDS + 60))
	# shellcheck disable=SC2086
	while any_postgres "$pid" $kids && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
	# shellcheck disable=SC2086
	if any_postgres "$pid" $kids; then
		log "still running after 60s, killing"
		kill -KILL "$pid" $(children "$pid") 2>/dev/null || true
		deadline=$((SECONDS + 10))
		while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
	fi
	rm -f "$dir/postgres.pid"
	log "stopped (pid $pid)"
}

destroy() {
	local dir="$1" c
	stop "$dir"
	if [ -f "$dir/cluster" ]; then
		c=$(cat "$dir/cluster")
		case "$c" in
		*/leaf-postgres.* | */cluster.d) rm -rf "$c" ;;
		*) die "refusing to delete $c: not a cluster this script made" ;;
		esac
		rm -f "$dir/cluster"
	fi
	log "destroyed"
}

# crash DIR: SIGKILL the postmaster and its backends, as a crash or an OOM
# kill would; the cluster and the DSN stay for the next start.
crash() {
	local pid kids
	pid=$(running_pid "$1/postgres.pid" is_postgres)
	# Stopped first, the postmaster forks no backend meanwhile.
	kill -STOP "$pid"
	kids=$(children "$pid")
	# shellcheck disable=SC2086
	kill -KILL "$pid" $kids 2>/dev/null || true
	# A process in uninterruptible sleep (I/O on a busy machine) dies once
	# it wakes. One check decides each round: a process may exit between
	# two.
	local deadline=$((SECONDS + 120)) p
	# shellcheck disable=SC2086
	while any_postgres "$pid" $kids; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			for p in "$pid" $kids; do
				is_postgres "$p" && log "pid $p: $(cat "/proc/$p/stat" 2>/dev/null)"
			done
			die "pid $pid or its backends still alive 120s after SIGKILL"
		fi
		sleep 0.05
	done
	clear_lock "$(cat "$1/cluster")" "$pid"
	rm -f "$1/postgres.pid"
	log "killed (pid $pid and its backends)"
}

# pause DIR: SIGSTOP the postmaster, then its backends (none is forked
# meanwhile). resume DIR: SIGCONT them.
pause() {
	local pid
	pid=$(running_pid "$1/postgres.pid" is_postgres)
	kill -STOP "$pid"
	# shellcheck disable=SC2046
	kill -STOP $(children "$pid") 2>/dev/null || true
	log "sent SIGSTOP (pid $pid and its backends)"
}

resume() {
	local pid
	pid=$(running_pid "$1/postgres.pid" is_postgres)
	# shellcheck disable=SC2046
	kill -CONT $(children "$pid") 2>/dev/null || true
	kill -CONT "$pid"
	log "sent SIGCONT (pid $pid and its backends)"
}

if [ "${1:-}" = replica ]; then
	[ $# -eq 3 ] || usage
	replica "$2" "$3"
	exit 0
fi
[ $# -eq 2 ] || usage
case "$1" in
start) start "$2" ;;
stop) stop "$2" ;;
destroy) destroy "$2" ;;
kill) crash "$2" ;;
pause) pause "$2" ;;
resume) resume "$2" ;;
*) usage ;;
esac
