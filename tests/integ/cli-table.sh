#!/bin/sh
# msptictl's tables stay aligned whatever their cells hold: two agents,
# one with a 40-character job id (MSPTI_JOB_ID), in `list`, and job
# sessions on both in `sessions`.  Every value of a row starts in the
# column where its header starts.
. "$(dirname "$0")/lib.sh"

LONGJOB=job-0123456789abcdef0123456789abcdef0123
[ ${#LONGJOB} -eq 40 ] || fail "test bug: job id of ${#LONGJOB} characters"

# aligned FILE: every line's cells start at the header's column starts.
aligned() {
	python3 - "$1" <<'PY'
import re, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1]) if l.strip()]
head, rows = lines[0], [l for l in lines[1:] if not l.startswith(" ")]
starts = [m.start() for m in re.finditer(r"\S+", head)]
assert len(starts) > 2 and rows, lines
for r in rows:
    for s in starts:
        ok = s < len(r) and r[s] != " " and (s == 0 or r[s - 1] == " ")
        assert ok, "column at %d: %r\n%r" % (s, head, r)
PY
}

start_daemon
MSPTI_JOB_ID=$LONGJOB $WITH_AGENT "$APP" --until "$T/go" >/dev/null 2>&1 &
A1=$!
MSPTI_JOB_ID=j2 $WITH_AGENT "$APP" --until "$T/go" >/dev/null 2>&1 &
A2=$!
PIDS="$PIDS $A1 $A2"
wait_until 10 sh -c "[ \$('$MSPTICTL' -r '$RT' --json list | grep -o '\"pid\"' | wc -l) -ge 2 ]" ||
	fail "agents did not register"

"$MSPTICTL" -r "$RT" list >"$T/list.txt" || fail "list"
grep -q -- "$LONGJOB" "$T/list.txt" || fail "the long job id is cut: $(cat "$T/list.txt")"
aligned "$T/list.txt" || fail "list is not aligned: $(cat "$T/list.txt")"
ok "list: aligned with a 40-character job id"

for job in "$LONGJOB" j2; do
	"$MSPTICTL" -r "$RT" start --job "$job" --duration 10m \
	    --output "$T/$job.mspti" >/dev/null || fail "start --job $job"
done
"$MSPTICTL" -r "$RT" sessions >"$T/sess.txt" || fail "sessions"
grep -q -- "$LONGJOB" "$T/sess.txt" || fail "the long job id is cut: $(cat "$T/sess.txt")"
aligned "$T/sess.txt" || fail "sessions is not aligned: $(cat "$T/sess.txt")"
ok "sessions: aligned with a 40-character job id"
touch "$T/go"
echo "cli-table: all passed"
