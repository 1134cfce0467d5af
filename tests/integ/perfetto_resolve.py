"""Reads a Perfetto trace as a reader of the format must: protoc's text
decoding (perfetto.protos.Trace, proto/perfetto/trace.proto) of the file,
then per packet sequence its incremental state (interned strings, packet
defaults, incremental clocks from clock snapshots) applied to every event.
Anything the format forbids or leaves undefined raises AssertionError: an
interned id not defined on its sequence, an id defined twice on one
sequence, an event that uses incremental state without
SEQ_NEEDS_INCREMENTAL_STATE or before SEQ_INCREMENTAL_STATE_CLEARED, a
timestamp on an incremental clock without a snapshot.

TracePacket.compressed_packets are inflated first (inflate(bytes)); run
as "perfetto_resolve.py inflate IN OUT" it writes that for protoc.

events(path) -> (tracks, events): tracks by uuid (TrackDescriptor dicts),
events as dicts: seq, track_uuid, type, name, categories, ts (ns on the
trace clock, CLOCK_REALTIME), args (annotation name -> value), flow_ids,
terminating_flow_ids, counter (double_counter_value)."""
import json
import re
import subprocess
import sys
import zlib

CLEARED, NEEDS = 1, 2
REALTIME = 1
INTERNED = {"event_categories": "cat", "event_names": "name",
            "debug_annotation_names": "aname",
            "debug_annotation_string_values": "sval"}


def parse(lines):
    """protoc's text format as nested dicts of lists."""
    root, stack = {}, []
    cur = root
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            cur = stack.pop()
        elif line.endswith("{"):
            child = {}
            cur.setdefault(line[:-1].strip(), []).append(child)
            stack.append(cur)
            cur = child
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = json.loads(v)
            elif re.match(r"^-?\d+$", v):
                v = int(v)
            cur.setdefault(k, []).append(v)
    return root


def one(m, k, d=None):
    return m.get(k, [d])[0]


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if c < 0x80:
            return v, i


def inflate(data):
    """The Trace with every TracePacket.compressed_packets (field 50, a
    zlib stream of a serialized Trace) replaced by the packets in it, as
    trace processor reads them."""
    out, i = bytearray(), 0
    while i < len(data):
        start = i
        key, j = varint(data, i)
        assert key == (1 << 3 | 2), "Trace field %d wire %d" % (key >> 3, key & 7)
        n, j = varint(data, j)
        body = data[j:j + n]
        assert len(body) == n, "truncated packet"
        i = j + n
        if body and varint(body, 0)[0] == (50 << 3 | 2):
            zn, k = varint(body, varint(body, 0)[1])
            assert k + zn == len(body), "compressed_packets not alone"
            out += inflate(zlib.decompress(body[k:]))
        else:
            out += data[start:i]
    return bytes(out)


def decode(path, srcdir):
    out = subprocess.run(
        ["protoc", "--decode", "perfetto.protos.Trace",
         "-I" + srcdir + "/proto/perfetto",
         srcdir + "/proto/perfetto/trace.proto"],
        input=inflate(open(path, "rb").read()), stdout=subprocess.PIPE,
        check=True)
    return parse(out.stdout.decode().splitlines())


class Seq:
    def __init__(self):
        self.valid = False
        self.interned = {k: {} for k in INTERNED.values()}
        self.defaults = {}
        self.clocks = {}    # id -> [incremental, last value, to realtime]


