#!/usr/bin/env python3
"""Compute/communication ratio of a 4-rank data-parallel job.

    LD_PRELOAD=libmspti.so python3 comm_ratio.py --ranks 4 --steps 5

The parent makes the HCCL root info and forks one process per rank (fork
before any device is opened).  Each rank runs forward/backward kernels and
an all-reduce of its gradients per step.  KernelMonitor and HcclMonitor
callbacks only queue the records; a consumer thread adds up device time
spent computing and communicating.  Each rank reports its ratio.
"""

import argparse
import multiprocessing as mp
import os
import queue
import threading

import mspti
import mspti.npusim as sim

GRADS = 256 * 1024  # fp32 elements


def consumer(q, totals):
    """Runs in its own thread: drains the queue until None."""
    while True:
        item = q.get()
        if item is None:
            return
        kind, ns = item
        totals[kind] += ns


def rank_main(rank, nranks, steps, root, results):
    q = queue.Queue()
    totals = {"compute": 0, "comm": 0}
    worker = threading.Thread(target=consumer, args=(q, totals))
    worker.start()

    kmon, hmon = mspti.KernelMonitor(), mspti.HcclMonitor()
    kmon.start(lambda k: q.put(("compute", k.end - k.start)))
    r = hmon.start(lambda h: q.put(("comm", h.end - h.start)))
    if r != mspti.MsptiResult.SUCCESS:
        print("rank %d: HcclMonitor: %s (run with LD_PRELOAD=libmspti.so)"
              % (rank, r.name))

    sim.set_device(rank % sim.device_count())
    comm = sim.Communicator(nranks, rank, root)
    stream = sim.Stream()
    fwd = sim.Kernel("MatMulForward", sim.AI_CORE, flops=6e9, bytes=8e6)
    bwd = sim.Kernel("MatMulBackward", sim.AI_CORE, flops=1.2e10, bytes=1.6e7)
    opt = sim.Kernel("ApplyAdam", sim.AI_VECTOR, flops=4e6, bytes=8e6)
    grads = sim.DeviceBuffer(GRADS * 4)
    host = sim.HostBuffer(GRADS * 4)
    for step in range(steps):
        with mspti.mstx.range("step"):
            host.fill_float(rank + 1.0)
            sim.memcpy(grads, host, GRADS * 4, sim.HOST_TO_DEVICE, stream)
            for _ in range(4):
                fwd.launch(stream, 32)
            for _ in range(4):
                bwd.launch(stream, 32)
            comm.all_reduce(grads, grads, GRADS, sim.FP32, sim.SUM, stream)
            opt.launch(stream, 16)
            sim.memcpy(host, grads, GRADS * 4, sim.DEVICE_TO_HOST, stream)
            stream.synchronize()
        want = nranks * (nranks + 1) / 2.0
        if abs(host.floats(1)[0] - want) > 1e-3:
            raise SystemExit("rank %d: wrong all-reduce result" % rank)

    kmon.stop()
    hmon.stop()
    q.put(None)
    worker.join()
    grads.free()
    host.free()
    stream.destroy()
    comm.destroy()
    # The parent prints: lines written by several processes may mix.
    results.put((rank, totals["compute"], totals["comm"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()

    root = sim.get_root_info()  # before fork; opens no device
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    procs = []
    for rank in range(args.ranks):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(args.ranks)}
        os.environ.update(env)
        p = ctx.Process(target=rank_main, args=(rank, args.ranks, args.steps,
                                                 root, results))
        p.start()
        procs.append(p)
    got = [results.get(timeout=300) for _ in procs]
    failed = 0
    for p in procs:
        p.join()
        failed |= p.exitcode != 0
    for rank, compute, commns in sorted(got):
        ratio = compute / commns if commns else float("inf")
        print("rank %d: compute %.3f ms, communication %.3f ms, "
              "compute/comm %.2f" % (rank, compute / 1e6, commns / 1e6,
                                     ratio))
    compute = sum(c for _, c, _ in got)
    comm = sum(m for _, _, m in got)
    print("all ranks: compute %.3f ms, communication %.3f ms, "
          "compute share %.1f%%" % (compute / 1e6, comm / 1e6,
                                   100.0 * compute / max(compute + comm, 1)))
    return 1 if failed or comm == 0 else 0


if __name__ == "__main__":
    raise SystemExit(main())
