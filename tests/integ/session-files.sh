#!/bin/sh
# Output files (issue 13): traces, snapshots and run outputs are created
# 0600 (--file-mode says otherwise), a refused start leaves an existing
# file as it was, and a FIFO or other non-regular output is refused
# without blocking anyone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
umask 022

mode_of() { stat -c %a "$1"; }

start_daemon
$WITH_AGENT "$TRAIN" --steps 0 >"$T/a.out" 2>&1 &
A=$!; PIDS="$PIDS $A"
wait_until 20 is_registered $A || fail "A did not register"

# A refused start: the user's file is untouched, no temporary is left.
echo precious >"$T/existing.mspti"
$CTL start --pid 999999 --output "$T/existing.mspti" >"$T/r.out" 2>&1
rc=$?
[ $rc -eq 3 ] || fail "start of an unknown pid: exit $rc, want 3"
[ "$(cat "$T/existing.mspti")" = precious ] || fail "a refused start replaced the existing file"
[ -z "$(ls -A "$T" | grep -v -e '^existing.mspti$' -e '^run$' -e '\.out$' -e '\.log$')" ] ||
	fail "left behind: $(ls -A "$T")"
ok "a refused start leaves an existing output untouched"

# Traces are private by default, whatever the umask allows.
$CTL --json start --pid $A --kinds marker --output "$T/t.mspti" >"$T/s.json" || fail "start"
SID=$(json "$T/s.json" 'j["session"]')
[ "$(mode_of "$T/t.mspti")" = 600 ] || fail "trace mode $(mode_of "$T/t.mspti"), want 600"
$CTL stop "$SID" >/dev/null || fail "stop"
"$DUMP" "$T/t.mspti" >/dev/null || fail "trace unreadable"
ok "a trace is created 0600"

# Replacing an existing file works once the start succeeded.
$CTL --json start --pid $A --kinds marker --output "$T/existing.mspti" >"$T/s.json" || fail "start over existing"
SID=$(json "$T/s.json" 'j["session"]')
$CTL stop "$SID" >/dev/null || fail "stop"
"$DUMP" "$T/existing.mspti" >/dev/null || fail "replaced trace unreadable"
[ "$(mode_of "$T/existing.mspti")" = 600 ] || fail "replaced mode $(mode_of "$T/existing.mspti")"
ok "a started session replaces the file, 0600"

# --file-mode asks for another mode explicitly.
$CTL --json start --pid $A --kinds marker --file-mode 0640 --output "$T/g.mspti" >"$T/s.json" || fail "start --file-mode"
SID=$(json "$T/s.json" 'j["session"]')
[ "$(mode_of "$T/g.mspti")" = 640 ] || fail "--file-mode 0640 gave $(mode_of "$T/g.mspti")"
$CTL stop "$SID" >/dev/null || fail "stop"
ok "--file-mode 0640"

# Ring mode snapshots: 0600 too.
$CTL --json start --pid $A --mode ring --kinds marker --output "$T/r.mspti" >"$T/s.json" || fail "start ring"
SID=$(json "$T/s.json" 'j["session"]')
sleep 0.3
$CTL snapshot --output "$T/snap.mspti" "$SID" >/dev/null || fail "snapshot"
[ "$(mode_of "$T/snap.mspti")" = 600 ] || fail "snapshot mode $(mode_of "$T/snap.mspti")"
$CTL stop "$SID" >/dev/null || fail "stop ring"
ok "a snapshot is created 0600"

# A FIFO nobody reads: refused at once, nothing blocks, it stays a FIFO.
mkfifo "$T/fifo"
timeout 20 $CTL start --pid $A --kinds marker --output "$T/fifo" >"$T/f.out" 2>&1
rc=$?
[ $rc -ne 124 ] || fail "start to a FIFO hung"
[ $rc -ne 0 ] || fail "start to a FIFO was accepted"
grep -q "regular file" "$T/f.out" || fail "no clear error for a FIFO: $(cat "$T/f.out")"
[ -p "$T/fifo" ] || fail "the FIFO was replaced"
timeout 10 $CTL status >/dev/null || fail "daemon not answering after the FIFO"
ok "a FIFO output is refused with a clear error"

# run's output: 0600 as well.
$CTL run --output "$T/run.mspti" --kinds marker -- "$TRAIN" --steps 2 >"$T/run.out" 2>&1 ||
	fail "run: $(tail -3 "$T/run.out")"
[ "$(mode_of "$T/run.mspti")" = 600 ] || fail "run output mode $(mode_of "$T/run.mspti")"
ok "run's output is created 0600"
