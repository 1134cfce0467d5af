#!/bin/sh
# Partial results across processes, without root: two "hosts" reached
# through MSPTI_SSH (a local stand-in for ssh, as in cluster-steps.sh)
# share a capture directory; `report --hosts` has each host analyse only
# its own DIR/HOST.mspti and merges the summaries into the report that
# `report DIR` prints (text, --json, warnings), for every --jobs.  A host
# whose reply is forged (a flipped byte, a reply cut short) or that
# cannot be reached or does not answer in --timeout is named with a
# one-line reason, nothing of its
# partial is merged, and the report fails unless --allow-partial.
. "$(dirname "$0")/lib.sh"

cat >"$T/fakessh" <<EOS
#!/bin/sh
while [ "\$1" = -o ]; do shift 2; done
host=\$1; shift
case \$host in hA|hB|hC) ;; hung) exec sleep 60;; *) echo "ssh: Could not resolve hostname \$host" >&2; exit 255;; esac
exec sh -c "\$*"
EOS
# The node's msptictl, or a forger of its reply (FORGE=HOST:how).
cat >"$T/remote" <<EOS
#!/bin/sh
case "\$FORGE" in "\$MSPTI_NODE":*) ;; *) exec "$MSPTICTL" "\$@";; esac
"$MSPTICTL" "\$@" | python3 -c '
import base64, json, sys
how = sys.argv[1]
lines = sys.stdin.read().splitlines()
if how == "cut":
    print(lines[0]); sys.exit(0)
