#!/bin/sh
# The cluster fan-out when things go wrong, without root: two real msptid
# on their own runtime dirs reached through MSPTI_SSH (a local stand-in for
# ssh, as in cluster-steps.sh), step-ranks ranks on each.
#  - a --steps start whose second round (retarget --start-step k) fails on
#    a node rolls that node's session back (stopped, not left held at a
#    step no rank reaches) and says so in one line;
#  - wait --timeout gives up with one line and exit 1, locally and over
#    the nodes;
#  - start's short options -s, -d, -K, -J are seen by the fan-out as their
#    long forms are (one k, one instant, the forced k, the job).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

# A host with the file $T/HOST.noretarget refuses the retarget verb as a
# broken connection would.
cat >"$T/fakessh" <<EOS
#!/bin/sh
while [ "\$1" = -o ]; do shift 2; done
host=\$1; shift
[ -d "$T/\$host" ] || { echo "ssh: Could not resolve hostname \$host" >&2; exit 255; }
case "\$*" in *retarget*)
	[ -e "$T/\$host.noretarget" ] &&
		{ echo "ssh: connection to \$host closed by remote host" >&2; exit 255; };;
esac
MSPTID_RUNTIME_DIR="$T/\$host" exec sh -c "\$*"
EOS
chmod +x "$T/fakessh"
export MSPTI_SSH="$T/fakessh"
for h in hA hB; do
	mkdir -p "$T/$h"
	"$MSPTID" --foreground --runtime-dir "$T/$h" -v >>"$T/daemon.log" 2>&1 &
	PIDS="$PIDS $!"
done
r=0
for h in hA hB; do
	wait_until 10 "$MSPTICTL" -r "$T/$h" status >/dev/null 2>&1 ||
		fail "msptid $h did not start"
	for _ in 0 1; do
		MSPTID_RUNTIME_DIR="$T/$h" MSPTI_JOB_ID=rj RANK=$r WORLD_SIZE=4 \
		    LD_PRELOAD="$AGENT_PRELOAD" "$STEPS" --steps 0 --spread 0 \
		    --period-us 3000 --until "$T/stop" >/dev/null 2>&1 &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	wait_until 10 sh -c "[ \"\$('$MSPTICTL' -r '$T/$h' --json list | python3 -c 'import json,sys; print(len([a for a in json.load(sys.stdin) if \"step-ranks\" in a[\"exe\"]]))')\" = 2 ]" ||
		fail "$h: ranks did not register"
done
printf 'hA\nhB\n' >"$T/hosts"
cd "$T" || exit 1

# active_sessions HOST: the sessions of HOST still starting or active.
active_sessions() {
	"$MSPTICTL" -r "$T/$1" --json sessions | python3 -c '
import json, sys
print(len([s for s in json.load(sys.stdin) if s["state"] in ("starting", "active")]))'
}
none_active() { [ "$(active_sessions "$1")" = 0 ]; }

# A failed second round: hB cannot be reached for k.  Its session (held
# at a step no rank reaches) is stopped, the start names hB in one line
# saying so and exits 1; hA keeps its window, as in a partial start.
: >"$T/hB.noretarget"
"$MSPTICTL" start --hosts hosts --job rj --steps 3 --output-dir capr \
    >r.out 2>&1 && fail "a start whose round 2 failed exited 0: $(cat r.out)"
rm -f "$T/hB.noretarget"
grep -q '^  hB: FAILED: .*closed by remote host; its session [0-9]* was stopped (rolled back)$' r.out ||
	fail "hB's rollback not stated: $(cat r.out)"
[ "$(grep -c '^  hB' r.out)" = 1 ] || fail "hB in more than one line: $(cat r.out)"
wait_until 10 none_active hB ||
	fail "hB's session is still held: $("$MSPTICTL" -r "$T/hB" sessions)"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir capr >rw.out 2>&1
k=$(sed -n 's/^  steps \[\([0-9]*\), .*/\1/p' r.out)
[ -n "$k" ] || fail "no k for hA: $(cat r.out)"
step_window capr/hA.mspti 3 "$k" >/dev/null || exit 1
ok "round 2 failed on hB: its session rolled back and said so in one line; hA records [$k, $((k + 3)))"

# Every node fails round 2: every session is rolled back.
: >"$T/hA.noretarget"; : >"$T/hB.noretarget"
"$MSPTICTL" start --hosts hosts --job rj --steps 3 --output-dir capr2 \
    >r2.out 2>&1 && fail "exit 0: $(cat r2.out)"
rm -f "$T/hA.noretarget" "$T/hB.noretarget"
[ "$(grep -c 'was stopped (rolled back)$' r2.out)" = 2 ] || fail "rollbacks: $(cat r2.out)"
for h in hA hB; do
	wait_until 10 none_active "$h" ||
		fail "$h's session is still held"