def events(path, srcdir):
    t = decode(path, srcdir)
    tracks, evs, seqs = {}, [], {}
    for p in t.get("packet", []):
        sid = one(p, "trusted_packet_sequence_id", 0)
        s = seqs.setdefault(sid, Seq())
        flags = one(p, "sequence_flags", 0)
        if flags & CLEARED:
            seqs[sid] = s = Seq()
            s.valid = True
        for td in p.get("track_descriptor", []):
            assert one(td, "uuid") not in tracks, "track declared twice"
            tracks[one(td, "uuid")] = td
        for d in p.get("trace_packet_defaults", []):
            assert flags & CLEARED, "defaults without clearing the state"
            s.defaults = {
                "clock": one(d, "timestamp_clock_id"),
                "track": one(one(d, "track_event_defaults", {}),
                             "track_uuid")}
        for cs in p.get("clock_snapshot", []):
            real = [one(c, "timestamp") for c in cs.get("clocks", [])
                    if one(c, "clock_id") == REALTIME]
            for c in cs.get("clocks", []):
                cid = one(c, "clock_id")
                if cid >= 64:
                    assert real, "snapshot without CLOCK_REALTIME"
                    v = one(c, "timestamp")
                    s.clocks[cid] = [one(c, "is_incremental") == "true",
                                     v, real[0] - v]
        for idata in p.get("interned_data", []):
            assert flags & NEEDS or flags & CLEARED, \
                "interned data without SEQ_NEEDS_INCREMENTAL_STATE"
            for field, kind in INTERNED.items():
                for e in idata.get(field, []):
                    iid = one(e, "iid")
                    assert iid not in s.interned[kind], \
                        "%s iid %d defined twice on sequence %d" % (
                            kind, iid, sid)
                    s.interned[kind][iid] = one(e, "name",
                                                one(e, "str"))
        if "track_event" not in p:
            continue
        te = p["track_event"][0]
        assert s.valid and flags & NEEDS, \
            "event on sequence %d uses its state without the flags" % sid
        clock = one(p, "timestamp_clock_id", s.defaults.get("clock"))
        ts = one(p, "timestamp")
        assert ts is not None, "event without timestamp"
        if clock == REALTIME:
            pass
        else:
            assert clock in s.clocks, "clock %s has no snapshot" % clock
            c = s.clocks[clock]
            if c[0]:
                c[1] += ts
                ts = c[1]
            ts += c[2]
        name = one(te, "name")
        if name is None and "name_iid" in te:
            name = s.interned["name"][one(te, "name_iid")]
        cats = list(te.get("categories", [])) + \
            [s.interned["cat"][i] for i in te.get("category_iids", [])]
        args = {}
        for d in te.get("debug_annotations", []):
            k = one(d, "name")
            if k is None:
                k = s.interned["aname"][one(d, "name_iid")]
            if "string_value_iid" in d:
                v = s.interned["sval"][one(d, "string_value_iid")]
            elif "string_value" in d:
                v = one(d, "string_value")
            elif "uint_value" in d:
                v = one(d, "uint_value")
            elif "int_value" in d:
                v = one(d, "int_value")
            else:
                v = float(one(d, "double_value"))
            args[k] = v
        cv = one(te, "double_counter_value")
        evs.append({
            "seq": sid,
            "track_uuid": one(te, "track_uuid", s.defaults.get("track")),
            "type": one(te, "type"), "name": name, "categories": cats,
            "ts": ts, "args": args,
            "flow_ids": te.get("flow_ids", []),
            "terminating_flow_ids": te.get("terminating_flow_ids", []),
            "counter": float(cv) if cv is not None else None})
    return tracks, evs


def slices(evs):
    """BEGIN/END pairs per track (a stack per track) as dicts with the
    BEGIN's fields and dur."""
    open_, out = {}, []
    for e in evs:
        if e["type"] == "TYPE_SLICE_BEGIN":
            open_.setdefault(e["track_uuid"], []).append(e)
        elif e["type"] == "TYPE_SLICE_END":
            b = open_[e["track_uuid"]].pop()
            s = dict(b)
            s["dur"] = e["ts"] - b["ts"]
            out.append(s)
    assert all(not v for v in open_.values()), "slices left open"
    return out


if __name__ == "__main__" and sys.argv[1] == "inflate":
    # perfetto_resolve.py inflate IN OUT: the trace without compression,
    # for protoc --decode.
    open(sys.argv[3], "wb").write(inflate(open(sys.argv[2], "rb").read()))
elif __name__ == "__main__":
    tr, ev = events(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ".")
    print(len(tr), "tracks,", len(ev), "events")