data = bytearray(base64.b64decode("".join(json.loads(l)["d"] for l in lines[1:-1])))
data[len(data) // 2] ^= 0x10
print(lines[0])
s = base64.b64encode(bytes(data)).decode()
for i in range(0, len(s), 480):
    print(json.dumps({"d": s[i:i + 480]}, separators=(",", ":")))
print(lines[-1])' "\${FORGE#*:}"
EOS
chmod +x "$T/fakessh" "$T/remote"
export MSPTI_SSH="$T/fakessh" MSPTI_REMOTE_MSPTICTL="$T/remote"
export NPUSIM_SHM_PREFIX="${NPUSIM_SHM_PREFIX:-mspti}-rpart$$"
"$top_builddir/tests/integ/capture-inproc" -n 4 -s 6 -o "$T/inp" >"$T/inp.out" 2>&1 ||
	fail "capture-inproc: $(cat "$T/inp.out")"
mkdir "$T/cap"
# hA's file is two ranks' traces as one (hosts differ by file), hB two.
cp "$T/inp.rank0.trace" "$T/cap/hA.mspti"
cp "$T/inp.rank2.trace" "$T/cap/hB.mspti"
cp "$T/inp.rank1.trace" "$T/cap/hC.mspti"
cp "$T/inp.rank3.trace" "$T/cap/hC-snapshot.mspti"	# not a trace of DIR
printf 'hA\nhB\nhC\n' >"$T/hosts"
cd "$T" || fail cd

for j in 1 3; do
	"$MSPTICTL" report --jobs $j cap >central.$j.out 2>central.$j.err || fail "central: $(cat central.$j.err)"
	"$MSPTICTL" report --jobs $j --json cap >central.$j.json 2>/dev/null || fail "central --json"
done
cmp -s central.1.out central.3.out && cmp -s central.1.json central.3.json &&
    cmp -s central.1.err central.3.err || fail "report DIR differs between --jobs 1 and 3"
"$MSPTICTL" report cap/hA.mspti cap/hB.mspti cap/hC.mspti >files.out 2>/dev/null
cmp -s files.out central.1.out || fail "report DIR is not report of its *.mspti files in name order"
grep -q 'files  *3$' central.1.out || fail "the snapshot was read: $(head -5 central.1.out)"
ok "report DIR: its *.mspti files but snapshots, in name order; the same for every --jobs"

"$MSPTICTL" report --partial-out p1.bin --jobs 1 cap 2>/dev/null || fail "--partial-out --jobs 1"
"$MSPTICTL" report --partial-out p3.bin --jobs 3 cap 2>/dev/null || fail "--partial-out --jobs 3"
[ -s p1.bin ] && cmp -s p1.bin p3.bin || fail "--partial-out differs between --jobs 1 and 3"
[ "$(grep -c MSPTIPRT p1.bin)" -ge 1 ] || fail "no partial result in p1.bin"
ok "--partial-out: the files' partials, the same bytes for every --jobs"

"$MSPTICTL" report --hosts hosts cap >dist.out 2>dist.err || fail "distributed: $(cat dist.err)"
"$MSPTICTL" report --hosts hosts --json cap >dist.json 2>/dev/null || fail "distributed --json"
cmp -s dist.out central.1.out || fail "distributed report differs: $(diff central.1.out dist.out | head)"
cmp -s dist.json central.1.json || fail "distributed --json differs: $(diff central.1.json dist.json | head)"
grep -q '^msptictl report: 3 of 3 nodes, 3 ranks; summaries moved ' dist.err || fail "summary line: $(cat dist.err)"
grep -v '^msptictl report: 3 of 3 nodes' dist.err | cmp -s - central.1.err || fail "warnings differ: $(cat dist.err)"
ok "report --hosts on a shared DIR: each host its own file; the same report as report DIR"

# A long capture: 90,000 all-reduces and 22,500 steps a rank.  Every
# collective and step would make each host's summary 2 MB; past the
# report's caps they are sampled on every rank alike, in both reports, so
# the summaries stay under 1 MB a rank and the two reports are the same.
mkdir long
for r in 0 1; do
	h=$(printf 'hA hB' | cut -d' ' -f$((r + 1)))
	"$top_builddir/tests/integ/coll-trace" "long/$h.mspti" $h $r 90000 ||
		fail "coll-trace $r"
done
printf 'hA\nhB\n' >hosts.long
"$MSPTICTL" report long >long.out 2>long.err || fail "central, long: $(cat long.err)"
"$MSPTICTL" report --hosts hosts.long long >longd.out 2>longd.err ||
	fail "distributed, long: $(cat longd.err)"
cmp -s longd.out long.out || fail "long: distributed report differs: $(diff long.out longd.out | head)"
grep -q 'steps sampled (a rank has over 8192 steps or 16384 collectives in them): .* a multiple of 8 (the same on every rank), each counted 8 times;' long.err ||
	fail "long: not sampled: $(cat long.err)"
grep -v '^msptictl report: 2 of 2 nodes' longd.err | cmp -s - long.err ||
	fail "long: warnings differ: $(cat longd.err)"
most=$(sed -n 's/.*summaries moved [0-9]* bytes ([0-9]* per rank, at most \([0-9]*\);.*/\1/p' longd.err)
[ -n "$most" ] && [ "$most" -le 1048576 ] || fail "long: summaries over 1 MB a rank: $(cat longd.err)"
grep -q 'over the 1 MB' longd.err && fail "long: $(cat longd.err)"
# 2,812 of 22,500 steps kept a rank, each all-reduce in them counted 8 times.
grep -q '^hcom_allReduce_ *179968 ' long.out || fail "long: counts: $(grep -A3 'Communication (per' long.out)"
ok "a long capture: collectives and steps sampled alike, summaries under 1 MB a rank ($most bytes), the same report"

for how in flip cut; do
	FORGE=hB:$how "$MSPTICTL" report --hosts hosts cap >forged.out 2>forged.err &&
		fail "a forged partial ($how) was accepted: $(cat forged.err)"
	case $how in
	flip) want='^  hB: FAILED: /.*/cap/hB.mspti: corrupt partial result (checksum)$' ;;
	cut) want='^  hB: FAILED: its reply was cut short$' ;;
	esac
	grep -q "$want" forged.err || fail "hB ($how) not named: $(cat forged.err)"
	[ "$(grep -c FAILED forged.err)" = 1 ] || fail "other hosts failed: $(cat forged.err)"
	[ ! -s forged.out ] || fail "a report was printed"
done
FORGE=hB:flip "$MSPTICTL" report --hosts hosts --allow-partial --json cap >part.json 2>part.err ||
	fail "--allow-partial: $(cat part.err)"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert sorted({s["Rank"] for s in r["steps"]}) == [0, 1], r["steps"]' part.json ||
	fail "--allow-partial merged hB's ranks: $(head -c 300 part.json)"
ok "a forged partial or a reply cut short: that host is named, nothing of it merged"

echo nosuchhost >>hosts
"$MSPTICTL" report --hosts hosts cap >bad.out 2>bad.err && fail "an unreachable host: exit 0"
grep -q '^  nosuchhost: FAILED: ssh: Could not resolve' bad.err || fail "host not named: $(cat bad.err)"
ok "an unreachable host is named with ssh's reason; exit 1"

printf 'hA\nhung\n' >hosts2
"$MSPTICTL" report --hosts hosts2 --timeout 2s --allow-partial cap >hung.out 2>hung.err ||
	fail "--allow-partial with a hung host: $(cat hung.err)"
grep -q '^  hung: FAILED: no reply within 2 s' hung.err || fail "hung host not named: $(cat hung.err)"
grep -q '^msptictl report: 1 of 2 nodes, 1 ranks' hung.err || fail "hung: $(cat hung.err)"
ok "--timeout bounds the fan-out: a host that does not answer is named"
echo "report-partial: all passed"