done
ok "round 2 failed everywhere: both sessions rolled back"

# wait --timeout: a session that runs on (no --steps) is not waited for
# past the timeout: one line, exit 1, the session untouched.
sid=$("$MSPTICTL" -r "$T/hA" --json start --job rj --output plain.mspti |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])') || fail "start"
"$MSPTICTL" -r "$T/hA" wait --timeout 1s "$sid" >w1.out 2>w1.err; rc=$?
[ "$rc" = 1 ] || fail "wait --timeout: exit $rc: $(cat w1.out w1.err)"
[ "$(wc -l <w1.err)" = 1 ] && grep -q "session $sid not finalized within 1s" w1.err ||
	fail "wait --timeout: $(cat w1.err)"
[ "$(active_sessions hA)" = 1 ] || fail "the wait ended the session"
"$MSPTICTL" -r "$T/hA" wait --timeout 0 "$sid" >/dev/null 2>w0.err; [ $? = 2 ] ||
	fail "--timeout 0 accepted"
"$MSPTICTL" -r "$T/hA" stop "$sid" >/dev/null || fail "stop"
ok "wait --timeout 1s SESSION: one line, exit 1, session left running"

"$MSPTICTL" start --hosts hosts --job rj --output-dir capw >sw.out 2>&1 || fail "start: $(cat sw.out)"
timeout 30 "$MSPTICTL" wait --hosts hosts --output-dir capw --timeout 1s >cw.out 2>cw.err; rc=$?
[ "$rc" = 1 ] || fail "cluster wait --timeout: exit $rc: $(cat cw.out cw.err)"
grep -q '^msptictl wait: 2 of 2 nodes not finalized within 1s: hA hB$' cw.err ||
	fail "cluster wait --timeout: $(cat cw.out cw.err)"
"$MSPTICTL" stop --hosts hosts --output-dir capw >/dev/null 2>&1 || fail "stop capw"
ok "wait --hosts --timeout 1s: one line naming the nodes, exit 1"

# Short options: -s N -K K (forced window), -s N (one k for all), -d D
# (one instant), -J (the job).
"$MSPTICTL" start --hosts hosts -J rj -s 2 -K 40000000 --output-dir caps1 >s1.out 2>&1 ||
	fail "start -J -s -K: $(cat s1.out)"
grep -q '^  steps \[40000000, 40000002) on every node$' s1.out || fail "-K not seen: $(cat s1.out)"
"$MSPTICTL" stop --hosts hosts --output-dir caps1 >/dev/null 2>&1 || fail "stop caps1"
"$MSPTICTL" start --hosts hosts --job rj -s2 --output-dir caps2 >s2.out 2>&1 ||
	fail "start -s2: $(cat s2.out)"
grep -q '^  steps \[[0-9]*, [0-9]*) on every node (one k for all' s2.out || fail "-s not seen: $(cat s2.out)"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir caps2 >/dev/null 2>&1 || fail "wait caps2"
"$MSPTICTL" start --hosts hosts --job rj -d 200ms --output-dir caps3 >s3.out 2>&1 ||
	fail "start -d: $(cat s3.out)"
grep -q '^  started together: 4 ranks' s3.out || fail "-d not seen: $(cat s3.out)"
timeout 30 "$MSPTICTL" wait --hosts hosts --output-dir caps3 >/dev/null 2>&1 || fail "wait caps3"
ok "start -J, -s, -K, -d through the fan-out: as their long forms"

# start --start-at: the daemon keeps the start on a timer until its clock
# reaches the instant (its loop answers meanwhile); the session starts
# then, not before; a requester that goes away takes its start (and its
# temporary file) with it.
at=$(($(now_ns) + 30000000000))
"$MSPTICTL" -r "$T/hA" --json start --job rj --duration 1s --start-at "$at" \
    --output "$T/far.mspti" >far.json 2>far.err &
FAR=$!
PIDS="$PIDS $FAR"
wait_until 20 grep -q "deferred to $at" "$T/daemon.log" || fail "the start was not deferred"
"$MSPTICTL" -r "$T/hA" --json sessions >far-s.json || fail "sessions while a start waits"
[ "$(active_sessions hA)" = 0 ] || fail "a deferred start began early"
kill -TERM "$FAR"
wait "$FAR" 2>/dev/null
wait_until 20 grep -q "deferred start by uid [0-9]* dropped" "$T/daemon.log" ||
	fail "the deferred start was not dropped with its requester"
