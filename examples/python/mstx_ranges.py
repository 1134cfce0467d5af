#!/usr/bin/env python3
"""Custom ranges with MSTX and MstxMonitor.

    LD_PRELOAD=libmspti.so python3 mstx_ranges.py --steps 3

Marks the phases of each step with ``mspti.mstx`` ranges.  Passing the
stream makes msPTI also record when the device reached each end, so every
range arrives twice: once with host times, once with device times.  A
domain ("data") is disabled halfway, and its ranges stop arriving.
"""

import argparse
import collections

import mspti
import mspti.npusim as sim
from mspti import MsptiActivitySourceKind as Source


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()

    ranges = []
    marks = []
    monitor = mspti.MstxMonitor()
    monitor.start(mark_cb=marks.append, range_cb=ranges.append)

    sim.set_device(0)
    stream = sim.Stream()
    fwd = sim.Kernel("Forward", sim.AI_CORE, fixed_ns=200000)
    bwd = sim.Kernel("Backward", sim.AI_CORE, fixed_ns=400000)
    data = mspti.mstx.Domain("data")
    for step in range(args.steps):
        if step == args.steps // 2:
            monitor.disable_domain("data")
        mspti.mstx.mark("step %d begins" % step)
        with data.range("load batch"):
            pass
        with mspti.mstx.range("forward", stream):
            fwd.launch(stream)
        with mspti.mstx.range("backward", stream):
            bwd.launch(stream)
        stream.synchronize()
    monitor.stop()
    stream.destroy()

    by = collections.defaultdict(list)
    for r in ranges:
        by[(r.domain, r.name, Source(r.source_kind).name)].append(
            r.end - r.start)
    print("%d marks, %d ranges" % (len(marks), len(ranges)))
    print("%-8s %-10s %-6s %5s %10s" % ("domain", "range", "source", "count",
                                       "avg_us"))
    for (domain, name, source), durs in sorted(by.items()):
        print("%-8s %-10s %-6s %5d %10.1f" % (
            domain, name, source, len(durs), sum(durs) / len(durs) / 1e3))
    want_device = 2 * args.steps
    got_device = sum(1 for r in ranges if r.source_kind == Source.DEVICE)
    return 0 if got_device == want_device and \
        len(marks) == args.steps else 1


if __name__ == "__main__":
    raise SystemExit(main())
