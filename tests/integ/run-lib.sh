# Helpers for the `msptictl run` tests (sourced after lib.sh and
# session-lib.sh).

# check_dist TRACE RANKS STEPS [MIN_STEPS]: the trace of an npusim-dist
# run is finalized (footer, not truncated) and holds every rank, each with
# its process record, its first runtime call (aclrtSetDevice), the first
# kernel the sim launches (MatMulForward, step 1) and at least MIN_STEPS
# (default STEPS) step markers.
check_dist() {
	"$DUMP" "$1" >"$T/check.jsonl" 2>"$T/check.err" ||
		fail "trace unreadable: $(cat "$T/check.err")"
	python3 - "$T/check.jsonl" "$2" "$3" "${4:-$3}" <<'PY' >"$T/check.out" 2>&1 ||
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
end, recs = lines[-1], lines[:-1]
nranks, steps, min_steps = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert end["end"] and not end["truncated"], end
assert "footer" in end, "no footer: %s" % end
ranks = {}
for r in recs:
    if r["type"] == "process" and r["rank"] >= 0:
        ranks[r["rank"]] = r["pid"]
assert sorted(ranks) == list(range(nranks)), "ranks %s" % sorted(ranks)
for rank, pid in sorted(ranks.items()):
    mine = sorted((r for r in recs if r["pid"] == pid), key=lambda r: r["ts"])
    api = [r for r in mine if r["type"] == "api"]
    kern = [r for r in mine if r["type"] == "kernel"]
    marks = [r for r in mine if r["type"] == "marker" and r["name"] == "step"]
    assert api and api[0]["name"] == "aclrtSetDevice", \
        "rank %d: first call %s" % (rank, api[:1])
    assert kern and kern[0]["name"] == "MatMulForward", \
        "rank %d: first kernel %s" % (rank, kern[:1])
    starts = {m["id"] for m in marks}
    assert len(starts) >= min_steps, "rank %d: %d steps" % (rank, len(starts))
print("ok", sorted(ranks))
PY
	fail "trace content: $(tail -3 "$T/check.out")"
}

# msptid_pids: pids of every msptid on the machine, sorted.
msptid_pids() {
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = msptid ] && echo "${p#/proc/}"
	done | sort -n
}

# new_msptids BEFORE: msptid pids not in BEFORE that serve a runtime dir
# of this test (other test suites may start daemons meanwhile).
new_msptids() {
	for p in $(msptid_pids); do
		case " $(echo $1) " in *" $p "*) continue;; esac
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$T" &&
			echo "$p"
	done
}

# Kills what a test left running in run's process group (by its pgid).
run_cleanup() {
	for g in $GROUPS_STARTED; do
		kill -9 -- "-$g" 2>/dev/null
	done
	session_cleanup
}
GROUPS_STARTED=""
trap run_cleanup EXIT
