#!/usr/bin/env python3
"""Data-parallel training on 4 simulated NPUs, with an injectable slow rank.

    msptictl run --report -- python3 ddp_train.py --ranks 4 --slow-rank 2

Started without RANK in the environment, the script is its own launcher:
it starts --ranks copies of itself with torchrun's variables (RANK,
LOCAL_RANK, WORLD_SIZE, ...) and the HCCL root info, and --slow-rank N
sets NPUSIM_SLOW_RANK=N so that rank's kernels run NPUSIM_SLOW_FACTOR
(default 4) times longer.  Under torchrun (RANK set) it is one rank.

Each rank trains a torchvision model (resnet18 by default; --model small
is a tiny CNN for quick runs) wrapped in mspti.npusim.torch's
DistributedDataParallel: after each gradient bucket (25 MB, the first
1 MB, as torch's DDP) is complete during backward, it is all-reduced over
HCCL on a communication stream, overlapping the rest of backward
(--no-overlap: all buckets after backward).  The report's ranks and
slow_rank sections name the slow rank; the others wait for it in the
all-reduces.
"""

import argparse
import os
import sys
import time

import torch

import mspti
import mspti.npusim.torch as npu


def small_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64),
        torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(64, 1000))


def rank_main(args):
    npu.init_process_group("hccl")
    rank, world = npu.get_rank(), npu.get_world_size()
    if args.model == "small":
        model = small_cnn()
    else:
        import torchvision      # only then: four ranks import it otherwise
        model = getattr(torchvision.models, args.model)(weights=None)
    model = npu.DistributedDataParallel(model.npu(),
                                        bucket_cap_mb=args.bucket_cap_mb,
                                        overlap=not args.no_overlap)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    images = torch.randn(args.batch, 3, args.image, args.image)
    labels = torch.randint(0, 1000, (args.batch,))
    t0 = time.perf_counter()
    for _ in range(args.steps):
        with mspti.mstx.range("step"):
            opt.zero_grad()
            loss = loss_fn(model(images.npu()), labels.npu())
            loss.backward()
            opt.step()
            loss.item()
    npu.synchronize()
    wall = time.perf_counter() - t0
    print("rank %d/%d: %d steps, %.1f ms/step, %d buckets, %d kernels" %
          (rank, world, args.steps, wall * 1e3 / args.steps,
           len(model.buckets), npu.stats().get("kernels", 0)), flush=True)
    npu.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--slow-rank", type=int,
                    help="this rank computes NPUSIM_SLOW_FACTOR times slower")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--model", default="resnet18",
                    help="a torchvision model name, or 'small'")
    ap.add_argument("--bucket-cap-mb", type=float, default=25)
    ap.add_argument("--no-overlap", action="store_true",
                    help="all-reduce after backward, not during it")
    args = ap.parse_args()
    if "RANK" in os.environ:
        rank_main(args)
        return 0
    if args.slow_rank is not None and not 0 <= args.slow_rank < args.ranks:
        ap.error("--slow-rank must be below --ranks")
    codes = npu.spawn(args.ranks, [os.path.abspath(__file__)] + sys.argv[1:],
                      slow_rank=args.slow_rank)
    bad = [(r, c) for r, c in enumerate(codes) if c != 0]
    for r, c in bad:
        print("rank %d exited with %s" % (r, c), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
