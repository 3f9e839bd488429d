#!/usr/bin/env bash
# make bench: leaf's benchmarks.
#
#  1. The Go benchmarks: the allocator's hot path next to a bare atomic add
#     and the start-up with 100,000 tags (segment/), a connection's turn of
#     INCRs without the kernel (resp/), the server path of INCR alone and
#     through go-redis pipelines, and one client's INCR latency (p50, p99)
#     beside 1,500 idle connections (server/), all with allocations;
#     package client's Next against one INCR per ID over the wire to the
#     same leaf (client/); INCR on a Snowflake tag against INCR on a
#     segment tag over the wire, alternating, with the median ratio
#     (server/); Take, the store's transaction per segment, on SQLite,
#     MariaDB, PostgreSQL and a three-member etcd cluster (persist/*/).
#  2. redis-benchmark INCR on one key against leaf (built with
#     CGO_ENABLED=0, on a fresh SQLite file), on a segment tag and on a
#     Snowflake tag of the same server, and against a redis-server 7
#     (--save '' --appendonly no), on free loopback ports of this machine,
#     with -c 50 at -P 1 and -P 16. Every key starts at 10^18, so all
#     replies are 19 digits long, as Snowflake IDs are. Rounds rotate the
#     order of the runs, so drift on a shared machine hits all of them;
#     the table shows the medians of requests per second, of p99 latency
#     and of the CPU time each server spent per million INCRs (user and
#     system, read from /proc/PID/stat before and after each run), and
#     the ratios leaf/redis; a line per depth compares Snowflake INCR
#     with segment INCR, and one per leaf tag and depth gives the median
#     of the rate ratios leaf/redis within each round.
#  3. A distant database: redis-benchmark -c 50 -P 1, 300,000 INCRs of one
#     tag that was idle (created and used once by one INCR), against leaf
#     on a throwaway MariaDB and a throwaway PostgreSQL, first directly,
#     then through a proxy that delays every byte 50 ms each way (internal/cmd/delayproxy, built here): both
#     rates, their ratio, the max and p99 latencies, and the loads a
#     request waited for (INFO leaf waited_loads), per database.
#
# Everything it starts it stops by PID. Installs redis-server and
# redis-tools from Debian's packages when missing (as root).
#
# Environment:
#   ROUNDS=5             rounds per pipeline depth
#   CLIENTS=50           redis-benchmark -c
#   PIPELINES="1 16"     redis-benchmark -P values
#   SECONDS_PER_RUN=2    target length of one redis-benchmark run (the
#                        request count is sized from the warm-up's rate)
#   LEAF_GOMAXPROCS=     empty: one leaf with Go's default (the core
#                        count); else one leaf per value, e.g. "1 2"
#   GO_BENCH=1           0 skips the Go benchmarks
#   BENCHTIME=1s         go test -benchtime
#   SLOWDB=1             0 skips the distant database (3.)
#   SLOWDB_ONLY=0        1 runs the distant database (3.) alone
#   SLOWDB_DELAY=50ms    its delay each way
#   SLOWDB_REQUESTS=300000  its INCRs per run
#   SLOWDB_POSTGRES=1    0 runs it on MariaDB alone
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ROUNDS=${ROUNDS:-5}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
LEAF_GOMAXPROCS=${LEAF_GOMAXPROCS:-}
GO_BENCH=${GO_BENCH:-1}
BENCHTIME=${BENCHTIME:-1s}
SLOWDB=${SLOWDB:-1}
SLOWDB_ONLY=${SLOWDB_ONLY:-0}
SLOWDB_DELAY=${SLOWDB_DELAY:-50ms}
SLOWDB_REQUESTS=${SLOWDB_REQUESTS:-300000}
SLOWDB_POSTGRES=${SLOWDB_POSTGRES:-1}
[ "$SLOWDB_ONLY" != 1 ] || GO_BENCH=0

need_pkgs redis-benchmark redis-tools
need_pkgs redis-server redis-server

work=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//')
echo "== $(nproc) cores (${cpu:-unknown CPU}), $(go version | cut -d' ' -f3)"

