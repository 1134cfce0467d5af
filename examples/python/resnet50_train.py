#!/usr/bin/env python3
"""ResNet-50 training on the simulated NPU.

    msptictl run --report -- python3 resnet50_train.py --steps 5 --batch 8

An untrained torchvision ResNet-50 trained on torchvision's FakeData
(random images decoded and converted on the host by a DataLoader, so the
loader's work is host time between steps) with SGD and momentum.  Each
step, an MSTX range "step", copies the batch to the NPU (memcpy), runs
forward (Conv2D, BNTrainingReduce/Update, Relu, ...), backward
(Conv2DBackpropInput/Filter, BNTrainingReduceGrad/UpdateGrad, ReluGrad,
...) and the fused optimizer (ApplyMomentum per parameter, or ApplyAdam
with --adam).
"""

import argparse
import time

import torch
import torchvision

import mspti
import mspti.npusim.torch as npu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=224, help="image size")
    ap.add_argument("--adam", action="store_true", help="Adam, not SGD")
    args = ap.parse_args()

    data = torchvision.datasets.FakeData(
        size=args.steps * args.batch, image_size=(3, args.image, args.image),
        num_classes=1000, transform=torchvision.transforms.ToTensor())
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch)

    model = torchvision.models.resnet50(weights=None).npu()
    if args.adam:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                              weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    t0 = time.perf_counter()
    steps = 0
    for images, labels in loader:
        with mspti.mstx.range("step"):
            images = images.npu(non_blocking=True)
            labels = labels.npu(non_blocking=True)
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
            loss.item()             # the usual per-step sync
        steps += 1
    npu.synchronize()
    wall = time.perf_counter() - t0
    s = npu.stats()
    print("resnet50 training: %d steps, batch %d, %.1f ms/step; kernels %d, "
          "H2D copies %d" % (steps, args.batch, wall * 1e3 / max(steps, 1),
                             s.get("kernels", 0), s.get("memcpy_h2d", 0)))


if __name__ == "__main__":
    main()
