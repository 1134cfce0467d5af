#!/bin/sh
# The Perfetto export against the Chrome JSON export of the same real
# multi-rank capture (msptid, the agent in npusim-dist, msptictl run):
# decoded with protoc and proto/perfetto, with every sequence's
# incremental state applied (tests/integ/perfetto_resolve.py), each slice,
# instant and counter must be in the Chrome file with the same name,
# category, timestamp and duration to the ns, and the same args.  Each
# track is one packet sequence of its own, its state cleared in its first
# packet; interned ids resolve on their sequence and are defined once
# there.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/run-lib.sh"
s=${top_srcdir:-..}

start_daemon
cd "$T" || fail "cd"
$CTL run --output "$T/dist.mspti" -- "$DIST" --ranks 2 --steps 8 \
    >"$T/dist.out" 2>"$T/dist.err" || fail "run dist: $(cat "$T/dist.err")"
$CTL export "$T/dist.mspti" --format perfetto -o "$T/x.pb" ||
	fail "export perfetto"
$CTL export "$T/dist.mspti" --format chrome -o "$T/x.json" ||
	fail "export chrome"
# Deflated batches (TracePacket.compressed_packets) by default; inflated,
# they are exactly what MSPTI_PERFETTO_DEFLATE=0 writes.
MSPTI_PERFETTO_DEFLATE=0 $CTL export "$T/dist.mspti" --format perfetto \
    -o "$T/plain.pb" || fail "export perfetto, plain"
python3 - "$T/x.pb" "$T/plain.pb" "$s" <<'PY' >"$T/z.out" 2>&1 ||
import sys
sys.path.insert(0, sys.argv[3] + "/tests/integ")
import perfetto_resolve as pr
z, plain = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
# Every top-level packet is one compressed_packets field.
i = 0
while i < len(z):
    k, j = pr.varint(z, i)
    n, j = pr.varint(z, j)
    assert k == 0x0a and pr.varint(z, j)[0] == (50 << 3 | 2), "plain packet"
    i = j + n
assert pr.inflate(z) == plain, "inflated differs from the plain export"
assert 3 * len(z) < len(plain), (len(z), len(plain))
print("deflated %d bytes, plain %d" % (len(z), len(plain)))
PY
	fail "compressed packets: $(tail -3 "$T/z.out")"
ok "$(cat "$T/z.out")"
python3 - "$T/x.pb" "$s" "$T/x.json" <<'PY' >"$T/pf.out" 2>&1 ||
import collections, decimal, json, sys
sys.path.insert(0, sys.argv[2] + "/tests/integ")
import perfetto_resolve as pr

tracks, evs = pr.events(sys.argv[1], sys.argv[2])
ch = json.load(open(sys.argv[3]), parse_float=decimal.Decimal)
base = ch["baseTimeNanoseconds"]
ns = lambda us: base + int(decimal.Decimal(us) * 1000)

# One sequence per track, one track per sequence, and the descriptors'
# sequence carries no events.
seq_of = {}
for e in evs:
    assert seq_of.setdefault(e["track_uuid"], e["seq"]) == e["seq"], \
        "track on two sequences"
assert len(set(seq_of.values())) == len(seq_of), "tracks share a sequence"
assert 1 not in seq_of.values()
assert all(u in tracks for u in seq_of), "event on an undeclared track"
# The interning made a difference: names on the wire are ids.
raw = open(sys.argv[1], "rb").read()
assert raw.count(b"aclrtLaunchKernel") <= len(seq_of), \
    "a name is written more often than once per sequence"

def norm(v):
    # Chrome's numbers are JSON numbers ("%.3f" for a bandwidth).
    return ("s", v) if isinstance(v, str) else ("n", float(v))

def key(name, cat, ts, dur, args):
    return (name, cat, ts, dur, tuple(sorted(
        (k, norm(v)) for k, v in args.items())))

want = collections.Counter()
inst, ctr = collections.Counter(), collections.Counter()
for e in ch["traceEvents"]:
    if e["ph"] == "X":
        want[key(e["name"], e["cat"], ns(e["ts"]),
                 int(decimal.Decimal(e["dur"]) * 1000), e["args"])] += 1
    elif e["ph"] == "i":
        inst[(e["name"], ns(e["ts"]))] += 1
    elif e["ph"] == "C":
        (v,) = e["args"].values()
        ctr[(e["name"], ns(e["ts"]), float(v))] += 1
got = collections.Counter(
    key(x["name"], x["categories"][0], x["ts"], x["dur"], x["args"])
    for x in pr.slices(evs))
assert sum(want.values()) > 300, sum(want.values())
assert got == want, (list((got - want).items())[:3],
                     list((want - got).items())[:3])
gi = collections.Counter((e["name"], e["ts"]) for e in evs
                         if e["type"] == "TYPE_INSTANT")
assert gi == inst, (gi - inst, inst - gi)
gc = collections.Counter(
    (pr.one(tracks[e["track_uuid"]], "name"), e["ts"], e["counter"])
    for e in evs if e["type"] == "TYPE_COUNTER")
assert gc == ctr, (list((gc - ctr).items())[:3],
                   list((ctr - gc).items())[:3])
# MSTX step ranges are written at their end with their start time: the
# timestamp goes back, so it is absolute there (not a delta).
steps = [x for x in pr.slices(evs) if x["name"] == "step"]
assert len(steps) == 2 * 8, len(steps)
print("ok", sum(want.values()), "slices,", sum(inst.values()), "instants,",
      sum(ctr.values()), "counter samples,", len(seq_of), "sequences")
PY
	fail "perfetto vs chrome: $(tail -5 "$T/pf.out")"
ok "perfetto: $(cat "$T/pf.out")"
