#!/usr/bin/env bash
# A throwaway MariaDB for tests: its own data directory, socket and pid file
# under <dir>, listening on a free port on 127.0.0.1. No system service or
# system configuration file is used or touched.
#
#   scripts/mariadb.sh start <dir> [port]
#                                    start it (installing mariadb-server from
#                                    Debian's packages first when missing and
#                                    run as root), on port (or $MARIADB_PORT)
#                                    when given, else a free one; prints
#                                    LEAF_TEST_MYSQL_DSN=leaf:<pw>@tcp(127.0.0.1:<port>)/leaf
#                                    and writes it to <dir>/dsn
#   scripts/mariadb.sh stop <dir>    stop it by the PID in <dir>/mariadb.pid and wait
#
# Faults, for outage tests (each acts on the PID in <dir>/mariadb.pid):
#
#   scripts/mariadb.sh kill <dir>    SIGKILL mariadbd (a crash) and wait until it is gone
#   scripts/mariadb.sh pause <dir>   SIGSTOP it: connections are still accepted by the
#                                    kernel but never answered, as a hung server
#   scripts/mariadb.sh resume <dir>  SIGCONT it
#
# start on a <dir> that was started before (and stopped or killed) reuses its
# data directory, password and port, so the DSN clients hold stays valid;
# only when that port is taken meanwhile does it pick another (and print the
# new DSN). A port given (argument or MARIADB_PORT) is used or start fails:
# it never moves elsewhere.
#
# The user "leaf" may create and drop databases named leaf*, which is what
# persist/mysql/mysqltest.DSN does: one fresh database per test; and create
# users and grant them privileges on those (mysqltest.User). Typical use:
#
#   eval "export $(scripts/mariadb.sh start /tmp/leaf-mariadb)"
#   go test -race ./persist/... ./e2e
#   scripts/mariadb.sh stop /tmp/leaf-mariadb && rm -rf /tmp/leaf-mariadb
#
# Environment: MARIADB_START_TIMEOUT (seconds to wait for readiness, 60);
# MARIADB_PORT (the port, when no argument gives one).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log() { echo "mariadb.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { echo "usage: $0 start <dir> [port] | stop|kill|pause|resume <dir>" >&2; exit 2; }

# find_bin NAME: the path of a MariaDB program; /usr/sbin is not always in
# a non-root PATH.
find_bin() {
	command -v "$1" 2>/dev/null && return 0
	local d
	for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
		if [ -x "$d/$1" ]; then echo "$d/$1"; return 0; fi
	done
	return 1
}

have_mariadb() {
	find_bin mariadbd >/dev/null && find_bin mariadb-install-db >/dev/null &&
		find_bin mariadb-admin >/dev/null && find_bin mariadb >/dev/null
}

ensure_installed() {
	have_mariadb && return 0
	[ "$(id -u)" = 0 ] || die "mariadbd not found: install mariadb-server (apt-get install mariadb-server) or run this as root"
	log "installing mariadb-server from Debian's packages"
	local rc=0
	apt_install mariadb-server mariadb-client || rc=$?
	[ "$rc" = 0 ] || die "apt-get install mariadb-server failed ($rc)"
	have_mariadb || die "mariadb-server installed but mariadbd not found"
}

# is_mariadbd PID: the process is alive and is a mariadbd (not a recycled PID).
is_mariadbd() {
	[ -n "$1" ] && alive "$1" &&
		case "$(cat "/proc/$1/comm" 2>/dev/null || ps -p "$1" -o comm= 2>/dev/null)" in
		mariadbd* | mysqld*) true ;;
		*) false ;;
		esac
}

