#!/bin/sh
# LTTng-UST figures next to ours, on the same machine in the same run:
# ns per tracepoint with no session (disabled) and per event recorded by a
# session that writes a trace to a temporary dir (enabled).  Run by
# bench-api (in-process figures) and bench/session.sh (session ring).
#
# Environment:
#   MSPTI_BENCH_OURS   "KIND:LABEL:NS;..." (KIND disabled, enabled or ring):
#                      our figures, printed with the ratio ours/LTTng
#                      against the LTTng figure of the same kind (ring is
#                      compared with the enabled tracepoint).
#   MSPTI_BENCH_LTTNG_ONLY=enabled   skip the disabled figure.
#   MSPTI_BENCH_NO_INSTALL=1         never run apt-get.
#
# Needs liblttng-ust-dev, and lttng-tools for the enabled figure: installed
# with apt-get when run as root and missing.  Starts its own lttng-sessiond
# unless one already answers, and kills the one it started by pid.  Prints
# one SKIP line for what it cannot measure; always exits 0.
set -u
src=$(cd "$(dirname "$0")" && pwd)
ours=${MSPTI_BENCH_OURS:-}
only=${MSPTI_BENCH_LTTNG_ONLY:-}

have_ust() { pkg-config --exists lttng-ust 2>/dev/null; }
have_tools() { command -v lttng >/dev/null 2>&1 && command -v lttng-sessiond >/dev/null 2>&1; }

if { ! have_ust || ! have_tools; } && [ "$(id -u)" = 0 ] &&
    [ -z "${MSPTI_BENCH_NO_INSTALL:-}" ] && command -v apt-get >/dev/null 2>&1; then
	echo "lttng: installing liblttng-ust-dev lttng-tools ..."
	export DEBIAN_FRONTEND=noninteractive
	timeout 300 apt-get install -y liblttng-ust-dev lttng-tools >/dev/null 2>&1 ||
		{ timeout 300 apt-get update >/dev/null 2>&1 &&
		  timeout 300 apt-get install -y liblttng-ust-dev lttng-tools >/dev/null 2>&1; } || true
fi
if ! have_ust; then
	echo "lttng-ust: SKIP (liblttng-ust-dev not installed, no comparison)"
	exit 0
fi
tmp=$(mktemp -d /tmp/mspti-lttng.XXXXXX) || exit 0
SESSIOND_PID=""
SESSION=""
# liblttng-ust leaves its wait pages in /dev/shm (lttng-ust-wait-*, made
# by the first traced process): the ones this run made go with it.
shm_before=$(ls /dev/shm 2>/dev/null | grep '^lttng-ust-wait-')
cleanup() {
	[ -n "$SESSION" ] && lttng destroy "$SESSION" >/dev/null 2>&1
	if [ -n "$SESSIOND_PID" ]; then
		kill -TERM "$SESSIOND_PID" 2>/dev/null
		n=0
		while kill -0 "$SESSIOND_PID" 2>/dev/null && [ $n -lt 50 ]; do
			sleep 0.1; n=$((n + 1))
		done
		kill -9 "$SESSIOND_PID" 2>/dev/null
		wait "$SESSIOND_PID" 2>/dev/null
	fi
	for f in $(ls /dev/shm 2>/dev/null | grep '^lttng-ust-wait-'); do
		echo "$shm_before" | grep -qx "$f" || rm -f "/dev/shm/$f"
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 0' INT TERM
cp "$src/api-lttng-tp.h" "$src/bench-api-lttng.c" "$tmp/"
if ! (cd "$tmp" && ${CC:-cc} -O2 -I. -o bench-lttng bench-api-lttng.c \
    $(pkg-config --cflags --libs lttng-ust) -ldl) >"$tmp/cc.log" 2>&1; then
	echo "lttng-ust: SKIP (tracepoint provider did not compile)"
	sed 's/^/  /' "$tmp/cc.log" | head -5
	exit 0
fi

# compare KIND NS: our figures of that kind against LTTng's NS.
compare() {
	echo "$ours" | tr ';' '\n' | while IFS=: read -r kind label ns; do
		[ -n "$kind" ] || continue
		case "$1:$kind" in
		disabled:disabled|enabled:enabled|enabled:ring) ;;
		*) continue ;;
		esac
		# Issue 16's targets: disabled <= 2x, enabled into a
		# buffer <= 0.4x, into the session ring <= 0.5x.
		case $kind in
		disabled) t=2.0 ;; enabled) t=0.4 ;; *) t=0.5 ;;
		esac
		awk -v l="$label" -v a="$ns" -v b="$2" -v k="$1" -v t="$t" 'BEGIN {
			r = b > 0 ? a / b : 0
			printf "  ours/theirs: %s %.2f ns / lttng-ust %s %.2f ns = %.2f  %s, target <= %.1f %s\n",
			    l, a, k, b, r,
			    (a < b ? "(ours lower" : "(ours NOT lower"), t,
			    (b > 0 && r <= t ? "met)" : "NOT met)") }'
	done
}

