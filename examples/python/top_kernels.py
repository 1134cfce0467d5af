#!/usr/bin/env python3
"""The hottest kernels of a (simulated) training loop, with KernelMonitor.

    LD_PRELOAD=libmspti.so python3 top_kernels.py --steps 20 --top 5

KernelMonitor calls back on msPTI's delivery thread with one KernelData per
kernel executed; we add up the device time per kernel name and print the
top N.
"""

import argparse
import collections
import threading

import mspti
import mspti.npusim as sim


def train(steps):
    """A small op mix per step: copies, forward, backward, optimizer."""
    sim.set_device(0)
    stream = sim.Stream()
    kernels = [
        sim.Kernel("Conv2D", sim.AI_CORE, flops=4e9, bytes=2e7),
        sim.Kernel("LayerNorm", sim.AI_VECTOR, flops=2e7, bytes=8e6),
        sim.Kernel("MatMul", sim.AI_CORE, flops=8e9, bytes=1.6e7),
        sim.Kernel("Gelu", sim.AI_VECTOR, flops=1e7, bytes=4e6),
        sim.Kernel("Softmax", sim.AI_VECTOR, flops=1.5e7, bytes=6e6),
        sim.Kernel("MatMulGrad", sim.AI_CORE, flops=1.6e10, bytes=3.2e7),
        sim.Kernel("ApplyAdam", sim.AI_VECTOR, flops=4e6, bytes=8e6),
    ]
    host = sim.HostBuffer(1 << 20)
    dev = sim.DeviceBuffer(1 << 20)
    for _ in range(steps):
        sim.memcpy(dev, host, 1 << 20, sim.HOST_TO_DEVICE, stream)
        for k in kernels:
            k.launch(stream, block_dim=16)
        stream.synchronize()
    dev.free()
    host.free()
    stream.destroy()
    return len(kernels) * steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()

    total = collections.Counter()
    calls = collections.Counter()
    lock = threading.Lock()

    def on_kernel(k):
        with lock:
            total[k.name] += k.end - k.start
            calls[k.name] += 1

    monitor = mspti.KernelMonitor()
    r = monitor.start(on_kernel)
    if r != mspti.MsptiResult.SUCCESS:
        raise SystemExit("KernelMonitor.start: %s" % r.name)
    launched = train(args.steps)
    monitor.stop()  # flushes: every kernel has been seen

    seen = sum(calls.values())
    grand = sum(total.values()) or 1
    print("%d kernels launched, %d seen" % (launched, seen))
    print("%-12s %8s %12s %10s %7s" % ("kernel", "calls", "total_us",
                                       "avg_us", "share"))
    for name, ns in total.most_common(args.top):
        print("%-12s %8d %12.1f %10.2f %6.1f%%" % (
            name, calls[name], ns / 1e3, ns / 1e3 / calls[name],
            100.0 * ns / grand))
    return 0 if seen == launched else 1


if __name__ == "__main__":
    raise SystemExit(main())
