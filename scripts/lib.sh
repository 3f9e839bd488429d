# Shared helpers for leaf's scripts; source it, don't run it.

# apt_install PKG...: install the Debian packages PKG... with apt-get (as
# root), keeping their maintainer scripts from starting system services:
# we start our own throwaway servers on loopback.
apt_install() {
	local policy=/usr/sbin/policy-rc.d ours=""
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && ours=1
	fi
	local rc=0
	# Another apt-get (a parallel install) may hold apt's locks for a
	# while: wait for them (up to 10 minutes) rather than fail.
	local try out
	for ((try = 0; try < 120; try++)); do
		rc=0
		out=$({ apt-get -o DPkg::Lock::Timeout=5 update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=5 install -y -qq --no-install-recommends "$@"; } 2>&1) || rc=$?
		[ $rc != 0 ] && grep -q 'Could not get lock' <<<"$out" || break
		sleep 5
	done
	printf '%s\n' "$out" >&2
	if [ -n "$ours" ]; then rm -f "$policy"; fi
	return $rc
}

# need_pkgs CMD PKG...: when command CMD is missing, install the Debian
# packages PKG... with apt-get (as root), or fail saying what to install.
need_pkgs() {
	local cmd=$1
	shift
	command -v "$cmd" >/dev/null 2>&1 && return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "$cmd not found: install the Debian packages $* (apt-get install $*)" >&2
		return 1
	fi
	echo "installing $* from Debian's packages" >&2
	apt_install "$@"
}

# wait_log FILE PATTERN SECONDS [PID]: wait until FILE has a line matching
# PATTERN; give up at once when the process PID (if given) has exited.
wait_log() {
	local file=$1 pattern=$2 secs=$3 pid=${4:-} i
	for ((i = 0; i < secs * 10; i++)); do
		grep -q -- "$pattern" "$file" 2>/dev/null && return 0
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			echo "the process $pid exited before '$pattern' appeared in $file; it holds:" >&2
			tail -n 40 "$file" >&2 2>/dev/null || true
			return 1
		fi
		sleep 0.1
	done
	echo "timed out waiting for '$pattern' in $file; it holds:" >&2
	tail -n 40 "$file" >&2 2>/dev/null || true
	return 1
}

# valid_port VALUE: VALUE is a TCP port number, 1 to 65535.
valid_port() {
	case "$1" in '' | *[!0-9]*) return 1 ;; esac
	[ "$1" -ge 1 ] && [ "$1" -le 65535 ]
}

# port_free PORT: nothing listens on 127.0.0.1:PORT now.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a random port on 127.0.0.1 that nothing listens on now. A
# server may still lose a race for it: callers retry with another one.
free_port() {
	local port i lo=32768 hi
	# Below the kernel's ephemeral range, which outgoing connections take
	# from: a port picked there may be taken by one before it is bound (a
	# Galera node's third port, seen while the first two talked).
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	[ "$lo" -gt 11024 ] 2>/dev/null || lo=32768
	for ((i = 0; i < 100; i++)); do
		port=$((10000 + (RANDOM * 32768 + RANDOM) % (lo - 10000)))
		if port_free "$port"; then
			echo "$port"
			return 0
		fi
	done
	echo "no free port found" >&2
	return 1
}

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() {
	kill -0 "$1" 2>/dev/null || return 1
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)
	[ "$state" != Z ]
}

# running_pid PIDFILE CHECK: the PID recorded in PIDFILE, when CHECK PID
# says it is still the service's process; else die (the sourcing script's)
# saying why.
running_pid() {
	local pid
	[ -f "$1" ] || die "not running (no $1)"
	pid=$(cat "$1")
	"$2" "$pid" || die "not running (pid $pid is gone)"
	echo "$pid"
}

# wait_gone PID SECONDS: wait until process PID is gone; fail when it is
# still there after SECONDS.
wait_gone() {
	local deadline=$((SECONDS + $2))
	while alive "$1"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# stop_pid PID SECONDS: stop process PID cleanly (SIGTERM, and SIGCONT: a
# paused process acts on SIGTERM only once continued); SIGKILL it when it
# still runs after SECONDS, and then fail.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	kill -CONT "$1" 2>/dev/null || true
	wait_gone "$1" "$2" && return 0
	kill -KILL "$1" 2>/dev/null || true
	wait_gone "$1" 10 || true
	return 1
}