if [ "$GO_BENCH" != 0 ]; then
	echo
	echo "== Go benchmarks"
	go test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" ./segment/ | tee "$work/gobench"
	go test -run '^$' -bench 'BenchmarkConnIncr' -benchmem -benchtime "$BENCHTIME" ./resp/ | tee -a "$work/gobench"
	go test -run '^$' -bench 'BenchmarkDispatchIncr|BenchmarkServerIncr|BenchmarkIncrWith1500IdleConns' -benchmem \
		-benchtime "$BENCHTIME" ./server/ | tee -a "$work/gobench"
	awk '/^BenchmarkNext\/atomic.Int64.Add/ { a = $3 } /^BenchmarkNext\/Tag.Next-/ { t = $3 }
		END { if (a > 0 && t > 0) printf "Tag.Next: %.2fx the cost of a bare atomic add\n", t / a }' "$work/gobench"
	# A pipeline of 1,000 INCRs of new tags, loads grouped against one
	# transaction per tag; 100,000 existing tags' first INCRs after a
	# restart, through pipelines of 1,000 (SQLite).
	go test -run '^$' -bench 'BenchmarkNewTagsPipeline|BenchmarkRestart100kTags' -benchmem -benchtime 1x \
		./server/ | tee -a "$work/gobench"
	awk '/^BenchmarkNewTagsPipeline\// { split($1, k, "/"); sub(/-[0-9]+$/, "", k[2]); ns[k[2]] = $3 }
		END { if (ns["grouped"] > 0) printf "1,000 new tags in one pipeline: grouped loads %.1fx faster than one transaction per tag\n",
			ns["one-per-transaction"] / ns["grouped"] }' "$work/gobench"
	go test -run '^$' -bench 'BenchmarkIDs' -benchmem -benchtime "$BENCHTIME" ./client/ | tee -a "$work/gobench"
	awk '/^BenchmarkIDs\// { split($1, k, "/"); sub(/-[0-9]+$/, "", k[3]); ns[k[2] "/" k[3]] = $3 }
		END { split("serial parallel", modes, " "); for (j = 1; j <= 2; j++) { m = modes[j]
			if (ns["Next/" m] > 0 && ns["INCR/" m] > 0)
				printf "client Next (%s): %.0fx the rate of one INCR per ID\n", m, ns["INCR/" m] / ns["Next/" m] } }' "$work/gobench"
	# Snowflake INCR against segment INCR on one server, over the wire, the
	# two modes alternating for ten rounds, each round starting with the
	# other: the median ratio of the rates.
	go test -run '^$' -bench 'BenchmarkSnowflakeIncr' -benchmem -benchtime "$BENCHTIME" ./server/ | tee -a "$work/gobench"
	awk '/^BenchmarkSnowflakeIncr\// {
			split($1, k, "/"); sub(/^round=/, "", k[2]); sub(/^mode=/, "", k[3]); sub(/-[0-9]+$/, "", k[4])
			ns[k[4] "," k[2] "," k[3]] = $3; kinds[k[4]] = 1; rounds[k[2]] = 1
		}
		END {
			for (kind in kinds) {
				n = 0
				for (r in rounds) {
					s = ns[kind "," r ",segment"]; f = ns[kind "," r ",snowflake"]
					if (s > 0 && f > 0) ratio[++n] = s / f
				}
				if (n == 0) continue
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ratio[j] < ratio[i]) { t = ratio[i]; ratio[i] = ratio[j]; ratio[j] = t }
				med = (n % 2) ? ratio[(n + 1) / 2] : (ratio[n / 2] + ratio[n / 2 + 1]) / 2
				printf "Snowflake INCR (%s): %.2fx the rate of segment INCR (median of %d rounds, min %.2fx, max %.2fx)\n", kind, med, n, ratio[1], ratio[n]
			}
		}' "$work/gobench"
fi

