#!/bin/sh
# Ctrl-C and SIGTERM during msptictl run go to the command; the capture
# is still finalized: footer present, not truncated, every rank in.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/run-lib.sh"

# in_group CMD...: runs CMD as the leader of a new process group with
# SIGINT and SIGTERM at their defaults (a background job of a script has
# SIGINT ignored), as a terminal's foreground job would be.  Only in the
# background (&): it replaces the subshell, so $! is CMD's pid.
in_group() {
	exec python3 -c '
import os, signal, sys
os.setpgid(0, 0)
signal.signal(signal.SIGINT, signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# steps_ge FILE N: every one of the 2 ranks printed step N.
steps_ge() {
	[ "$(grep -c "step $2:" "$1" 2>/dev/null)" -ge 2 ]
}

# Ctrl-C: SIGINT to run's whole process group, the command included, with
# a private msptid (which must survive it: it is in a group of its own).
mkdir -p "$T/tmp" || fail "mkdir"
before=$(msptid_pids)
TMPDIR="$T/tmp" in_group $MSPTICTL -r "$RT" run --output "$T/int.mspti" -- \
    "$DIST" --ranks 2 --steps 100000 >"$T/int.out" 2>"$T/int.err" &
RP=$!; GROUPS_STARTED="$GROUPS_STARTED $RP"
wait_until 60 steps_ge "$T/int.out" 3 || fail "no steps: $(cat "$T/int.out" "$T/int.err")"
kill -INT -- -"$RP" || fail "kill the group"
wait "$RP"; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 130 ] || fail "after Ctrl-C: exit $rc: $(cat "$T/int.err")"
grep -q "session .* finalized" "$T/int.err" || fail "not finalized: $(cat "$T/int.err")"
check_dist "$T/int.mspti" 2 0 3
[ -z "$(ls -A "$T/tmp")" ] || fail "left in TMPDIR: $(ls -A "$T/tmp")"
[ -z "$(new_msptids "$before")" ] || fail "msptid left after Ctrl-C: $(new_msptids "$before")"
ok "Ctrl-C mid-run: the command stops, the trace is finalized and whole"

# SIGTERM to run alone is forwarded to the command.
start_daemon
in_group $CTL run --output "$T/term.mspti" -- "$DIST" --ranks 2 --steps 100000 \
    >"$T/term.out" 2>"$T/term.err" &
RP=$!; GROUPS_STARTED="$GROUPS_STARTED $RP"
wait_until 60 steps_ge "$T/term.out" 3 || fail "no steps: $(cat "$T/term.out" "$T/term.err")"
kill -TERM "$RP" || fail "kill run"
wait "$RP"; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 143 ] || fail "after SIGTERM: exit $rc: $(cat "$T/term.err")"
grep -q "session .* finalized" "$T/term.err" || fail "not finalized: $(cat "$T/term.err")"
check_dist "$T/term.mspti" 2 0 3
ok "SIGTERM to run: forwarded to the command, the trace is finalized"
echo "run-signals: all passed"
