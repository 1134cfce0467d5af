#!/bin/sh
# Step windows across "nodes" without root: two real msptid on their own
# runtime dirs reached through MSPTI_SSH (a local stand-in for ssh, as in
# cluster-cli.sh), step-ranks ranks on each.  start --hosts --steps N
# --start-step K reaches every node with K: all four ranks record exactly
# steps [K, K+N); the reply says so.  Without --start-step the nodes are
# asked first and all get one k, though their ranks are far apart.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

# With $T/slow-HOST, the next retarget reaches HOST 4 s late (a slow
# fan-out to one node).
cat >"$T/fakessh" <<EOS
#!/bin/sh
while [ "\$1" = -o ]; do shift 2; done
host=\$1; shift
[ -d "$T/\$host" ] || { echo "ssh: Could not resolve hostname \$host" >&2; exit 255; }
case "\$*" in
*retarget*) rm "$T/slow-\$host" 2>/dev/null && sleep 4 ;;
esac
MSPTID_RUNTIME_DIR="$T/\$host" exec sh -c "\$*"
EOS
chmod +x "$T/fakessh"
export MSPTI_SSH="$T/fakessh"
for h in hA hB; do
	mkdir -p "$T/$h"
	"$MSPTID" --foreground --runtime-dir "$T/$h" -v >>"$T/daemon.log" 2>&1 &
	PIDS="$PIDS $!"
	[ $h = hB ] && DPID_B=$!
done
r=0
for h in hA hB; do
	wait_until 10 "$MSPTICTL" -r "$T/$h" status >/dev/null 2>&1 ||
		fail "msptid $h did not start"
	for _ in 0 1; do
		MSPTID_RUNTIME_DIR="$T/$h" MSPTI_JOB_ID=sj RANK=$r WORLD_SIZE=4 \
		    LD_PRELOAD="$AGENT_PRELOAD" "$STEPS" --steps 0 --spread 30 \
		    --until "$T/stop" --go "$T/go" >/dev/null 2>&1 &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	wait_until 10 sh -c "[ \"\$('$MSPTICTL' -r '$T/$h' --json list | python3 -c 'import json,sys; print(len([a for a in json.load(sys.stdin) if \"step-ranks\" in a[\"exe\"]]))')\" = 2 ]" ||
		fail "$h: ranks did not register"
done
printf 'hA\nhB\n' >"$T/hosts"
cd "$T" || exit 1

# common_window START_OUT DIR WAIT_OUT: the one k of a common-k start's
# reply (in $k); waits for the capture and checks that every rank of both
# nodes recorded exactly [k, k+3).
common_window() {
	k=$(sed -n 's/^  steps \[\([0-9]*\), \([0-9]*\)) on every node (one k for all.*/\1/p' "$1")
	[ -n "$k" ] || fail "no common window in the start reply: $(cat "$1")"
	timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir "$2" >"$3" 2>&1 ||
		fail "wait: $(cat "$3")"
	for h in hA hB; do
		step_window "$2/$h.mspti" 3 "$k" >/dev/null || exit 1
	done
}

"$MSPTICTL" start --hosts hosts --job sj --steps 3 --start-step 25 \
    --output-dir cap >start.out 2>&1 || fail "start: $(cat start.out)"
grep -q '^  steps \[25, 28) on every node$' start.out || fail "start reply: $(cat start.out)"
: >"$T/go"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir cap >wait.out 2>&1 ||
	fail "wait: $(cat wait.out)"
for h in hA hB; do
	step_window "cap/$h.mspti" 3 25 >/dev/null || exit 1
done
: >"$T/stop"
ok "start --hosts --steps 3 --start-step 25: steps [25, 28) on all 4 ranks of both nodes"

# Without --start-step: hA's ranks have run ~0.8 s longer than hB's, so
# each daemon alone would pick a different k.  The start asks every node
# where its ranks are first, then gives all of them one k past the
# furthest; every rank of both nodes records exactly [k, k+3).
r=0
for h in hA hB; do
	for _ in 0 1; do
		MSPTID_RUNTIME_DIR="$T/$h" MSPTI_JOB_ID=sk RANK=$r WORLD_SIZE=4 \
		    LD_PRELOAD="$AGENT_PRELOAD" "$STEPS" --steps 0 --spread 0 \
		    --period-us 5000 --until "$T/stop2" --go "$T/go-$h" \
		    >/dev/null 2>&1 &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	wait_until 10 sh -c "[ \"\$('$MSPTICTL' -r '$T/$h' --json list | python3 -c 'import json,sys; print(len([a for a in json.load(sys.stdin) if a[\"job\"] == \"sk\"]))')\" = 2 ]" ||
		fail "$h: job sk's ranks did not register"
