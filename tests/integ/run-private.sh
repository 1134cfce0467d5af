#!/bin/sh
# msptictl run without a running msptid: it starts a private one on a
# temporary runtime dir, says so in one line, captures, and leaves no
# process and no runtime dir behind.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/run-lib.sh"

# No daemon listens in $RT; temporary dirs go to a dir of our own.
mkdir -p "$T/tmp" || fail "mkdir"
before=$(msptid_pids)
TMPDIR="$T/tmp" $CTL run --output "$T/p.mspti" -- "$DIST" --ranks 2 --steps 2 \
    >"$T/p.out" 2>"$T/p.err" || fail "run: $(cat "$T/p.err")"
[ "$(grep -c 'private' "$T/p.err")" -eq 1 ] || fail "no one-line notice: $(cat "$T/p.err")"
dir=$(sed -n 's/.*private one on \([^ ]*\) .*/\1/p' "$T/p.err")
case "$dir" in "$T/tmp/"*) ;; *) fail "runtime dir '$dir' not under TMPDIR";; esac
[ ! -e "$dir" ] || fail "runtime dir left behind: $dir"
[ -z "$(ls -A "$T/tmp")" ] || fail "left in TMPDIR: $(ls -A "$T/tmp")"
[ -z "$(new_msptids "$before")" ] || fail "msptid left: $(new_msptids "$before")"
check_dist "$T/p.mspti" 2 2
ok "private msptid: capture complete, no process or runtime dir left"

# The same when the command fails to execute and when it fails.
TMPDIR="$T/tmp" $CTL run --output "$T/f.mspti" -- sh -c 'exit 5' 2>"$T/f.err"
rc=$?; [ $rc -eq 5 ] || fail "exit 5 came back as $rc: $(cat "$T/f.err")"
[ -z "$(ls -A "$T/tmp")" ] || fail "left in TMPDIR: $(ls -A "$T/tmp")"
[ -z "$(new_msptids "$before")" ] || fail "msptid left after a failing command"
ok "private msptid: gone after a failing command too"
echo "run-private: all passed"