if [ "$only" != enabled ]; then
	out=$(LTTNG_UST_REGISTER_TIMEOUT=0 "$tmp/bench-lttng" disabled 20000000) ||
		{ echo "lttng-ust: SKIP (bench program failed)"; exit 0; }
	echo "$out"
	compare disabled "$(echo "$out" | sed -n 's/.*: *\([0-9.]*\) ns.*/\1/p')"
fi

if ! have_tools; then
	echo "lttng-ust enabled tracepoint: SKIP (lttng-tools not installed)"
	exit 0
fi
LTTNG_HOME="$tmp/home"
export LTTNG_HOME
mkdir -p "$LTTNG_HOME"
if ! lttng list >/dev/null 2>&1; then
	lttng-sessiond --no-kernel >"$tmp/sessiond.log" 2>&1 &
	SESSIOND_PID=$!
	n=0
	until lttng list >/dev/null 2>&1; do
		n=$((n + 1))
		if [ $n -gt 100 ] || ! kill -0 "$SESSIOND_PID" 2>/dev/null; then
			echo "lttng-ust enabled tracepoint: SKIP (lttng-sessiond did not start)"
			tail -3 "$tmp/sessiond.log" | sed 's/^/  /'
			exit 0
		fi
		sleep 0.1
	done
fi
s="mspti-bench-$$"
if ! lttng create "$s" --output="$tmp/trace" >"$tmp/lttng.log" 2>&1; then
	echo "lttng-ust enabled tracepoint: SKIP (lttng create failed)"
	sed 's/^/  /' "$tmp/lttng.log" | tail -3
	exit 0
fi
SESSION=$s
if ! lttng enable-event -u 'mspti_bench:mark' -s "$s" >>"$tmp/lttng.log" 2>&1 ||
    ! lttng start "$s" >>"$tmp/lttng.log" 2>&1; then
	echo "lttng-ust enabled tracepoint: SKIP (could not enable the event)"
	sed 's/^/  /' "$tmp/lttng.log" | tail -3
	exit 0
fi
# The app waits (LTTNG_UST_REGISTER_TIMEOUT, default 3 s) until the
# sessiond has enabled the event, so every call below records.
out=$("$tmp/bench-lttng" enabled 1000000) ||
	{ echo "lttng-ust enabled tracepoint: SKIP (bench program failed)"; exit 0; }
lttng stop "$s" >"$tmp/stop.log" 2>&1
lttng destroy "$s" >/dev/null 2>&1
SESSION=""
echo "$out (session writing to a file; 7 runs of 1000000 events, trace $(du -sm "$tmp/trace" 2>/dev/null | cut -f1) MiB)"
disc=$(sed -n 's/.*[^0-9]\([0-9][0-9]*\) events were discarded.*/\1/p' "$tmp/stop.log" | head -1)
grep -i "discarded\|lost" "$tmp/stop.log" | sed 's/^/  lttng: /'
[ -z "$disc" ] && echo "  lttng: no discarded events reported"
compare enabled "$(echo "$out" | sed -n 's/.*: *\([0-9.]*\) ns.*/\1/p')"
exit 0
