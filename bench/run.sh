#!/bin/sh
# Runs every benchmark program built in this build tree (bench/bench-*).
# Benchmarks print figures; a slow machine never fails them.
builddir=${top_builddir:-.}
status=0
for prog in "$builddir"/bench/bench-*; do
	[ -f "$prog" ] && [ -x "$prog" ] || continue
	case ${prog##*/} in
	# Helpers that a benchmark runs itself, not benchmarks.
	bench-session-rate|bench-session-kernels|bench-launch-cold) continue ;;
	esac
	echo "== ${prog##*/}"
	"$prog" || status=1
	echo
done
exit $status
