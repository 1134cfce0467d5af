#!/bin/sh
# `msptictl export --format ascend-pt` of a real 4-rank capture (msptid,
# the agent in npusim-dist, msptictl run): the torch_npu tree that
# msprof-analyze reads, parsed file by file against the documented format
# and cross-checked against the capture (ascendpt-schema.py); one
# directory per rank with the right rank ids; modes whatever the umask;
# bad -o targets get one line and lose nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
s=${top_srcdir:-..}
RANKS=4
STEPS=6

start_daemon
cd "$T" || fail "cd"
$CTL run --output "$T/dist.mspti" -- "$DIST" --ranks $RANKS --steps $STEPS \
    >"$T/dist.out" 2>"$T/dist.err" || fail "run dist: $(cat "$T/dist.err")"
"$DUMP" "$T/dist.mspti" >"$T/dump.jsonl" || fail "trace-dump"
$CTL report --json "$T/dist.mspti" >"$T/rep.json" 2>"$T/rep.err" ||
	fail "report: $(cat "$T/rep.err")"

# A umask that would make group-writable or private files: the tools
# refuse the first, so modes are set, not inherited.
(umask 002 && $CTL export "$T/dist.mspti" --format ascend-pt -o "$T/apt") \
    >"$T/x.out" 2>"$T/x.err" || fail "export: $(cat "$T/x.err")"
[ -s "$T/x.err" ] && fail "export wrote to stderr: $(cat "$T/x.err")"
python3 "$s/tests/integ/ascendpt-schema.py" "$T/apt" "$T/dump.jsonl" \
    "$T/rep.json" $RANKS $STEPS >"$T/schema.out" 2>&1 ||
	fail "schema: $(tail -5 "$T/schema.out")"
ok "schema and capture: $(cat "$T/schema.out")"

# One directory per rank: profiler_info_<rank>.json, the rank's own pid in
# the name, for ranks 0..3 exactly.
python3 - "$T/apt" "$T/dump.jsonl" $RANKS <<'PY' || fail "rank directories"
import json, os, re, sys
root, n = sys.argv[1], int(sys.argv[3])
dump = [json.loads(l) for l in open(sys.argv[2])][:-1]
pid = {p["rank"]: p["pid"] for p in dump
       if p["type"] == "process" and p["rank"] >= 0}
dirs = sorted(os.listdir(root))
assert len(dirs) == n, dirs
got = {}
for d in dirs:
    info = [f for f in os.listdir(os.path.join(root, d))
            if f.startswith("profiler_info")]
    r = int(re.match(r"profiler_info_(\d+)\.json$", info[0]).group(1))
    assert d.split("_")[-4] == str(pid[r]), (d, pid[r])
    meta = json.load(open(os.path.join(root, d, "profiler_metadata.json")))
    assert meta["distributed_args"]["rank"] == r, meta
    got[r] = d
assert sorted(got) == list(range(n)), got
PY
ok "4 ranks: 4 directories, profiler_info_0..3.json, each with its pid"

# Exporting again into the same directory gives the same tree, and puts
# back modes the tools would refuse.
(cd "$T/apt" && find . -type f | sort | xargs md5sum) >"$T/sum1"
chmod 0777 "$T"/apt/*/ASCEND_PROFILER_OUTPUT
chmod 0666 "$T"/apt/*/profiler_metadata.json
$CTL export "$T/dist.mspti" --format ascend-pt -o "$T/apt" ||
	fail "second export"
(cd "$T/apt" && find . -type f | sort | xargs md5sum) >"$T/sum2"
cmp -s "$T/sum1" "$T/sum2" || fail "re-export differs: $(diff "$T/sum1" \
    "$T/sum2" | head -3)"
python3 "$s/tests/integ/ascendpt-schema.py" "$T/apt" "$T/dump.jsonl" \
    "$T/rep.json" $RANKS $STEPS >"$T/schema.out" 2>&1 ||
	fail "schema after re-export: $(tail -5 "$T/schema.out")"
ok "re-export into the same directory: identical files, modes put right"

# A scenario of every collective kind (p2p in a group of two: links to
# the peer) with AI_CPU fallback kernels on one rank.
$CTL run --output "$T/sc.mspti" -- "$DIST" --scenario aicpu --ranks 2 \
    --steps 3 >"$T/sc.out" 2>"$T/sc.err" || fail "run aicpu: $(cat "$T/sc.err")"
"$DUMP" "$T/sc.mspti" >"$T/sc.jsonl" || fail "trace-dump sc"
$CTL report --json "$T/sc.mspti" >"$T/sc-rep.json" || fail "report sc"
$CTL export "$T/sc.mspti" --format ascend-pt -o "$T/sc-apt" ||
	fail "export sc"
grep -q ',AI_CPU,' "$T"/sc-apt/*/ASCEND_PROFILER_OUTPUT/kernel_details.csv ||
	fail "no AI_CPU kernel in the aicpu scenario"
python3 "$s/tests/integ/ascendpt-schema.py" "$T/sc-apt" "$T/sc.jsonl" \
    "$T/sc-rep.json" 2 3 >"$T/sc-schema.out" 2>&1 ||
	fail "schema (scenario): $(tail -5 "$T/sc-schema.out")"
ok "scenario aicpu, 2 ranks: $(cat "$T/sc-schema.out")"

# Bad -o: one line on stderr, exit 1, nothing lost.
one_line() {	# WHAT OUT
	$CTL export "$T/dist.mspti" --format ascend-pt -o "$2" \
	    >"$T/bad.out" 2>"$T/bad.err"
	rc=$?
	[ "$rc" -eq 1 ] || fail "$1: exit $rc"
	[ "$(wc -l <"$T/bad.err")" -eq 1 ] ||
		fail "$1: not one line: $(cat "$T/bad.err")"
	grep -q "^msptictl export: $2: " "$T/bad.err" ||
		fail "$1: $(cat "$T/bad.err")"
}
echo keep >"$T/file"
one_line "regular file" "$T/file"
[ "$(cat "$T/file")" = keep ] || fail "the file was changed"
mkfifo "$T/fifo"
one_line "fifo" "$T/fifo"
[ -p "$T/fifo" ] || fail "the fifo was replaced"
one_line "below a file" "$T/file/sub"
one_line "missing parent" "$T/no/such"
if [ "$(id -u)" -ne 0 ]; then
	mkdir "$T/ro" && chmod 0555 "$T/ro"
	one_line "unwritable" "$T/ro/apt"
else
	# Root writes anywhere permissions allow; /proc takes no directories.
	one_line "unwritable" "/proc/self/mspti-apt"
fi
ok "regular file, fifo, missing parent, unwritable: one line, exit 1"
echo "export-ascendpt: all passed"
