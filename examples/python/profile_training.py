#!/usr/bin/env python3
"""mspti.Profile around a training loop.

    LD_PRELOAD=libmspti.so python3 profile_training.py --steps 8 \
        --chrome trace.json

Skips one step, warms up one, records three (schedule), then prints the
tables of the msptictl report engine: the op summary, the key averages
sorted by total time, memory, communication, and the advisor's findings.
``prof.trace_path`` is a trace file ``msptictl report`` reads too.
"""

import argparse

import mspti
import mspti.npusim as sim


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--chrome", help="write a Chrome trace JSON here")
    ap.add_argument("--trace", help="keep the trace file here")
    args = ap.parse_args()

    sim.set_device(0)
    stream = sim.Stream()
    ops = [
        sim.Kernel("Conv2D", sim.AI_CORE, flops=4e9, bytes=2e7),
        sim.Kernel("Relu", sim.AI_VECTOR, flops=1e6, bytes=4e6),
        sim.Kernel("MatMul", sim.AI_CORE, flops=8e9, bytes=1.6e7),
        sim.Kernel("Softmax", sim.AI_VECTOR, flops=1.5e7, bytes=6e6),
        sim.Kernel("MatMulGrad", sim.AI_CORE, flops=1.6e10, bytes=3.2e7),
        sim.Kernel("ApplyAdam", sim.AI_VECTOR, flops=4e6, bytes=8e6),
    ]
    batch = sim.HostBuffer(4 << 20)
    dev = sim.DeviceBuffer(4 << 20)

    prof = mspti.Profile(schedule=mspti.schedule(wait=1, warmup=1, active=3,
                                                 repeat=1),
                         trace_path=args.trace)
    prof.start()
    for _ in range(args.steps):
        with mspti.mstx.range("step"):
            sim.memcpy(dev, batch, 4 << 20, sim.HOST_TO_DEVICE, stream)
            for k in ops:
                k.launch(stream, block_dim=16)
            stream.synchronize()
        prof.step()
    prof.stop()
    dev.free()
    batch.free()
    stream.destroy()

    print(prof.op_summary())
    print(prof.key_averages().table(sort_by="npu_time_total", row_limit=3))
    print(prof.memory_summary())
    print(prof.communication_summary())
    for s in prof.optimization_suggestions():
        print("[%s] %s: %s" % (s["severity"], s["rule"], s["message"]))
    if args.chrome:
        prof.export_chrome_trace(args.chrome)
        print("chrome trace: %s" % args.chrome)
    print("trace file: %s" % prof.trace_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
