# Helpers for the scenario tests (sourced after lib.sh and
# session-lib.sh): run a scenario of npusim-dist under `msptictl run`
# against the test's msptid, report it, and check the report's slow-rank
# verdict against the scenario's own ground truth (--truth).
#
# Faults are generous (20%+ of a step's compute) and the simulator's time
# scale stretches modelled work, so the checks hold on a loaded machine;
# nothing here asserts a duration.
: "${SCN_SCALE:=2}"
export NPUSIM_TIME_SCALE="$SCN_SCALE"

# scenario_run NAME ARGS...: truth in $T/NAME.truth, report in
# $T/NAME.json (every section), the program's output in $T/NAME.out.
scenario_run() {
	local name=$1
	shift
	"$DIST" --scenario "$name" "$@" --truth >"$T/$name.truth" ||
		fail "$name: --truth"
	$CTL run --output "$T/$name.mspti" -- "$DIST" --scenario "$name" "$@" \
	    >"$T/$name.out" 2>"$T/$name.err" ||
		fail "$name: run: $(tail -5 "$T/$name.err")"
	"$MSPTICTL" report --json "$T/$name.mspti" >"$T/$name.json" \
	    2>"$T/$name.rerr" || fail "$name: report: $(cat "$T/$name.rerr")"
}

# scenario_check NAME [PYTHON]: the verdict names truth's slow rank with
# truth's cause (or no rank when truth has none); PYTHON, if given, runs
# with t (truth), r (report) and v (the verdict row) and must not raise.
scenario_check() {
	python3 - "$T/$1.truth" "$T/$1.json" "${2:-}" <<'PY' ||
import json, os, sys
t = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
v = r["slow_rank"][0]
assert len([x for x in r["ranks"] if x["Rank"] >= 0]) == t["ranks"], \
    ("ranks", r["ranks"])
if t["slow_ranks"]:
    assert v["Rank"] == t["slow_ranks"][0], ("verdict rank", v, t)
    assert v["Cause"] == t["cause"], ("verdict cause", v, t)
    assert v["Share of Step(%)"] > 0, v
elif os.environ.get("MSPTI_ASAN_RUNTIME") and v["Cause"] == "host/launch":
    # Sanitizer build: the instrumented host runs far slower than the
    # model, so host/launch time is the build's, not the scenario's.
    print("sanitizer build: host/launch verdict on a faultless run", v)
else:
    assert v["Rank"] == -1, ("a rank named where none is slow", v, t)
exec(sys.argv[3])
PY
		fail "$1: verdict against truth: $(cat "$T/$1.truth") -- report: $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["slow_rank"], [(x["Rank"], x["Computing Avg(us)"], x["Free Avg(us)"],
    x["Wait Avg(us)"]) for x in r["ranks"]])' "$T/$1.json")"
}
