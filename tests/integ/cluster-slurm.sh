#!/bin/sh
# Fan-out over Slurm on a 2-node minicluster, 2 ranks per node: ranks srun
# started show their Slurm rank on each node; one msptictl start/stop on
# the controller captures all of them through srun --overlap; a node whose
# msptid is down is named and fails the start unless --allow-partial.
. "$(dirname "$0")/cluster-lib.sh"

mc_up 2
mc_job 2 2
for i in 1 2; do
	got=$($MC exec node$i "$MSPTICTL" --json list | python3 -c 'import json,sys; print(sorted((a["job"], a["rank"], a["local_rank"], a["world_size"]) for a in json.load(sys.stdin)))')
	r0=$(( (i - 1) * 2 ))
	want="[('$JOB', $r0, 0, 4), ('$JOB', $((r0 + 1)), 1, 4)]"
	[ "$got" = "$want" ] || fail "node$i list: $got, want $want"
done
ok "msptictl list on each node shows its srun ranks (rank, local rank, world size)"

ctl "$MSPTICTL" start --cluster slurm --job "$JOB" --output-dir "$T/cap" >"$T/start.out" 2>&1 ||
	fail "cluster start failed: $(cat "$T/start.out")"
grep -q '^2 of 2 nodes, 4 of 4 ranks capturing$' "$T/start.out" ||
	fail "start reply: $(cat "$T/start.out")"
python3 - "$T/cap/manifest.json" "$JOB" <<'PY' || fail "manifest after start: $(cat "$T/cap/manifest.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["job"] == sys.argv[2] and m["via"] == "slurm", m
assert [n["node"] for n in m["nodes"]] == ["node1", "node2"], m
assert all(n["ok"] and n["session"] > 0 for n in m["nodes"]), m
ranks = sorted(r["rank"] for n in m["nodes"] for r in n["ranks"] if r["ok"])
assert ranks == [0, 1, 2, 3], ranks
assert [n["file"].rsplit("/", 1)[1] for n in m["nodes"]] == ["node1.mspti", "node2.mspti"], m
PY
ok "one start captures 4 ranks on 2 nodes; the manifest lists nodes, ranks and files"

ctl "$MSPTICTL" --json sessions --cluster slurm --job "$JOB" >"$T/sessions.out" 2>&1 ||
	fail "cluster sessions: $(cat "$T/sessions.out")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [(n["node"], [s["state"] for s in n["sessions"]]) for n in d] == [("node1", ["active"]), ("node2", ["active"])], d' "$T/sessions.out" ||
	fail "sessions: $(cat "$T/sessions.out")"
ok "sessions --cluster lists each node's active session"

ctl "$MSPTICTL" stop --cluster slurm --job "$JOB" --output-dir "$T/cap" >"$T/stop.out" 2>&1 ||
	fail "cluster stop failed: $(cat "$T/stop.out")"
grep -q '^stop: 2 of 2 nodes' "$T/stop.out" || fail "stop reply: $(cat "$T/stop.out")"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert [n["state"] for n in m["nodes"]] == ["finalized"]*2 and all("losses" in n for n in m["nodes"]), m' "$T/cap/manifest.json" ||
	fail "manifest after stop: $(cat "$T/cap/manifest.json")"
for i in 1 2; do [ -s "$T/cap/node$i.mspti" ] || fail "no trace for node$i"; done
ok "stop --cluster finalizes every node's trace and records states and losses"

# node2's msptid goes down: named, with the reason, and the start fails.
kill -TERM "$($MC pid node2 msptid)"
wait_until 10 sh -c "! $MC exec node2 test -S /run/msptid/ctl.sock" || fail "node2 msptid still up"
ctl "$MSPTICTL" start --cluster slurm --job "$JOB" --output-dir "$T/cap2" >"$T/p1.out" 2>&1 &&
	fail "a partial start exited 0: $(cat "$T/p1.out")"
grep -q '^1 of 2 nodes, 2 of 2 ranks capturing' "$T/p1.out" || fail "partial reply: $(cat "$T/p1.out")"
grep -q '^  node2: FAILED: msptid is not running' "$T/p1.out" || fail "node2 not named: $(cat "$T/p1.out")"
ok "a node without msptid is named with the reason; the start exits nonzero"
ctl "$MSPTICTL" stop --cluster slurm --job "$JOB" --output-dir "$T/cap2" >"$T/p1s.out" 2>&1 ||
	fail "stopping the partial capture: $(cat "$T/p1s.out")"
ctl "$MSPTICTL" start --cluster slurm --job "$JOB" --output-dir "$T/cap3" --allow-partial >"$T/p2.out" 2>&1 ||
	fail "--allow-partial exited nonzero: $(cat "$T/p2.out")"
grep -q '^  node2: FAILED: msptid is not running' "$T/p2.out" || fail "node2 not named: $(cat "$T/p2.out")"
ok "--allow-partial accepts the partial start (exit 0), still naming node2"
ctl "$MSPTICTL" stop --cluster slurm --job "$JOB" --output-dir "$T/cap3" >"$T/p2s.out" 2>&1 ||
	fail "stopping the partial capture: $(cat "$T/p2s.out")"

# node2 itself goes down (its slurmd dies): srun cannot launch there, and
# node2 is named with srun's reason while node1 still starts.
kill -KILL "$($MC pid node2 slurmd)"
ctl "$MSPTICTL" start --cluster slurm --job "$JOB" --output-dir "$T/cap4" --timeout 30s >"$T/d.out" 2>&1 &&
	fail "a start with a node down exited 0: $(cat "$T/d.out")"
grep -q '^1 of 2 nodes' "$T/d.out" || fail "node-down reply: $(cat "$T/d.out")"
grep -q '^  node2: FAILED: srun: ' "$T/d.out" || fail "node2 not named: $(cat "$T/d.out")"
grep -q '^  node1: session ' "$T/d.out" || fail "node1 not started: $(cat "$T/d.out")"
ok "a node that is down is named with srun's reason; the others start"
touch "$T/go"
echo "cluster-slurm: all passed"
