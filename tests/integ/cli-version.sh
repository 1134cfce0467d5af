#!/bin/sh
# Every program we build answers --version ("NAME VERSION" on stdout,
# exit 0) and --help (its usage on stdout, exit 0), and refuses an
# unknown option with exit 2 and nothing on stdout: the daemon, the CLI,
# the simulated workloads and the msPTI examples.
. "$(dirname "$0")/lib.sh"

VERSION=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
[ -n "$VERSION" ] || fail "no PACKAGE_VERSION in config.h"

n=0
for p in daemon/msptid client/msptictl sim/npusim-train sim/npusim-dist \
    examples/mspti-activity examples/mspti-correlation examples/mspti-external \
    examples/mspti-callback-timing examples/mspti-mstx-callback \
    examples/mspti-domains examples/mspti-hccl; do
	prog=$top_builddir/$p name=${p##*/}
	[ -x "$prog" ] || fail "$p is not built"
	"$prog" --version </dev/null >"$T/v.out" 2>"$T/v.err"; rc=$?
	[ $rc -eq 0 ] || fail "$name --version exits $rc: $(cat "$T/v.err")"
	[ "$(cat "$T/v.out")" = "$name $VERSION" ] ||
		fail "$name --version: '$(cat "$T/v.out")', want '$name $VERSION'"
	[ ! -s "$T/v.err" ] || fail "$name --version wrote on stderr: $(cat "$T/v.err")"
	"$prog" --help </dev/null >"$T/h.out" 2>"$T/h.err"; rc=$?
	[ $rc -eq 0 ] || fail "$name --help exits $rc: $(cat "$T/h.err")"
	grep -q "^usage: $name" "$T/h.out" || fail "$name --help: $(head -n 2 "$T/h.out")"
	[ ! -s "$T/h.err" ] || fail "$name --help wrote on stderr: $(cat "$T/h.err")"
	"$prog" --no-such-option </dev/null >"$T/b.out" 2>"$T/b.err"; rc=$?
	[ $rc -eq 2 ] || fail "$name --no-such-option exits $rc"
	[ ! -s "$T/b.out" ] || fail "$name --no-such-option wrote on stdout"
	grep -q -- "--no-such-option" "$T/b.err" || fail "$name: the error does not name the option: $(cat "$T/b.err")"
	n=$((n + 1))
done
ok "$n programs: --version, --help, a bad option"
echo "cli-version: all passed"
