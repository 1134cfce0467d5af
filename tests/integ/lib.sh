# Shared helpers for integration tests: a real msptid on a temporary
# runtime dir, real processes, the real msptictl.  Everything started is
# killed by pid on exit.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$top_builddir}"
MSPTID="$top_builddir/daemon/msptid"
MSPTICTL="$top_builddir/client/msptictl"
AGENT="$top_builddir/agent/.libs/libmspti.so"
APP="$top_builddir/tests/integ/agent-app"
# What LD_PRELOAD takes to load the agent: in a sanitizer build the ASan
# runtime must come first (tests/wrap.sh), or programs not built with it
# (sh, python3) cannot load libmspti.so.
AGENT_PRELOAD="${MSPTI_ASAN_RUNTIME:+$MSPTI_ASAN_RUNTIME:}$AGENT"
T=$(mktemp -d /tmp/mspti-test.XXXXXX)
RT="$T/run"
PIDS=""
DAEMON_PID=""

cleanup() {
	for p in $PIDS $DAEMON_PID; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	# MSPTI_TEST_KEEP=DIR: a failed test's files are kept there (debugging).
	[ -n "${MSPTI_TEST_KEEP:-}" ] && [ -f "$T/.failed" ] &&
		cp -a "$T" "$MSPTI_TEST_KEEP/${0##*/}.$$" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	: >"$T/.failed"
	echo "FAIL: $*" >&2
	[ -f "$T/daemon.log" ] && sed 's/^/  daemon: /' "$T/daemon.log" >&2
	exit 1
}

ok() {
	echo "ok - $*"
}

# start_daemon: runs msptid in the foreground in the background, waits for ctl.sock.
start_daemon() {
	"$MSPTID" --foreground --runtime-dir "$RT" -v "$@" >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 1 200); do
		[ -S "$RT/ctl.sock" ] && "$MSPTICTL" -r "$RT" status >/dev/null 2>&1 && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || fail "msptid exited at start"
		sleep 0.05
	done
	fail "msptid did not come up"
}

stop_daemon() {
	kill -TERM "$DAEMON_PID" 2>/dev/null
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=""
}

# $WITH_AGENT CMD...: runs CMD with the agent preloaded against our daemon.
# A plain command (env), not a function, so "$WITH_AGENT app &" makes $!
# the application's own pid.
WITH_AGENT="env MSPTID_RUNTIME_DIR=$RT LD_PRELOAD=$AGENT_PRELOAD"
case "$T" in *" "*) echo "temp dir with a space" >&2; exit 1;; esac

# wait_until SECONDS CMD...: retries CMD until it succeeds.
wait_until() {
	local n=$(( $1 * 20 )); shift
	for _ in $(seq 1 "$n"); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

# agent_count: number of agents msptictl lists.
agent_count() {
	"$MSPTICTL" -r "$RT" --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'
}