done
: >"$T/go-hA"
sleep 0.8
: >"$T/go-hB"
sleep 0.1
"$MSPTICTL" start --hosts hosts --job sk --steps 3 --output-dir cap2 \
    >start2.out 2>&1 || fail "start: $(cat start2.out)"
common_window start2.out cap2 wait2.out
grep -q '^  window starts: [0-9.]* ms apart across 4 ranks' wait2.out ||
	fail "no window-start skew in the wait reply: $(cat wait2.out)"
ok "start --hosts --steps 3 (no --start-step): one k ($k) for both nodes, steps [k, k+3) on all 4 ranks"

# --duration: one wall-clock instant for every node, chosen ahead of a
# measured fan-out; no node's session starts before it, and the reply
# states how far apart the starts were.
"$MSPTICTL" --json start --hosts hosts --job sk --duration 300ms --output-dir cap3 \
    >start3.json 2>start3.err || fail "start --duration: $(cat start3.json start3.err)"
python3 - start3.json <<'PY' || fail "common start: $(cat start3.json)"
import json, sys
d = json.load(open(sys.argv[1]))
at = d["start_at_ns"]
assert d["nodes_ok"] == 2 and d["ranks_capturing"] == 4, d
for n in d["nodes"]:
    r = n["reply"]
    assert r["start_at_ns"] == at, (n["node"], r["start_at_ns"], at)
    # The daemon started the session at the instant, not before (the
    # request itself went out at once).
    assert r["start_ns"] >= at, (n["node"], r, at)
    # every rank's capture began after the instant, on its node's clock
    caps = [a["capture_start_ns"] for a in r["acks"] if a["pid"]]
    assert len(caps) == 2 and min(caps) >= at, (n["node"], caps, at)
assert d["start_skew_ns"] >= 0 and d["start_late_ns"] >= 0, d
PY
timeout 30 "$MSPTICTL" wait --hosts hosts --output-dir cap3 >wait3.out 2>&1 ||
	fail "wait: $(cat wait3.out)"
"$MSPTICTL" start --hosts hosts --job sk --duration 300ms --output-dir cap4 \
    >start4.out 2>&1 || fail "start --duration: $(cat start4.out)"
grep -q '^  started together: 4 ranks within [0-9.]* ms of each other' start4.out ||
	fail "no start skew in the reply: $(cat start4.out)"
timeout 30 "$MSPTICTL" wait --hosts hosts --output-dir cap4 >wait4.out 2>&1 ||
	fail "wait: $(cat wait4.out)"
ok "start --hosts --duration 300ms: both nodes start at one instant chosen ahead, not before it; the skew is reported"

# A rank already past k when k reaches it records nothing.  The start
# sees it in the setting round's acks and chooses k again from them; a
# node whose ranks pass every k it is given fails the start (rolled back)
# and the wait ends.  The test hook puts the first rounds' k 8 steps
# behind the furthest rank (hA's, 0.8 s ahead of hB's).
MSPTI_TEST_CLUSTER_K_BACK=1 "$MSPTICTL" start --hosts hosts --job sk --steps 3 \
    --output-dir cap7 >start7.out 2>start7.err || fail "start: $(cat start7.out start7.err)"
grep -q 'rank(s) had passed step [0-9]* when it reached them; choosing k again' start7.err ||
	fail "no second choice of k: $(cat start7.out start7.err)"
common_window start7.out cap7 wait7.out
MSPTI_TEST_CLUSTER_K_BACK=9 "$MSPTICTL" start --hosts hosts --job sk --steps 3 \
    --output-dir cap8 >start8.out 2>start8.err &&
	fail "a start whose k every try was passed exited 0: $(cat start8.out)"
# (Both of hA's ranks, or one when the machine's load has let the other
# fall more than 8 steps behind it.)
grep -q '^  hA: FAILED: [12] of its ranks had passed step [0-9]* when it reached them, in each of 3 tries; its session [0-9]* was stopped (rolled back)' start8.out ||
	fail "hA's failure not named: $(cat start8.out start8.err)"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir cap8 >wait8.out 2>&1
[ $? -ne 124 ] || fail "wait hung after a rolled-back start: $(cat wait8.out)"
ok "ranks already past k: k is chosen again; a node whose ranks pass every k fails the start, and wait ends"

# k reaches hA 4 s late, so hA's ranks pass it and k is chosen again; by
# then hB's ranks (160 steps behind) reached the first k and recorded
# their whole window, and hB's session ended.  A window that opened
# cannot move: hB keeps its k instead of failing (it failed the start
# before, "session N is finalized, not active"), the reply says the
# windows differ, and each node records its own whole window.
: >"$T/slow-hA"
"$MSPTICTL" start --hosts hosts --job sk --steps 3 --output-dir cap9 \
    >start9.out 2>start9.err || fail "start: $(cat start9.out start9.err)"
