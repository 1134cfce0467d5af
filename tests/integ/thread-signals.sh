#!/bin/sh
# Threads that the agent and the simulator start inside an application
# block the asynchronous signals (those are the application's), but never
# the synchronous faults: a SIGSEGV, SIGBUS, SIGFPE or SIGILL raised in a
# blocked thread kills the process with no handler run, so neither the
# application's crash handler nor a sanitizer could say where it happened.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

unset NPUSIM_TIME_SCALE NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK || true
TRAIN_BIN="$top_builddir/sim/.libs/npusim-train"
LIBDIR="$top_builddir/sim/.libs"
CTL="$MSPTICTL -r $RT"

start_daemon
LD_LIBRARY_PATH="$LIBDIR" $WITH_AGENT "$TRAIN_BIN" --steps 0 >"$T/train.out" 2>&1 &
TP=$!
PIDS="$PIDS $TP"
wait_until 20 is_registered "$TP" || fail "npusim-train did not register"
# A capture makes the agent start its record threads too.
$CTL start --pid "$TP" --kinds api,kernel,marker --output "$T/s.mspti" >"$T/start.out" 2>&1 ||
	fail "start: $(cat "$T/start.out")"

# SigBlk is a hex mask, bit (signo - 1).  ILL 4, TRAP 5, BUS 7, FPE 8,
# SEGV 11, SYS 31.
faults=$(( (1 << 3) | (1 << 4) | (1 << 6) | (1 << 7) | (1 << 10) | (1 << 30) ))
threads_ok() {
	n=0 blocked=0
	for st in /proc/"$TP"/task/*/status; do
		m=$(sed -n 's/^SigBlk:[[:space:]]*//p' "$st" 2>/dev/null) || continue
		[ -n "$m" ] || continue
		# Every fault signal is below 32: the low 32 bits only (a shell
		# such as dash clamps a 64-bit mask with its top bit set).
		m=${m#????????}
		n=$((n + 1))
		if [ $(( 0x$m & faults )) -ne 0 ]; then
			blocked=$((blocked + 1))
			echo "$(sed -n 's/^Name:[[:space:]]*//p' "$st") $m" >>"$T/blocked.txt"
		fi
	done
	echo "$n $blocked"
}
# The simulator's stream threads, its sampler and the agent's threads.
wait_until 20 sh -c "[ \$(ls /proc/$TP/task | wc -l) -ge 4 ]" ||
	fail "fewer than 4 threads in npusim-train"
set -- $(threads_ok)
[ "$2" -eq 0 ] || fail "$2 of $1 threads block a fault signal: $(cat "$T/blocked.txt")"
blk=$(sed -n 's/^SigBlk:[[:space:]]*//p' /proc/"$TP"/task/*/status | sort -u | tr '\n' ' ')
case "$blk" in
*[1-9a-f]*) ;;
*) fail "no thread blocks the asynchronous signals: $blk" ;;
esac
ok "$1 threads: none blocks SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGTRAP/SIGSYS, helpers block the rest"
$CTL stop "$(sed -n 's/.*session \([0-9]*\).*/\1/p' "$T/start.out" | head -1)" >/dev/null 2>&1
kill "$TP"; wait "$TP" 2>/dev/null