start() {
	local dir want=${2:-}
	if [ -n "$want" ] && ! valid_port "$want"; then die "port '$want' is not a port number (1-65535)"; fi
	mkdir -p "$1"
	dir=$(cd "$1" && pwd)
	if [ -f "$dir/mariadb.pid" ] && is_mariadbd "$(cat "$dir/mariadb.pid")" && [ -f "$dir/dsn" ]; then
		log "already running (pid $(cat "$dir/mariadb.pid"))"
		echo "LEAF_TEST_MYSQL_DSN=$(cat "$dir/dsn")"
		return 0
	fi
	ensure_installed
	local mariadbd install_db admin client
	mariadbd=$(find_bin mariadbd)
	install_db=$(find_bin mariadb-install-db)
	admin=$(find_bin mariadb-admin)
	client=$(find_bin mariadb)

	local user_opt=()
	# As root, mariadbd refuses to start without --user; run it as root
	# rather than chown the directory to mysql, who may not reach it.
	if [ "$(id -u)" = 0 ]; then user_opt=(--user=root); fi

	local data="$dir/data"
	mkdir -p "$dir/tmp"
	if [ ! -d "$data/mysql" ]; then
		log "initialising $data"
		"$install_db" --no-defaults "${user_opt[@]}" --datadir="$data" \
			--auth-root-authentication-method=socket --skip-test-db \
			>"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; die "mariadb-install-db failed"; }
	fi

	# A restart keeps the DSN of the previous run: same password, and the
	# same port when it is still free.
	local pw="" prev_port=""
	if [ -f "$dir/dsn" ]; then
		local old
		old=$(cat "$dir/dsn")
		pw=${old#leaf:}
		pw=${pw%%@*}
		prev_port=$(sed -n 's/.*@tcp(127\.0\.0\.1:\([0-9]*\)).*/\1/p' "$dir/dsn")
		case "$pw" in *[!0-9a-f]* | "") pw="" ;; esac
	fi
	[ -n "$pw" ] || pw=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	# Run by the server at every start, before clients: the database, and
	# the user with its password. No --skip-grant-tables.
	cat >"$dir/init.sql" <<-SQL
		CREATE DATABASE IF NOT EXISTS leaf;
		DROP USER IF EXISTS ''@'localhost';
		CREATE USER IF NOT EXISTS 'leaf'@'127.0.0.1' IDENTIFIED BY '$pw';
		ALTER USER 'leaf'@'127.0.0.1' IDENTIFIED BY '$pw';
		GRANT ALL PRIVILEGES ON \`leaf%\`.* TO 'leaf'@'127.0.0.1' WITH GRANT OPTION;
		GRANT CREATE USER ON *.* TO 'leaf'@'127.0.0.1';
		CREATE USER IF NOT EXISTS 'leaf'@'localhost' IDENTIFIED BY '$pw';
		ALTER USER 'leaf'@'localhost' IDENTIFIED BY '$pw';
		GRANT ALL PRIVILEGES ON \`leaf%\`.* TO 'leaf'@'localhost' WITH GRANT OPTION;
		GRANT CREATE USER ON *.* TO 'leaf'@'localhost';
	SQL
	chmod 600 "$dir/init.sql"

	local timeout=${MARIADB_START_TIMEOUT:-60} attempt port pid ready
	for attempt in 1 2 3 4 5; do
		if [ -n "$want" ]; then
			# The caller's port or none: a recipe that names it must not
			# find the server elsewhere.
			[ "$attempt" = 1 ] && port_free "$want" || die "port $want on 127.0.0.1 is taken: choose another, or give none for a free one"
			port=$want
		elif [ "$attempt" = 1 ] && [ -n "$prev_port" ] && port_free "$prev_port"; then
			port=$prev_port
		else
			if [ "$attempt" = 1 ] && [ -n "$prev_port" ]; then
				log "port $prev_port of the previous run is taken: the DSN changes"
			fi
			port=$(free_port)
		fi
		log "starting mariadbd on 127.0.0.1:$port (attempt $attempt)"
		: >"$dir/error.log"
		"$mariadbd" --no-defaults "${user_opt[@]}" \
			--datadir="$data" --tmpdir="$dir/tmp" \
			--port="$port" --bind-address=127.0.0.1 --skip-name-resolve \
			--socket="$dir/mariadb.sock" --pid-file="$dir/mariadbd.pid" \
			--log-error="$dir/error.log" --init-file="$dir/init.sql" \
			--skip-log-bin --innodb-buffer-pool-size=64M --innodb-log-file-size=16M \
			--innodb-flush-log-at-trx-commit=2 --max-connections=500 \
			--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
			</dev/null >>"$dir/mariadbd.out" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/mariadb.pid"
		ready=""
		local deadline=$((SECONDS + timeout))
		while [ "$SECONDS" -lt "$deadline" ]; do
			if ! alive "$pid"; then break; fi
			# ping answers as soon as the server is up; the query proves
			# that init.sql ran and the password works.
			if MYSQL_PWD="$pw" "$admin" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -u leaf \
				--connect-timeout=2 ping >/dev/null 2>&1 &&
				MYSQL_PWD="$pw" "$client" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -u leaf \
					--connect-timeout=2 -e 'SELECT 1' leaf >/dev/null 2>&1; then
				ready=1
				break
			fi
			sleep 0.2
		done
		[ -n "$ready" ] && break
		if alive "$pid"; then
			kill -KILL "$pid" 2>/dev/null || true
			tail -n 30 "$dir/error.log" >&2 || true
			die "mariadbd not ready after ${timeout}s; log: $dir/error.log"
		fi
		if grep -qi 'address already in use' "$dir/error.log" "$dir/mariadbd.out" 2>/dev/null; then
			log "port $port was taken, trying another"
			continue
		fi
		tail -n 30 "$dir/error.log" >&2 || true
		die "mariadbd exited; log: $dir/error.log"
	done
	[ -n "$ready" ] || die "could not find a port mariadbd could bind"

	local dsn="leaf:$pw@tcp(127.0.0.1:$port)/leaf"
	(umask 077 && echo "$dsn" >"$dir/dsn")
	log "ready (pid $pid, port $port, data $data)"
	echo "LEAF_TEST_MYSQL_DSN=$dsn"
}

stop() {
	local dir="$1" pid
	if [ ! -f "$dir/mariadb.pid" ]; then
		log "not running (no $dir/mariadb.pid)"
		return 0
	fi
	pid=$(cat "$dir/mariadb.pid")
	if ! is_mariadbd "$pid"; then
		log "not running (pid $pid is gone)"
		rm -f "$dir/mariadb.pid"
		return 0
	fi
	stop_pid "$pid" 60 || log "still running after 60s, killed"
	rm -f "$dir/mariadb.pid"
	log "stopped (pid $pid)"
}

# crash DIR: SIGKILL, as a crash or an OOM kill would; the data directory
# and the DSN stay for the next start.
crash() {
	local pid
	pid=$(running_pid "$1/mariadb.pid" is_mariadbd)
	# A stopped process dies of SIGKILL too.
	kill -KILL "$pid"
	wait_gone "$pid" 30 || die "pid $pid still alive 30s after SIGKILL"
	rm -f "$1/mariadb.pid"
	log "killed (pid $pid)"
}

# signal DIR SIG: send SIG to the running mariadbd of DIR.
signal() {
	local pid
	pid=$(running_pid "$1/mariadb.pid" is_mariadbd)
	kill -"$2" "$pid"
	log "sent SIG$2 (pid $pid)"
}

[ $# -eq 2 ] || { [ $# -eq 3 ] && [ "$1" = start ]; } || usage
case "$1" in
start) start "$2" "${3:-${MARIADB_PORT:-}}" ;;
stop) stop "$2" ;;
kill) crash "$2" ;;
pause) signal "$2" STOP ;;
resume) signal "$2" CONT ;;
*) usage ;;
esac
