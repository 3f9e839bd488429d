#!/usr/bin/env bash
# A throwaway pgbouncer in transaction pooling mode, in front of the
# PostgreSQL of LEAF_TEST_POSTGRES_DSN (the one scripts/postgres.sh
# starts), listening on a free port of 127.0.0.1. No system service or
# configuration file is used or touched.
#
#   scripts/pgbouncer.sh start <dir>   start it (installing pgbouncer from Debian's
#                                      packages first when missing and run as root);
#                                      prints
#                                        LEAF_TEST_PGBOUNCER_DSN=postgres://leaf:<pw>@127.0.0.1:<port>/leaf?sslmode=disable
#                                      (the database, user and password of
#                                      LEAF_TEST_POSTGRES_DSN) and writes it to <dir>/dsn
#   scripts/pgbouncer.sh stop <dir>    stop it by the PID in <dir>/pgbouncer.pid
#
# pgbouncer refuses to run as root: run as root, it runs as the user
# postgres, its files in a directory of their own (named in <dir>/files).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log() { echo "pgbouncer.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { echo "usage: $0 start|stop <dir>" >&2; exit 2; }

as_server=()
if [ "$(id -u)" = 0 ]; then
	as_server=(setpriv --reuid=postgres --regid=postgres --init-groups --reset-env)
fi

find_pgbouncer() {
	command -v pgbouncer 2>/dev/null && return 0
	[ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer
}

is_pgbouncer() { [ -n "$1" ] && alive "$1" && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = pgbouncer ]; }

start() {
	local dir=$1
	[ -n "${LEAF_TEST_POSTGRES_DSN:-}" ] || die "LEAF_TEST_POSTGRES_DSN is not set: start PostgreSQL with scripts/postgres.sh first"
	if [ -f "$dir/pgbouncer.pid" ] && is_pgbouncer "$(cat "$dir/pgbouncer.pid")" && [ -f "$dir/dsn" ]; then
		echo "LEAF_TEST_PGBOUNCER_DSN=$(cat "$dir/dsn")"
		return 0
	fi
	if ! find_pgbouncer >/dev/null; then
		[ "$(id -u)" = 0 ] || die "pgbouncer not found: apt-get install pgbouncer, or run this as root"
		apt_install pgbouncer || die "apt-get install pgbouncer failed"
	fi
	# postgres://leaf:<pw>@127.0.0.1:<port>/<db>?...
	local rest user pw hostport db
	rest=${LEAF_TEST_POSTGRES_DSN#postgres://}
	user=${rest%%:*}
	pw=${rest#*:}
	pw=${pw%%@*}
	hostport=${rest#*@}
	hostport=${hostport%%/*}
	db=${rest#*/}
	db=${db%%\?*}
	local files
	if [ -f "$dir/files" ]; then files=$(cat "$dir/files"); else
		files=$(mktemp -d "${TMPDIR:-/tmp}/leaf-pgbouncer.XXXXXX")
		echo "$files" >"$dir/files"
	fi
	local port attempt pid
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		cat >"$files/pgbouncer.ini" <<-INI
			[databases]
			$db = host=${hostport%:*} port=${hostport##*:} dbname=$db
			[pgbouncer]
			listen_addr = 127.0.0.1
			listen_port = $port
			unix_socket_dir =
			auth_type = scram-sha-256
			auth_file = $files/users.txt
			pool_mode = transaction
			max_client_conn = 500
			default_pool_size = 20
			logfile = $files/pgbouncer.log
			pidfile =
		INI
		printf '"%s" "%s"\n' "$user" "$pw" >"$files/users.txt"
		if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$files"; fi
		chmod 700 "$files"
		chmod 600 "$files/users.txt"
		"${as_server[@]}" "$(find_pgbouncer)" "$files/pgbouncer.ini" </dev/null >>"$dir/pgbouncer.out" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/pgbouncer.pid"
		local i
		for ((i = 0; i < 50; i++)); do
			alive "$pid" || break
			port_free "$port" || break
			sleep 0.1
		done
		if alive "$pid" && ! port_free "$port"; then
			local dsn="postgres://$user:$pw@127.0.0.1:$port/$db?sslmode=disable"
			(umask 077 && echo "$dsn" >"$dir/dsn")
			log "ready (pid $pid, port $port, pool_mode transaction)"
			echo "LEAF_TEST_PGBOUNCER_DSN=$dsn"
			return 0
		fi
		kill -KILL "$pid" 2>/dev/null || true
		log "pgbouncer did not listen on $port (attempt $attempt)"
	done
	tail -n 20 "$files/pgbouncer.log" "$dir/pgbouncer.out" >&2 2>/dev/null || true
	die "pgbouncer could not be started"
}

stop() {
	local dir=$1 pid
	if [ -f "$dir/pgbouncer.pid" ]; then
		pid=$(cat "$dir/pgbouncer.pid")
		if is_pgbouncer "$pid"; then stop_pid "$pid" 20 || true; fi
		rm -f "$dir/pgbouncer.pid"
	fi
	if [ -f "$dir/files" ]; then
		case "$(cat "$dir/files")" in */leaf-pgbouncer.*) rm -rf "$(cat "$dir/files")" ;; esac
		rm -f "$dir/files"
	fi
	log "stopped"
}

[ $# -eq 2 ] || usage
mkdir -p "$2"
dir=$(cd "$2" && pwd)
case "$1" in
start) start "$dir" ;;
stop) stop "$dir" ;;
*) usage ;;
esac