grep -q 'rank(s) had passed step [0-9]* when it reached them; choosing k again' start9.err ||
	fail "no second choice of k: $(cat start9.out start9.err)"
grep -q '^  step windows differ across nodes (k was chosen again after a node.s window had opened at the earlier one): hA from [0-9]* hB from [0-9]*$' start9.out ||
	fail "no differing windows in the reply: $(cat start9.out start9.err)"
kA=$(sed -n 's/.* hA from \([0-9]*\) .*/\1/p' start9.out)
kB=$(sed -n 's/.* hB from \([0-9]*\)$/\1/p' start9.out)
[ "$kA" -gt "$kB" ] || fail "hA's k $kA is not the later one (hB $kB)"
python3 - cap9/manifest.json <<'PY' || fail "manifest: $(cat cap9/manifest.json)"
import json, sys
m = json.load(open(sys.argv[1]))
k = {n["node"]: n for n in m["nodes"]}
assert k["hA"]["ok"] and k["hB"]["ok"], k
PY
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir cap9 >wait9.out 2>&1 ||
	fail "wait: $(cat wait9.out)"
step_window cap9/hA.mspti 3 "$kA" >/dev/null || exit 1
step_window cap9/hB.mspti 3 "$kB" >/dev/null || exit 1
ok "a node whose window opened before k was chosen again keeps it; each node records its whole window"

# retarget --start-step (what the common k is set with): refused, with the
# reason, for a session without --steps, a bad value, or a window that has
# already started.
C="$MSPTICTL -r $T/hA"
sid=$($C --json start --job sk --output plain.mspti | python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])') ||
	fail "plain start"
$C retarget --start-step 5 "$sid" >rt1.out 2>&1 && fail "retarget --start-step of a session without --steps worked"
grep -q 'needs a session with --steps' rt1.out || fail "retarget: $(cat rt1.out)"
$C retarget --start-step -3 "$sid" >rt2.out 2>&1; [ $? = 2 ] || fail "retarget --start-step -3: $(cat rt2.out)"
grep -q "bad start step '-3'" rt2.out || fail "retarget: $(cat rt2.out)"
$C stop "$sid" >/dev/null 2>&1 || fail "stop"
sid=$($C --json start --job sk --steps 100000 --output long.mspti | python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])') ||
	fail "steps start"
wait_until 20 sh -c "$C --json sessions | python3 -c 'import json,sys; s=[x for x in json.load(sys.stdin) if x[\"session\"] == $sid][0]; assert any(t[\"window_start_ns\"] > 0 for t in s[\"targets\"])'" ||
	fail "the window did not start"
$C retarget --start-step 5 "$sid" >rt3.out 2>&1 && fail "retarget after the window started worked"
grep -q "step window has started already" rt3.out || fail "retarget: $(cat rt3.out)"
$C stop "$sid" >/dev/null 2>&1 || fail "stop"
ok "retarget --start-step is refused without --steps, for a bad value, and once a window started"

# hB's msptid goes down: a --steps start still gives hA's ranks one k,
# names hB, and exits nonzero unless --allow-partial.
kill -TERM "$DPID_B"
wait_until 10 sh -c "! '$MSPTICTL' -r '$T/hB' status >/dev/null 2>&1" || fail "hB's msptid still up"
"$MSPTICTL" start --hosts hosts --job sk --steps 3 --output-dir cap5 >start5.out 2>&1 &&
	fail "a --steps start with a node down exited 0: $(cat start5.out)"
grep -q '^1 of 2 nodes, 2 of 2 ranks capturing' start5.out || fail "reply: $(cat start5.out)"
grep -q '^  steps \[[0-9]*, [0-9]*) on every node (one k for all' start5.out || fail "no k: $(cat start5.out)"
grep -q '^  hB: FAILED: msptid is not running' start5.out || fail "hB not named: $(cat start5.out)"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir cap5 >wait5.out 2>&1
k=$(sed -n 's/^  steps \[\([0-9]*\), .*/\1/p' start5.out)
step_window cap5/hA.mspti 3 "$k" >/dev/null || exit 1
"$MSPTICTL" start --hosts hosts --job sk --steps 3 --output-dir cap6 --allow-partial \
    >start6.out 2>&1 || fail "--allow-partial exited nonzero: $(cat start6.out)"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir cap6 >wait6.out 2>&1
: >"$T/stop2"
ok "a node down: the --steps start names it, the others record one window; exit nonzero unless --allow-partial"
echo "cluster-steps: all passed"
