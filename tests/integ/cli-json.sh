#!/bin/sh
# --json for every msptictl verb that prints a result, against a real
# msptid and a real npusim-train with the agent: stdout is one JSON
# document (python3 -m json.tool parses it) and says what happened.
# export --json lists the files it wrote; run --json keeps the command's
# own stdout off ours; metrics --json gives byte counts as exact integers.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

# j VERB-ARGS...: msptictl VERB-ARGS... --json; its stdout in $T/j.json,
# which must be valid JSON; exits as msptictl did.
j() {
	$CTL "$@" --json >"$T/j.json" 2>"$T/j.err"; jrc=$?
	python3 -m json.tool "$T/j.json" >/dev/null 2>&1 ||
		fail "'$* --json' (exit $jrc) is not JSON: $(head -c 400 "$T/j.json") $(cat "$T/j.err")"
	return $jrc
}

start_daemon
$WITH_AGENT "$TRAIN" --steps 0 >"$T/train.out" 2>&1 &
TP=$!
PIDS="$PIDS $TP"
wait_until 20 is_registered "$TP" || fail "npusim-train did not register"

j status || fail "status: $(cat "$T/j.err")"
[ "$(json "$T/j.json" 'j["agents"]')" -ge 1 ] || fail "status agents"
j list || fail "list"
[ "$(json "$T/j.json" 'len([a for a in j if a["pid"] == '"$TP"'])')" = 1 ] ||
	fail "list: no pid $TP"
j sessions || fail "sessions"
ok "status, list, sessions"

j start --pid "$TP" --output "$T/a.mspti" || fail "start: $(cat "$T/j.err")"
SA=$(json "$T/j.json" 'j["session"]')
[ "$(json "$T/j.json" 'j["started"]')" = True ] || fail "start: not started"
j retarget "$SA" --kinds -memset || fail "retarget: $(cat "$T/j.err")"
[ "$(json "$T/j.json" 'j["session"]')" = "$SA" ] || fail "retarget: session"
j stop "$SA" || fail "stop: $(cat "$T/j.err")"
[ "$(json "$T/j.json" 'j["state"]')" = finalized ] || fail "stop: state"
RECORDS=$(json "$T/j.json" 'j["records"]')
[ "$RECORDS" -gt 0 ] || fail "stop: no records"
j wait "$SA" || fail "wait: $(cat "$T/j.err")"
[ "$(json "$T/j.json" 'j["records"]')" = "$RECORDS" ] || fail "wait: records"
j start --pid "$TP" --mode ring --output "$T/ring.mspti" || fail "start ring"
SB=$(json "$T/j.json" 'j["session"]')
j snapshot "$SB" --output "$T/snap.mspti" || fail "snapshot: $(cat "$T/j.err")"
[ "$(json "$T/j.json" 'j["snapshot"]')" = "$T/snap.mspti" ] || fail "snapshot path"
j stop "$SB" || fail "stop ring"
ok "start, retarget, snapshot, stop, wait"

# metrics: byte counts are integers, written without a fraction or an
# exponent; the other units are plain JSON numbers.
check_metrics() {
	$CTL metrics --json >"$T/m.json" 2>/dev/null &&
	python3 - "$T/m.json" "$TP" <<'PY'
import json, re, sys
raw = open(sys.argv[1]).read()
m = json.loads(raw)
tracks = [t for d in m["devices"] for t in d["tracks"].values()]
tracks += [t for p in m["processes"] if p["pid"] == int(sys.argv[2])
           for t in p["tracks"].values()]
b = [t for t in tracks if t["unit"] == "bytes" and t["samples"] > 0]
assert b and any(t["max"] >= 1 << 20 for t in b), "no byte tracks yet"
for t in b:
    for k in ("min", "avg", "max", "latest"):
        assert type(t[k]) is int, (k, t)
# Not one byte value in the text has a '.' or an exponent.
for v in re.findall(r'"unit":"bytes","samples":[0-9]+,([^}]*)}', raw):
    for k, n in re.findall(r'"(min|avg|max|latest)":([^,}]*)', v):
        assert re.fullmatch(r'[0-9]+', n), (k, n)
PY
}
wait_until 20 check_metrics || { check_metrics; fail "metrics --json: $(head -c 600 "$T/m.json")"; }
j metrics --device 0 --last 30s || fail "metrics"
ok "metrics --json: byte counts are exact integers"

