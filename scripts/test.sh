#!/usr/bin/env bash
# make test: formatting, vet, every Go test under -race (each package's, and
# e2e/'s, which drive the built binary) against a real SQLite file, a
# throwaway MariaDB, a throwaway PostgreSQL, a throwaway three-member
# etcd cluster, a throwaway three-node MariaDB Galera cluster behind
# HAProxy, a throwaway three-node PostgreSQL cluster under Patroni (on
# that etcd) and pgbouncer in transaction mode before the PostgreSQL, then
# the redis-cli / redis-benchmark smoke test against a
# freshly built binary. Installs what it needs from Debian's packages when
# run as root (redis-tools, redis-server, mariadb-server, postgresql,
# etcd-server, galera-4, rsync, haproxy, patroni, pgbouncer, chromium,
# prometheus-redis-exporter, and the Redis clients of other languages:
# Debian's and npm's).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...

need_pkgs redis-cli redis-tools
need_pkgs redis-server redis-server
# The status page's test renders it in headless Chromium; without it that
# test skips (and fails under CI=true).
need_pkgs chromium chromium || echo "no chromium: the status page's browser test will skip" >&2
# deploy/'s tests check the systemd unit with systemd-analyze.
need_pkgs systemd-analyze systemd || echo "no systemd-analyze: the systemd unit's tests will skip" >&2
# The monitoring tests scrape leaf with Debian's prometheus-redis-exporter
# (e2e/monitoring_test.go); without it they skip (and fail under CI=true).
# apt_install keeps its service from starting: the tests run their own.
need_pkgs prometheus-redis-exporter prometheus-redis-exporter ||
	echo "no prometheus-redis-exporter: the exporter's tests will skip" >&2

work=$(mktemp -d)
# etcd's members sync every write to disk: on a memory file system the
# tests do not wait on the disk.
etcd_dir=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
cleanup() {
	if [ -n "${galera_pid:-}" ]; then wait "$galera_pid" 2>/dev/null || true; fi
	scripts/galera.sh destroy "$work/galera" >/dev/null 2>&1 || true
	scripts/patroni.sh destroy "$work/patroni" >/dev/null 2>&1 || true
	scripts/pgbouncer.sh stop "$work/pgbouncer" >/dev/null 2>&1 || true
	scripts/mariadb.sh stop "$work/mariadb" >/dev/null 2>&1 || true
	scripts/etcd.sh stop "$etcd_dir" >/dev/null 2>&1 || true
	scripts/postgres.sh destroy "$work/postgres" >/dev/null 2>&1 || true
	scripts/postgres.sh destroy "$work/pg-replica" >/dev/null 2>&1 || true
	scripts/postgres.sh destroy "$work/pg-primary" >/dev/null 2>&1 || true
	rm -rf "$work" "$etcd_dir"
}
trap cleanup EXIT

# The Galera cluster starts in the background (its nodes join one after
# the other, a state transfer each) while the other servers start; its
# packages are installed first, so that apt runs once at a time.
galera_pid=""
if scripts/galera.sh install; then
	scripts/galera.sh start "$work/galera" >"$work/galera.env" 2>"$work/galera.log" &
	galera_pid=$!
else
	echo "no Galera could be installed: Galera tests will skip (and fail under CI=true)" >&2
fi

if dsn=$(scripts/mariadb.sh start "$work/mariadb"); then
	export "${dsn?}"
else
	echo "no MariaDB could be started: MySQL tests will skip (and fail under CI=true)" >&2
fi
if endpoints=$(scripts/etcd.sh start "$etcd_dir"); then
	export "${endpoints?}"
else
	echo "no etcd cluster could be started: etcd tests will skip (and fail under CI=true)" >&2
fi
if dsn=$(scripts/postgres.sh start "$work/postgres"); then
	export "${dsn?}"
else
	echo "no PostgreSQL could be started: PostgreSQL tests will skip (and fail under CI=true)" >&2
fi

# A second PostgreSQL with an asynchronous streaming replica, for the
# durability check's warning (e2e/durability_test.go): the first one stays
# a single server.
if [ -n "${LEAF_TEST_POSTGRES_DSN:-}" ] && scripts/postgres.sh start "$work/pg-primary" >/dev/null &&
	replica=$(scripts/postgres.sh replica "$work/pg-replica" "$work/pg-primary"); then
	while read -r line; do export "${line?}"; done <<<"$replica"