! ls -a "$T" | grep -q '^\.far\.mspti\.' || fail "temporary output left behind: $(ls -a "$T")"
[ ! -e "$T/far.mspti" ] || fail "output of a start that never began"
# Checked at once: a bad request is refused now, not at the instant.
"$MSPTICTL" -r "$T/hA" start --job rj --kinds bogus --start-at $(($(now_ns) + 300000000000)) \
    --output "$T/bad.mspti" >bad.out 2>&1; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <bad.out)" = 1 ] && grep -q "bogus" bad.out ||
	fail "a bad deferred start: exit $rc: $(cat bad.out)"
"$MSPTICTL" -r "$T/hA" status >/dev/null || fail "msptid hA after a refused deferred start"
at=$(($(now_ns) + 400000000))
"$MSPTICTL" -r "$T/hA" --json start --job rj --duration 300ms --start-at "$at" \
    --output "$T/near.mspti" >near.json || fail "start --start-at: $(cat near.json)"
python3 - near.json "$at" <<'PY' || fail "start --start-at: $(cat near.json)"
import json, sys
d, at = json.load(open(sys.argv[1])), int(sys.argv[2])
assert d["start_at_ns"] == at and d["start_ns"] >= at, d
caps = [a["capture_start_ns"] for a in d["acks"] if a["pid"]]
assert len(caps) == 2 and min(caps) >= at, caps
PY
timeout 30 "$MSPTICTL" -r "$T/hA" wait "$(json near.json 'j["session"]')" >/dev/null ||
	fail "wait near"
ok "start --start-at: held by the daemon's timer, started at the instant; dropped with its requester"

# A session so short that it is stopping before the start's reply goes
# out: each target still says when its capture began (the skew of a
# cluster --duration start is measured from these).
for i in 1 2 3; do
	"$MSPTICTL" -r "$T/hA" --json start --job rj --duration 1ms \
	    --output "$T/short$i.mspti" >short.json || fail "short start: $(cat short.json)"
	[ "$(json short.json 'all(a["capture_start_ns"] > 0 for a in j["acks"] if a["pid"])')" = True ] ||
		fail "a capture start not stated: $(cat short.json)"
	timeout 30 "$MSPTICTL" -r "$T/hA" wait "$(json short.json 'j["session"]')" >/dev/null 2>&1
done
ok "start --duration 1ms: every target's capture start is stated though the session stops first"

# Ranks that mark no MSTX step (sync-ranks: steps from the synchronize
# pattern) on both nodes: one k for all, each rank recording exactly
# those iterations.
SYNC="$top_builddir/tests/integ/sync-ranks"
r=0
for h in hA hB; do
	for _ in 0 1; do
		MSPTID_RUNTIME_DIR="$T/$h" MSPTI_JOB_ID=sy RANK=$r WORLD_SIZE=4 \
		    LD_PRELOAD="$AGENT_PRELOAD" "$SYNC" --mode two \
		    --period-us $((2000 + 1000 * r)) --until "$T/stop-sy" >/dev/null 2>&1 &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	wait_until 20 sh -c "[ \"\$('$MSPTICTL' -r '$T/$h' --json list | python3 -c 'import json,sys; print(len([a for a in json.load(sys.stdin) if a[\"job\"] == \"sy\" and \"sync-ranks\" in a[\"exe\"]]))')\" = 2 ]" ||
		fail "$h: sync ranks did not register"
done
sleep 0.3
"$MSPTICTL" start --hosts hosts --job sy --steps 2 --output-dir capsy >sy.out 2>&1 ||
	fail "start: $(cat sy.out)"
k=$(sed -n 's/^  steps \[\([0-9]*\), \([0-9]*\)) on every node (one k for all.*/\1/p' sy.out)
[ -n "$k" ] || fail "no common window: $(cat sy.out)"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir capsy >syw.out 2>&1 || fail "wait: $(cat syw.out)"
for h in hA hB; do
	"$DUMP" "capsy/$h.mspti" | python3 -c '
import json, sys
k = int(sys.argv[1])
recs = [json.loads(l) for l in sys.stdin][:-1]
pids = {r["pid"] for r in recs if r["type"] == "process" and r["rank"] >= 0}
assert len(pids) == 2, pids
for p in pids:
    st = sorted(r["id"] - (1 << 62) for r in recs if r["type"] == "marker" and
        r["pid"] == p and r["flag"] == 2 and r["domain"] == "mspti.sync")
    tags = sorted(r["name"] for r in recs if r["type"] == "kernel" and
        r["pid"] == p and r["name"].startswith("it"))
    assert st == [k, k + 1], (p, st, k)
    assert tags == sorted("it%d" % (i % 256) for i in (k, k + 1)), (p, tags)
' "$k" || fail "$h: window of the sync ranks"
done
: >"$T/stop-sy"
ok "ranks without MSTX on both nodes: one k ($k), iterations [k, k+2) on all four"

: >"$T/stop"
echo "cluster-robust: all passed"