j report "$T/a.mspti" || fail "report: $(cat "$T/j.err")"
# export --json: each file it names exists, is new, and is all it wrote.
for f in chrome perfetto csv; do
	out=$T/x.$f
	j export "$T/a.mspti" --format $f -o "$out" || fail "export $f: $(cat "$T/j.err")"
	python3 - "$T/j.json" "$f" "$out" "$RECORDS" <<'PY' || fail "export --format $f: $(cat "$T/j.json")"
import json, os, sys
j = json.load(open(sys.argv[1]))
fmt, out, records = sys.argv[2], sys.argv[3], int(sys.argv[4])
assert j["format"] == fmt and j["output"] == out, j
# A loaded machine may lose records (the agent's ring): they are counted.
assert j["records"] >= records and j["lost"] >= 0, j
assert j["partial"] == (j["lost"] > 0), j
assert j["inputs"] == [os.path.join(os.path.dirname(out), "a.mspti")], j
files = j["files"]
assert files, j
for f in files:
    assert os.path.isfile(f) and os.path.getsize(f) > 0, f
if fmt == "csv":
    on_disk = sorted(os.path.join(d, n) for d, _, ns in os.walk(out) for n in ns)
    assert sorted(files) == on_disk, (files, on_disk)
    assert os.path.join(out, "op_statistic.csv") in files, files
else:
    assert files == [out], files
PY
done
# A second export into the same directory names what it wrote again.
j export "$T/a.mspti" --format csv -o "$T/x.csv" || fail "export csv again"
[ "$(json "$T/j.json" 'len(j["files"])')" -gt 1 ] || fail "re-export names no file"
$CTL export "$T/a.mspti" --format chrome -o - --json >/dev/null 2>"$T/e.err"
[ $? -eq 2 ] || fail "export -o - --json is not a usage error"
ok "report --json; export --json names the files it wrote"

kill -TERM "$TP"; wait "$TP" 2>/dev/null

# run --json: the command writes on its stdout; ours is still one JSON
# document, the command's output is on stderr.
cd "$T" || fail "cd"
$CTL run --json --output "$T/run.mspti" -- sh -c \
    'echo child-says-hello; "$0" --steps 2' "$TRAIN" >"$T/run.json" 2>"$T/run.err" ||
	fail "run --json: $(cat "$T/run.err")"
python3 -m json.tool "$T/run.json" >/dev/null || fail "run --json stdout: $(cat "$T/run.json")"
grep -q child-says-hello "$T/run.err" || fail "the command's stdout is lost: $(cat "$T/run.err")"
! grep -q child-says-hello "$T/run.json" || fail "the command's stdout is in the JSON"
python3 - "$T/run.json" "$T/run.mspti" <<'PY' || fail "run --json content: $(cat "$T/run.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["exit_code"] == 0 and j["trace"] == sys.argv[2], j
assert j["session"]["state"] == "finalized" and j["session"]["records"] > 0, j
PY
$CTL run --json --report=summary --output "$T/run2.mspti" -- "$TRAIN" --steps 2 \
    >"$T/run2.json" 2>"$T/run2.err" || fail "run --json --report: $(cat "$T/run2.err")"
python3 - "$T/run2.json" <<'PY' || fail "run --json --report: $(cat "$T/run2.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["session"]["state"] == "finalized", j
assert "summary" in j["report"], j
PY
$CTL run --json --output "$T/run3.mspti" -- sh -c 'exit 5' >"$T/run3.json" 2>/dev/null
[ $? -eq 5 ] || fail "run --json: the exit code did not pass through"
[ "$(json "$T/run3.json" 'j["exit_code"]')" = 5 ] || fail "run --json exit_code"
ok "run --json: one JSON document on stdout, the command's output on stderr"
echo "cli-json: all passed"