else
	echo "no replicated PostgreSQL could be started: its durability test will skip (and fail under CI=true)" >&2
fi

# The Redis clients of other languages that e2e/clients_test.go runs the
# counter idioms through: redis-py, ruby-redis, phpredis and Perl Redis
# from Debian's packages; ioredis and node-redis from npm, at the versions
# e2e/testdata/clients/package.json pins, into the work directory.
if ! { /usr/bin/python3 -c 'import redis' && ruby -e 'require "redis"' &&
	php -r 'exit(class_exists("Redis") ? 0 : 1);' && perl -MRedis -e 1; } >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "installing the Redis clients of Python, Ruby, PHP and Perl from Debian's packages" >&2
		apt_install python3-redis ruby-redis php-cli php-redis libredis-perl ||
			echo "the clients could not be installed: their e2e test will skip (and fail under CI=true)" >&2
	else
		echo "install python3-redis ruby-redis php-cli php-redis libredis-perl for the clients' e2e test" >&2
	fi
fi
if command -v npm >/dev/null 2>&1 && mkdir -p "$work/npm" &&
	cp e2e/testdata/clients/package.json "$work/npm/" &&
	(cd "$work/npm" && npm install --no-audit --no-fund --no-package-lock --silent >&2); then
	export LEAF_TEST_NODE_MODULES="$work/npm/node_modules"
else
	echo "no npm, or npm install failed: the Node.js clients' e2e test will skip (and fail under CI=true)" >&2
fi

if [ -n "${LEAF_TEST_POSTGRES_DSN:-}" ]; then
	if dsn=$(scripts/pgbouncer.sh start "$work/pgbouncer"); then
		export "${dsn?}"
	else
		echo "no pgbouncer could be started: pgbouncer tests will skip (and fail under CI=true)" >&2
	fi
fi

# PostgreSQL under Patroni keeps its leader key in the etcd cluster above.
if [ -n "${LEAF_TEST_ETCD_ENDPOINTS:-}" ] && scripts/patroni.sh install &&
	scripts/patroni.sh start "$work/patroni" >"$work/patroni.env" 2>"$work/patroni.log"; then
	while read -r line; do export "${line?}"; done <"$work/patroni.env"
else
	tail -n 30 "$work/patroni.log" >&2 2>/dev/null || true
	echo "no Patroni cluster could be started: Patroni tests will skip (and fail under CI=true)" >&2
fi

if [ -n "$galera_pid" ]; then
	if wait "$galera_pid"; then
		while read -r line; do export "${line?}"; done <"$work/galera.env"
	else
		cat "$work/galera.log" >&2
		echo "no Galera cluster could be started: Galera tests will skip (and fail under CI=true)" >&2
	fi
	galera_pid=""
fi

# e2e's tests mostly wait (leases running out, servers restarting, other
# processes answering): at least four run side by side, where go test's
# default is one per core.
parallel=$(nproc)
if [ "$parallel" -lt 4 ]; then parallel=4; fi
go test -race -count=1 -timeout 40m -parallel "$parallel" ./...

# Every fuzz target for a short fixed time (FUZZTIME), beyond its checked-in
# seed corpus (testdata/fuzz/), which the plain run above already replays.
# Go 1.26's fuzzing coordinator can fail a run as its time ends with
# "context deadline exceeded" and no failing input, a race of its own
# (go.dev/issue/75804, fixed in Go 1.27) seen on busy machines: such a run
# is run again, once. A failing input always fails at once.
fuzztime=${FUZZTIME:-10s}
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
	pkg=./$(dirname "${file#./}")
	for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
		for attempt in 1 2; do
			echo "fuzz $pkg $target ($fuzztime)"
			go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$work/fuzz.log" 2>&1 && break
			if [ "$attempt" = 1 ] && grep -q '^    context deadline exceeded$' "$work/fuzz.log" &&
				! grep -q '^Failing input written to' "$work/fuzz.log"; then
				echo "fuzz $target: the coordinator's end-of-run race (go.dev/issue/75804), no failing input: once more"
				continue
			fi
			cat "$work/fuzz.log" >&2
			exit 1
		done
	done
done

scripts/smoke.sh

# The container image (Containerfile), built once and run with podman:
# installed from Debian's packages when missing; skipped, saying why, where
# no container runtime works (under CI=true only where podman cannot be
# installed).
scripts/image-test.sh

echo "make test: all passed"
