#!/bin/sh
# LTTng-UST figures for bench-api, on the same machine in the same run.
# Optional: needs liblttng-ust-dev (installed here with apt-get when run as
# root and missing); the enabled figure also needs lttng-tools.
set -u
src=$(cd "$(dirname "$0")" && pwd)
if ! pkg-config --exists lttng-ust 2>/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "lttng-ust: installing liblttng-ust-dev ..."
		timeout 300 apt-get install -y liblttng-ust-dev >/dev/null 2>&1 || true
	fi
fi
if ! pkg-config --exists lttng-ust 2>/dev/null; then
	echo "lttng-ust: skipped (liblttng-ust-dev not installed)"
	exit 0
fi
tmp=$(mktemp -d) || exit 0
trap 'rm -rf "$tmp"' EXIT
cp "$src/api-lttng-tp.h" "$src/bench-api-lttng.c" "$tmp/"
if ! (cd "$tmp" && ${CC:-cc} -O2 -I. -o bench-lttng bench-api-lttng.c \
    $(pkg-config --cflags --libs lttng-ust) -ldl) >"$tmp/cc.log" 2>&1; then
	echo "lttng-ust: skipped (tracepoint provider did not compile)"
	sed 's/^/  /' "$tmp/cc.log" | head -5
	exit 0
fi
LTTNG_UST_REGISTER_TIMEOUT=0 "$tmp/bench-lttng" disabled 20000000
if command -v lttng >/dev/null 2>&1 && lttng list >/dev/null 2>&1; then
	s="mspti-bench-$$"
	lttng create "$s" --output="$tmp/trace" >/dev/null 2>&1 &&
	lttng enable-event -u 'mspti_bench:mark' -s "$s" >/dev/null 2>&1 &&
	lttng start "$s" >/dev/null 2>&1 &&
	"$tmp/bench-lttng" enabled 2000000
	lttng destroy "$s" >/dev/null 2>&1
else
	echo "lttng-ust enabled tracepoint: skipped (no lttng-sessiond / lttng-tools)"
fi
exit 0
