#!/usr/bin/env python3
"""Overhead of mspti.Profile on a ResNet-50 training step.

Runs torchvision's ResNet-50 (untrained) on the simulated NPU through
mspti.npusim.torch, SGD with momentum, and times training steps with no
profile, with Profile(activities=[NPU]) (device activity only), with
CPU+NPU (framework ops linked to their kernels) and with CPU+NPU and
record_shapes, with_stack, profile_memory.  Steps are run in rounds, one
step of each variant per round in rotating order, so the machine's drift
hits each variant alike; figures are medians over rounds.  A profiled
step is its own window: start, step, stop (the window-end cost, flushing
and taking the records, is printed apart).  Prints figures only.

Runs itself as a child with the build tree's package and libmspti.so
preloaded (top_builddir, as bench/run.sh sets it).
"""

import glob
import os
import statistics
import subprocess
import sys
import time


def reexec():
    top = os.environ.get("top_builddir") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build")
    top = os.path.abspath(top)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(top, "python", "stage")
    env["LD_LIBRARY_PATH"] = os.path.join(top, "agent", ".libs") + ":" + \
        os.path.join(top, "sim", ".libs")
    env["LD_PRELOAD"] = os.path.join(top, "agent", ".libs", "libmspti.so")
    env.setdefault("NPUSIM_SHM_PREFIX", "bench-profile-%d" % os.getpid())
    env.setdefault("MSPTID_RUNTIME_DIR", "/nonexistent-mspti-bench")
    env["MSPTI_BENCH_PROFILE_CHILD"] = "1"
    if not os.path.exists(env["LD_PRELOAD"]):
        print("bench-profile: %s not built; skipped" % env["LD_PRELOAD"])
        return 0
    # Debian's python3, which has Debian's PyTorch.
    py = os.environ.get("PYTHON3") or ("/usr/bin/python3" if os.access(
        "/usr/bin/python3", os.X_OK) else sys.executable)
    # A child, not an exec: the simulator's shm objects of this run are
    # removed when it ends, however it ends.
    try:
        return subprocess.call([py] + sys.argv, env=env)
    finally:
        for f in glob.glob("/dev/shm/%s-*" % env["NPUSIM_SHM_PREFIX"]):
            try:
                os.unlink(f)
            except OSError:
                pass


def main():
    try:
        import torch
        import torchvision
    except ImportError as e:
        print("bench-profile: PyTorch/torchvision not importable (%s); "
              "skipped (apt-get install python3-torch python3-torchvision)"
              % e)
        return 0
    import mspti
    import mspti.npusim.torch as npu

    rounds = int(os.environ.get("MSPTI_BENCH_ROUNDS", "5"))
    batch = int(os.environ.get("MSPTI_BENCH_BATCH", "2"))
    size = int(os.environ.get("MSPTI_BENCH_IMAGE", "224"))
    model = torchvision.models.resnet50(weights=None).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(batch, 3, size, size)
    labels = torch.randint(0, 1000, (batch,))
    loss_fn = torch.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = loss_fn(model(images.npu()), labels.npu())
        loss.backward()
        opt.step()
        loss.item()

    C, N = mspti.ProfilerActivity.CPU, mspti.ProfilerActivity.NPU
    variants = [
        ("off", None),
        ("NPU", dict(activities=[N])),
        ("CPU+NPU", dict(activities=[C, N])),
        ("CPU+NPU full", dict(activities=[C, N], record_shapes=True,
                              with_stack=True, profile_memory=True)),
    ]
    profs = {name: mspti.Profile(**kw) for name, kw in variants if kw}
    for _ in range(2):          # warm-up: first-call costs, caches
        step()
        for p in profs.values():
            p.start()
            step()
            p.stop()
    times = {name: [] for name, _ in variants}
    ends = {name: [] for name, _ in variants}
    ops = {}
    for r in range(rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for name, kw in order:
            p = profs.get(name)
            if p is not None:
                p.start()
            t0 = time.perf_counter()
            step()
            npu.synchronize()
            t1 = time.perf_counter()
            if p is not None:
                p.stop()
                ends[name].append(time.perf_counter() - t1)
                if name not in ops:
                    ops[name] = (len(p.events()),
                                 len(p.device_activities()))
            times[name].append(t1 - t0)
    base = statistics.median(times["off"])
    print("Profile overhead, ResNet-50 training step (batch %d, %dx%d, "
          "SGD momentum) on the simulated NPU, %d rounds, medians:" %
          (batch, size, size, rounds))
    print("  %-14s %10s %10s %12s %18s" % ("variant", "step(ms)",
                                          "overhead", "stop(ms)",
                                          "ops / device recs"))
    for name, _ in variants:
        m = statistics.median(times[name])
        ov = "-" if name == "off" else "%+.1f%%" % (100.0 * (m - base) /
                                                   base)
        st = "-" if not ends[name] else "%.1f" % (
            1e3 * statistics.median(ends[name]))
        o = ops.get(name)
        print("  %-14s %10.1f %10s %12s %18s" % (
            name, m * 1e3, ov, st, "-" if o is None else "%d / %d" % o))
    print("  (step: host wall time of one step with the profile recording;"
          " stop: ending its window)")
    return 0


if __name__ == "__main__":
    if os.environ.get("MSPTI_BENCH_PROFILE_CHILD") != "1":
        sys.exit(reexec())
    sys.exit(main())