# Take, the one store transaction per segment, on each backend side by
# side: a SQLite file, a throwaway MariaDB, a throwaway PostgreSQL and a
# throwaway three-member etcd cluster (data on disk, as in production),
# each stopped by PID. One package at a time (-p 1), so that no backend's
# run shares the machine with another's.
take_bench() (
	svc=$(mktemp -d)
	trap 'scripts/mariadb.sh stop "$svc/mariadb" >/dev/null 2>&1 || true
		scripts/postgres.sh destroy "$svc/postgres" >/dev/null 2>&1 || true
		scripts/etcd.sh stop "$svc/etcd" >/dev/null 2>&1 || true
		rm -rf "$svc"' EXIT
	local dsn pgdsn eps
	dsn=$(scripts/mariadb.sh start "$svc/mariadb")
	pgdsn=$(scripts/postgres.sh start "$svc/postgres")
	eps=$(scripts/etcd.sh start "$svc/etcd")
	export "${dsn?}" "${pgdsn?}" "${eps?}"
	go test -p 1 -run '^$' -bench '^BenchmarkTake$' -benchmem -benchtime "$BENCHTIME" \
		./persist/sqlite/ ./persist/mysql/ ./persist/postgres/ ./persist/etcd/ | tee "$svc/take"
	awk '/^pkg: / { pkg = $2; sub(/.*\//, "", pkg) } /^BenchmarkTake/ { ns[pkg] = $3; order[++n] = pkg }
		END { for (i = 1; i <= n; i++) if (ns["sqlite"] > 0)
			printf "Take on %s: %.0f us, %.2fx SQLite'"'"'s\n", order[i], ns[order[i]] / 1000, ns[order[i]] / ns["sqlite"] }' "$svc/take"
	# Many tags at once: 1,000 tags a Take (one transaction) each against
	# one TakeBatch, new tags (created by it) and existing ones.
	go test -p 1 -run '^$' -bench '^BenchmarkTakeBatch$' -benchmem -benchtime 1x \
		./persist/sqlite/ ./persist/mysql/ | tee "$svc/batch"
	awk '/^pkg: / { pkg = $2; sub(/.*\//, "", pkg) }
		/^BenchmarkTakeBatch\// { split($1, k, "/"); sub(/-[0-9]+$/, "", k[3]); ns[pkg "/" k[2] "/" k[3]] = $3 }
		END { split("sqlite mysql", p, " "); split("new existing", w, " ")
			for (i = 1; i <= 2; i++) for (j = 1; j <= 2; j++) { a = ns[p[i] "/" w[j] "/Take"]; b = ns[p[i] "/" w[j] "/TakeBatch"]
				if (a > 0 && b > 0) printf "1,000 %s tags on %s: one TakeBatch %.1fx faster than a Take each\n", w[j], p[i], a / b } }' "$svc/batch"
)
if [ "$GO_BENCH" != 0 ]; then
	echo
	echo "== Take per backend (one transaction per segment)"
	take_bench
fi

echo
echo "== building leaf"
CGO_ENABLED=0 go build -trimpath -o "$work/leaf" .

# leaf_info PORT FIELD prints FIELD of INFO leaf of the leaf on PORT.
leaf_info() {
	redis-cli -h 127.0.0.1 -p "$1" INFO leaf | tr -d '\r' | sed -n "s/^$2://p"
}

# The distant database: for each database, leaf directly on it, then
# through delayproxy, one leaf at a time, each on a fresh tag of its own
# (created by its first INCR), each stopped before the next starts.
slowdb_bench() (
	svc=$(mktemp -d)
	lpid="" ppid=""
	trap '[ -z "$lpid" ] || stop_pid "$lpid" 30 || true
		[ -z "$ppid" ] || stop_pid "$ppid" 10 || true
		scripts/mariadb.sh stop "$svc/mariadb" >/dev/null 2>&1 || true
		scripts/postgres.sh destroy "$svc/postgres" >/dev/null 2>&1 || true
		rm -rf "$svc"' EXIT
	go build -o "$svc/delayproxy" ./internal/cmd/delayproxy
	local dbs=(MariaDB) db driver dsn target delay run leafdsn port out
	[ "$SLOWDB_POSTGRES" = 0 ] || dbs+=(PostgreSQL)
	declare -A rps p99 max waited
	echo
	echo "== a distant database: leaf on ${dbs[*]}, directly and $SLOWDB_DELAY each way"
	for db in "${dbs[@]}"; do
		if [ "$db" = MariaDB ]; then
			driver=mysql
			dsn=$(scripts/mariadb.sh start "$svc/mariadb")
			dsn=${dsn#*=}
			target=$(sed -n 's/.*@tcp(\([^)]*\)).*/\1/p' <<<"$dsn")
		else
			driver=postgres
			dsn=$(scripts/postgres.sh start "$svc/postgres")
			dsn=${dsn#*=}
			target=$(sed -n 's|.*@\([^/]*\)/.*|\1|p' <<<"$dsn")
		fi
		[ -n "$target" ] || { echo "no host:port in the DSN of $db" >&2; exit 1; }
		for delay in 0 "$SLOWDB_DELAY"; do
			run=$db/$delay
			mkdir -p "$svc/$run"
			leafdsn=$dsn
			if [ "$delay" != 0 ]; then
				"$svc/delayproxy" -target "$target" -delay "$delay" >"$svc/$run/proxy" 2>&1 &
				ppid=$!
				wait_log "$svc/$run/proxy" '^127\.0\.0\.1:[0-9]' 30 "$ppid" || exit 1
				leafdsn=${dsn/"$target"/"$(head -1 "$svc/$run/proxy")"}
			fi
			(cd "$svc/$run" && exec "$work/leaf" --server.addr=127.0.0.1:0 --store.driver="$driver" \
				--store.dsn="$leafdsn" --segment.load_timeout=1m) >"$svc/$run/log" 2>&1 &
			lpid=$!
			wait_log "$svc/$run/log" 'msg=serving addr=' 60 "$lpid" || exit 1
			port=$(sed -n 's/.*msg=serving addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$svc/$run/log" | head -1)
			# The tag is created and used once, then meets the burst:
			# a tag that was idle, its step at the start.
			redis-cli -h 127.0.0.1 -p "$port" INCR "slowdb-$delay" >/dev/null
			before=$(leaf_info "$port" waited_loads)
			out=$(redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$SLOWDB_REQUESTS" -P 1 --csv INCR "slowdb-$delay" 2>&1) || {
				echo "redis-benchmark against leaf on $db ($delay each way) failed: $out" >&2
				exit 1
			}
			if grep -q 'Error from server' <<<"$out"; then
				echo "error replies from leaf on $db ($delay each way): $out" >&2
				exit 1
			fi
			# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
			read -r "rps[$run]" "p99[$run]" "max[$run]" < <(awk -F'"' '$2 ~ /^INCR/ { print $4, $14, $16 }' <<<"$out")
			waited[$run]=$(($(leaf_info "$port" waited_loads) - before))
			echo "leaf on $db, $delay each way: ${rps[$run]} rps, p99 ${p99[$run]} ms, max ${max[$run]} ms, ${waited[$run]} loads waited for"
			stop_pid "$lpid" 30 || echo "leaf on $db ($delay each way) needed SIGKILL" >&2
			lpid=""
			if [ -n "$ppid" ]; then
				stop_pid "$ppid" 10 || true
				ppid=""
			fi
		done
	done
	echo
	echo "== a distant database: redis-benchmark -c $CLIENTS -P 1, $SLOWDB_REQUESTS INCRs of one tag that was idle, no delay and $SLOWDB_DELAY each way"
	echo "   (loads waited for: INFO leaf waited_loads over the run, the tag's first load included)"
	echo
	echo "| database | rps, no delay | rps, $SLOWDB_DELAY each way | rps delayed/direct | max ms, no delay | max ms, delayed | p99 ms, no delay | p99 ms, delayed | loads waited for, no delay | loads waited for, delayed |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for db in "${dbs[@]}"; do
		local d=$db/0 s=$db/$SLOWDB_DELAY
		awk -v db="$db" -v dr="${rps[$d]}" -v sr="${rps[$s]}" -v dm="${max[$d]}" -v sm="${max[$s]}" \
			-v d99="${p99[$d]}" -v s99="${p99[$s]}" -v dw="${waited[$d]}" -v sw="${waited[$s]}" 'BEGIN {
			printf "| %s | %.0f | %.0f | %.2fx | %.1f | %.1f | %.2f | %.2f | %s | %s |\n", db, dr, sr, (dr > 0 ? sr / dr : 0), dm, sm, d99, s99, dw, sw
		}'
	done
)
if [ "$SLOWDB_ONLY" = 1 ]; then
	slowdb_bench
	exit 0
fi

# Every key starts here: replies of one length (19 digits) everywhere.
start=1000000000000000000
declare -A port spid key
servers=()
for procs in ${LEAF_GOMAXPROCS:-default}; do
	name=leaf-$procs
	env=()
	[ "$procs" = default ] || env=("GOMAXPROCS=$procs")
	mkdir -p "$work/$name"
	(cd "$work/$name" && exec env "${env[@]}" ../leaf --server.addr=127.0.0.1:0 --store.dsn="$work/$name/leaf.db" --store.create_database) \
		>"$work/$name/log" 2>&1 &
	pids+=("$!")
	spid[$name]=$!
	wait_log "$work/$name/log" 'msg=serving addr=' 30 "${spid[$name]}" || { cat "$work/$name/log" >&2; exit 1; }
	port[$name]=$(sed -n 's/.*msg=serving addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$name/log" | head -1)
	[ -n "${port[$name]}" ] || { cat "$work/$name/log" >&2; exit 1; }
	key[$name]=bench
	[ "$(redis-cli -h 127.0.0.1 -p "${port[$name]}" SET bench "$((start - 1))")" = OK ] || exit 1
	# The same server's Snowflake tag: a run of its own in each round.
	sf=snowflake-$procs
	port[$sf]=${port[$name]}
	spid[$sf]=${spid[$name]}
	key[$sf]=sfbench
	[ "$(redis-cli -h 127.0.0.1 -p "${port[$name]}" LEAF.CREATE sfbench MODE snowflake)" = OK ] || exit 1
	servers+=("$name" "$sf")
	echo "leaf (GOMAXPROCS=$procs) on 127.0.0.1:${port[$name]}"
done

for attempt in 1 2 3 4 5; do
	p=$(free_port)
	redis-server --bind 127.0.0.1 --port "$p" --save '' --appendonly no \
		--dir "$work" --daemonize no --protected-mode yes --loglevel warning \
		>"$work/redis.log" 2>&1 &
	rpid=$!
	for ((i = 0; i < 100; i++)); do
		if [ "$(redis-cli -h 127.0.0.1 -p "$p" PING 2>/dev/null)" = PONG ]; then
			port[redis]=$p
			break
		fi
		kill -0 "$rpid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -n "${port[redis]:-}" ]; then
		pids+=("$rpid")
		spid[redis]=$rpid
		key[redis]=bench
		redis-cli -h 127.0.0.1 -p "$p" SET bench "$((start - 1))" >/dev/null
		break
	fi
	kill -TERM "$rpid" 2>/dev/null || true
	wait "$rpid" 2>/dev/null || true
done
[ -n "${port[redis]:-}" ] || { echo "redis-server did not start:" >&2; cat "$work/redis.log" >&2; exit 1; }
servers+=(redis)
redis_version=$(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
echo "redis-server $redis_version on 127.0.0.1:${port[redis]}"

# cpu_ticks PID: the CPU time a process has used, user and system, in clock
# ticks (the fields after the command name, which may hold spaces).
cpu_ticks() {
	sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
hz=$(getconf CLK_TCK)

# bench NAME P N: one redis-benchmark run of N INCRs of NAME's key;
# appends "name p rps p99_ms cpu_s_per_million round" to $work/results
# (round: $round, the round the run belongs to).
round=0
bench() {
	local name=$1 p=$2 n=$3 out before after
	before=$(cpu_ticks "${spid[$name]}")
	out=$(redis-benchmark -h 127.0.0.1 -p "${port[$name]}" -c "$CLIENTS" -n "$n" -P "$p" --csv INCR "${key[$name]}" 2>&1) || {
		echo "redis-benchmark against $name failed: $out" >&2
		return 1
	}
	after=$(cpu_ticks "${spid[$name]}")
	if grep -q 'Error from server' <<<"$out"; then
		echo "error replies from $name: $out" >&2
		return 1
	fi
	# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
	awk -F'"' -v name="$name" -v p="$p" -v cpu="$(((after - before)))" -v hz="$hz" -v n="$n" \
		-v round="$round" '$2 ~ /^INCR/ { printf "%s %s %s %s %.3f %d\n", name, p, $4, $14, cpu / hz / n * 1e6, round }' <<<"$out" >>"$work/results"
	tail -1 "$work/results"
}

# Warm-up, not counted: leaf's adaptive step grows to the rate, and every
# server faults its pages in.
echo
echo "== warm-up"
for p in $PIPELINES; do
	for s in "${servers[@]}"; do
		bench "$s" "$p" 200000 >/dev/null
	done
done
# Size the runs of each depth to about SECONDS_PER_RUN from redis's rate.
declare -A requests
while read -r name p rps p99; do
	[ "$name" = redis ] || continue
	requests[$p]=$(awk -v r="$rps" -v s="$SECONDS_PER_RUN" 'BEGIN { n = int(r * s / 10000) * 10000; if (n < 50000) n = 50000; print n }')
done <"$work/results"
: >"$work/results"

echo
echo "== $ROUNDS rounds, -c $CLIENTS, INCR on one key (server, -P, rps, p99 ms, CPU s per million)"
k=${#servers[@]}
for ((r = 0; r < ROUNDS; r++)); do
	round=$r
	for p in $PIPELINES; do
		for ((j = 0; j < k; j++)); do
			bench "${servers[(r + j) % k]}" "$p" "${requests[$p]}"
		done
	done
done

# median_of: the median of the numbers on standard input, one a line.
median_of() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# median NAME P FIELD: the median of a column (3: rps, 4: p99, 5: CPU).
median() {
	awk -v name="$1" -v p="$2" -v f="$3" '$1 == name && $2 == p { print $f }' "$work/results" | median_of
}

echo
echo "== redis-benchmark INCR on one key, -c $CLIENTS: medians of $ROUNDS rounds"
echo "   $(nproc) cores (${cpu:-unknown CPU}), redis-benchmark on the same machine, redis-server $redis_version"
echo
echo "| -P | leaf GOMAXPROCS | leaf tag | leaf rps | redis rps | rps leaf/redis | leaf p99 ms | redis p99 ms | p99 leaf/redis | leaf CPU s/M | redis CPU s/M | CPU leaf/redis |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for p in $PIPELINES; do
	rr=$(median redis "$p" 3)
	r99=$(median redis "$p" 4)
	rc=$(median redis "$p" 5)
	for s in "${servers[@]}"; do
		[ "$s" = redis ] && continue
		procs=${s#*-} mode=segment
		[ "${s%%-*}" = snowflake ] && mode=Snowflake
		[ "$procs" = default ] && procs="$(nproc) (default)"
		awk -v p="$p" -v procs="$procs" -v mode="$mode" -v lr="$(median "$s" "$p" 3)" -v rr="$rr" -v l99="$(median "$s" "$p" 4)" -v r99="$r99" \
			-v lc="$(median "$s" "$p" 5)" -v rc="$rc" 'BEGIN {
			printf "| %s | %s | %s | %.0f | %.0f | %.2fx | %.3f | %.3f | %.2fx | %.2f | %.2f | %.2fx |\n", p, procs, mode, lr, rr, lr / rr,
				l99, r99, (r99 > 0 ? l99 / r99 : 0), lc, rc, (rc > 0 ? lc / rc : 0)
		}'
	done
done
echo
for p in $PIPELINES; do
	for s in "${servers[@]}"; do
		[ "${s%%-*}" = snowflake ] || continue
		g=leaf-${s#*-}
		awk -v p="$p" -v procs="${s#*-}" -v fr="$(median "$s" "$p" 3)" -v gr="$(median "$g" "$p" 3)" \
			-v fc="$(median "$s" "$p" 5)" -v gc="$(median "$g" "$p" 5)" 'BEGIN {
			if (gr > 0 && gc > 0) printf "Snowflake INCR (-P %s, GOMAXPROCS %s): %.2fx the rate of segment INCR, %.2fx its CPU per request\n",
				p, procs, fr / gr, fc / gc }'
	done
done
# The machine's speed drifts between runs (on a shared 2-core VM in two
# modes a quarter apart, for redis-server as for leaf), and the medians
# above are taken over each server's runs separately; the ratio of the
# rates within each round (the runs side by side in time) is steadier.
echo
for p in $PIPELINES; do
	for s in "${servers[@]}"; do
		[ "$s" = redis ] && continue
		ratios=$(awk -v s="$s" -v p="$p" '$2 == p && $1 == s { l[$6] = $3 } $2 == p && $1 == "redis" { r[$6] = $3 }
			END { for (k in l) if (k in r && r[k] > 0) printf "%.4f\n", l[k] / r[k] }' "$work/results" | sort -g)
		[ -n "$ratios" ] || continue
		printf "%s/redis rps within a round (-P %s): median %.2fx of %d rounds (min %.2fx, max %.2fx)\n" "$s" "$p" \
			"$(median_of <<<"$ratios")" "$(wc -l <<<"$ratios")" "$(head -1 <<<"$ratios")" "$(tail -1 <<<"$ratios")"
	done
done
echo
for s in "${servers[@]}"; do
	[ "${s%%-*}" = leaf ] || continue
	w=$(leaf_info "${port[$s]}" waits)
	echo "$s: requests that waited on the store, warm-up included: ${w:-?}"
done
if [ "$SLOWDB" != 0 ]; then
	slowdb_bench
fi
