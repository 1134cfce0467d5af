#!/bin/sh
# Runs one test (make check's LOG_COMPILER) in a private simulator
# namespace, and removes the shared memory the test left under it.
# Tests that pick their own prefix derive it from this one.
#
# In a sanitizer build (configure --enable-sanitizers, MSPTI_ASAN_RUNTIME
# set by make check) every sanitizer report of every process the test
# starts goes to a private directory, so a finding in a daemon killed at
# the end or in a child whose stderr the test discards still fails the
# test; the reports are printed into the test's log.
prefix="mspti-t$$"
NPUSIM_SHM_PREFIX=$prefix
export NPUSIM_SHM_PREFIX
sandir=""
if [ -n "${MSPTI_ASAN_RUNTIME:-}" ]; then
	sandir=$(mktemp -d "${TMPDIR:-/tmp}/mspti-san.XXXXXX") || exit 99
	# Tests that run programs as another user: their reports too.
	chmod 1777 "$sandir"
	# intercept_tls_get_addr=0: gcc 12's runtime guesses where a new
	# dynamic TLS block starts from a glibc 2.19 header it reads before
	# the block when that lies 16 bytes into a page.  glibc 2.36 takes
	# the block from malloc, so one block in 256 gets a garbage range
	# ("DTLS 21 at 0x287-0x1000001389") and the leak check's tracer
	# faults scanning it ("Tracer caught signal 11", pytest of
	# test_torch_profiler.py in CI).  Without the guess the blocks are
	# still scanned: the leak check holds what ld.so allocates reachable.
	ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_suppressions=0:intercept_tls_get_addr=0:log_path=$sandir/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
	UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$sandir/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
	# tests/asan-fork.c into every process; where a test preloads the
	# agent (MSPTI_ASAN_RUNTIME first) it comes right after the runtime.
	if [ -n "${MSPTI_ASAN_FORK:-}" ]; then
		ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0"
		LD_PRELOAD="$MSPTI_ASAN_FORK${LD_PRELOAD:+:$LD_PRELOAD}"
		MSPTI_ASAN_RUNTIME="$MSPTI_ASAN_RUNTIME:$MSPTI_ASAN_FORK"
		export LD_PRELOAD MSPTI_ASAN_RUNTIME
	fi
	# An absolute path: a relative one is looked up from each process's
	# working directory, then its executable's, and a process that finds
	# neither (a test's programs run in its temporary directory) dies in
	# its leak check with "failed to read suppressions file".
	supp=${MSPTI_LSAN_SUPP:-$(cd "$(dirname "$0")" && pwd)/lsan.supp}
	LSAN_OPTIONS="suppressions=$supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
	export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
fi
"$@"
rc=$?
rm -f /dev/shm/"$prefix"* 2>/dev/null
if [ -n "$sandir" ]; then
	found=0
	for f in "$sandir"/*; do
		[ -f "$f" ] || continue
		# LSan's "thread was not suspended" note in a forked child is
		# no finding.  Anything else is shown: a report has an ERROR or
		# runtime error, but a process the runtime could not report on
		# (a fault in its own handler, a failed start) leaves only a
		# line or two, and a test that fails for it must say why.
		if ! grep -q 'ERROR: \|runtime error: \|SUMMARY: ' "$f"; then
			if grep -qv 'was not suspended. False leaks are possible' "$f"; then
				echo "== sanitizer output ${f##*/} (not counted)"
				cat "$f"
			fi
			continue
		fi
		# A child forked from a threaded process holds the parent's
		# heap but not its other threads' stacks: what only those
		# stacks referenced looks leaked, and LSan says so.  Its leak
		# reports are shown, not counted; any other finding counts.
		if grep -q 'False leaks are possible' "$f" &&
		    ! grep -v 'LeakSanitizer' "$f" | grep -q 'ERROR: \|runtime error: '; then
			echo "== possible false leaks (fork of a threaded process), not counted: ${f##*/}"
			cat "$f"
			continue
		fi
		found=1
		echo "== sanitizer report ${f##*/}"
		cat "$f"
	done
	rm -rf "$sandir"
	if [ $found -eq 1 ]; then
		echo "FAIL: sanitizer reports (above)"
		[ $rc -eq 0 ] || [ $rc -eq 77 ] && rc=1
	fi
fi
exit $rc
