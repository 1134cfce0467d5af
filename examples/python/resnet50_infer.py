#!/usr/bin/env python3
"""ResNet-50 inference at batch 1 on the simulated NPU.

    msptictl run --report -- python3 resnet50_infer.py --steps 10

The profiling-suite guide's seed workload: an untrained torchvision
ResNet-50 (no weights are downloaded) moved to the NPU with ``.npu()``,
then one forward per step under ``torch.no_grad()``.  Each step is an MSTX
range "step"; the report shows Conv2D as the slowest op type, at about a
third of device time (the guide shows about 40%), then BNInfer, Relu and
Add.  ``--top N`` prints the N op types with the most device time, from a
KernelMonitor (needs LD_PRELOAD=libmspti.so, which ``msptictl run``
sets).
"""

import argparse
import collections
import time

import torch
import torchvision

import mspti
import mspti.npusim.torch as npu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--top", type=int, default=0,
                    help="print the top N op types by device time")
    args = ap.parse_args()

    model = torchvision.models.resnet50(weights=None).eval().npu()
    npu.synchronize()       # weights copied and cast to the cube's layout
    image = torch.randn(args.batch, 3, 224, 224)
    kernels = []
    mon = None
    if args.top:
        mon = mspti.KernelMonitor()
        mon.start(kernels.append)
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(args.steps):
            with mspti.mstx.range("step"):
                logits = model(image.npu())
                top1 = logits.argmax(dim=1).cpu()     # reads back: a sync
    npu.synchronize()
    wall = time.perf_counter() - t0
    print("resnet50 inference: %d steps, batch %d, %.1f ms/step, top1 %s" %
          (args.steps, args.batch, wall * 1e3 / args.steps, top1.tolist()))
    s = npu.stats()
    print("kernels %d, H2D copies %d, TransData %d" %
          (s.get("kernels", 0), s.get("memcpy_h2d", 0),
           s.get("transdata", 0)))
    if mon is not None:
        mon.stop()
        total = collections.Counter()
        for k in kernels:
            total[k.name] += k.end - k.start
        busy = sum(total.values()) or 1
        for name, ns in total.most_common(args.top):
            print("%-24s %10.1f us %5.1f%%" % (name, ns / 1e3,
                                              100.0 * ns / busy))


if __name__ == "__main__":
    main()
