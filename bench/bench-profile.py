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

Then the same model under a capture by msptid (issue 16: the step-time
inflation of a capture, on a PyTorch model), and a torch.nn.Transformer
trained with AdamW the same way: a private msptid, the
process registered with it, and a session of every kind (api, kernel,
memcpy, communication, marker) started and stopped on it in turn with
msptictl, MSPTI_BENCH_CAPTURE_PHASES times (8) for
MSPTI_BENCH_CAPTURE_STEPS steps each way (16).  Each on-phase's median
step is compared with the mean of the off-phases beside it (one process
throughout: the process-to-process spread drops out); the first two
steps of each phase are left out of the medians and printed apart (a
start faults in the ring and defines the strings).  Beside the step
times, the process's CPU time per step on and off (its threads: the
model's, the agent's and the simulator's), which other load moves less.

Runs itself as a child with the build tree's package and libmspti.so
preloaded (top_builddir, as bench/run.sh sets it).  BENCH_MSPTID runs
another build's msptid for the capture (side-by-side runs).
"""

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KINDS = "api,kernel,memcpy,communication,marker"


def start_msptid(top, env):
    """A private msptid for the capture phases: (process, runtime dir), or
    (None, None) when it is not built or does not come up."""
    daemon = os.environ.get("BENCH_MSPTID") or os.path.join(top, "daemon",
                                                           "msptid")
    if not os.access(daemon, os.X_OK):
        return None, None
    rt = tempfile.mkdtemp(prefix="mspti-bench-profile.")
    denv = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    with open(os.path.join(rt, "daemon.log"), "w") as log:
        d = subprocess.Popen([daemon, "--foreground", "--runtime-dir", rt],
                             env=denv, stdout=log, stderr=log)
    for _ in range(200):
        if os.path.exists(os.path.join(rt, "ctl.sock")):
            return d, rt
        if d.poll() is not None:
            break
        time.sleep(0.05)
    stop_msptid(d, rt)
    return None, None


def stop_msptid(d, rt):
    if d is not None and d.poll() is None:
        d.terminate()
        try:
            d.wait(10)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
    if rt is not None:
        shutil.rmtree(rt, ignore_errors=True)


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
    d, rt = start_msptid(top, env)
    if rt is not None:
        env["MSPTID_RUNTIME_DIR"] = rt
        env["MSPTI_BENCH_MSPTICTL"] = os.path.join(top, "client", "msptictl")
    # A child, not an exec: the simulator's shm objects of this run are
    # removed when it ends, however it ends.
    try:
        return subprocess.call([py] + sys.argv, env=env)
    finally:
        stop_msptid(d, rt)
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
    capture(step, npu.synchronize, "ResNet-50 training steps")
    capture(transformer_step(torch), npu.synchronize,
            "torch.nn.Transformer training steps, 3+3 layers, d_model "
            "256, batch 16 x 64 tokens, AdamW,")
    return 0


def transformer_step(torch):
    """A step of examples/python/transformer_train.py's model (its default
    sizes): attention, GELU, dropout, embeddings, AdamW."""
    vocab, seq = 8000, 64

    class Seq2Seq(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, 256)
            self.transformer = torch.nn.Transformer(
                d_model=256, nhead=8, num_encoder_layers=3,
                num_decoder_layers=3, dim_feedforward=1024, dropout=0.1,
                activation="gelu", batch_first=True)
            self.proj = torch.nn.Linear(256, vocab)

        def forward(self, src, tgt, mask):
            return self.proj(self.transformer(self.embed(src),
                                              self.embed(tgt),
                                              tgt_mask=mask))

    torch.manual_seed(0)
    model = Seq2Seq().npu()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(seq).npu()
    src = torch.randint(0, vocab, (16, seq))
    tgt = torch.randint(0, vocab, (16, seq + 1))

    def step():
        s, t = src.npu(), tgt.npu()
        logits = model(s, t[:, :-1], mask)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, vocab), t[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()

    for _ in range(2):          # warm-up: first-call costs, caches
        step()
    return step


def ctl(*args):
    """msptictl --json ARGS against the private msptid: its JSON, or None.
    Without the agent: msptictl is not an application to capture."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    r = subprocess.run([os.environ["MSPTI_BENCH_MSPTICTL"], "-r",
                        os.environ["MSPTID_RUNTIME_DIR"], "--json"] +
                       list(args), env=env, capture_output=True, text=True)
    try:
        return json.loads(r.stdout) if r.returncode == 0 else None
    except ValueError:
        return None


def capture(step, sync, what):
    """The capture phases (module docstring) on the steps of what."""
    if "MSPTI_BENCH_MSPTICTL" not in os.environ:
        print("msptid capture: msptid not built or did not start; skipped")
        return
    phases = max(1, int(os.environ.get("MSPTI_BENCH_CAPTURE_PHASES", "8")))
    nsteps = max(3, int(os.environ.get("MSPTI_BENCH_CAPTURE_STEPS", "16")))
    me = os.getpid()
    for _ in range(100):
        agents = ctl("list") or []
        if any(a.get("pid") == me for a in agents):
            break
        time.sleep(0.05)
    else:
        print("msptid capture: this process did not register; skipped")
        return
    out = os.path.join(os.environ["MSPTID_RUNTIME_DIR"], "cap.mspti")

    cpu = []    # (on?, CPU seconds of this process per step, steps 3..)

    def run_phase(on):
        t = []
        for i in range(nsteps):
            if i == 2:
                c0 = time.process_time()
            t0 = time.perf_counter()
            step()
            sync()
            t.append(time.perf_counter() - t0)
        cpu.append((on, (time.process_time() - c0) / (nsteps - 2)))
        return t

    seg, first, recs, lost = [], [], [], 0
    for p in range(phases):
        seg.append(("off", run_phase(False)))
        st = ctl("start", "--pid", str(me), "--kinds", KINDS, "--output",
                 out)
        if st is None or not st.get("started"):
            print("msptid capture: start failed; skipped")
            return
        seg.append(("on", run_phase(True)))
        sp = ctl("stop", str(st["session"]))
        if sp is None or sp.get("state") != "finalized":
            print("msptid capture: stop failed; skipped")
            return
        recs.append(sp.get("records", 0))
        lost += sum(sp.get("losses", {}).values())
        try:
            os.unlink(out)
        except OSError:
            pass
    seg.append(("off", run_phase(False)))
    med = [(lab, statistics.median(t[2:])) for lab, t in seg]
    rat, on_ms, off_ms = [], [], []
    for i, (lab, m) in enumerate(med):
        if lab != "on":
            continue
        base = statistics.mean([med[i - 1][1], med[i + 1][1]])
        rat.append(m / base - 1)
        on_ms.append(m)
        off_ms.append(base)
        first.append(sum(seg[i][1][:2]) - 2 * base)
    print("msptid capture of %s (--kinds %s), one process, a session "
          "started and stopped on it %d times, %d steps each way:" % (
              what, KINDS, phases, nsteps))
    print("  step %.1f ms on vs %.1f ms off: %+.2f %% (phases %+.1f..%+.1f)"
          "  [target <= 1 %%]" % (1e3 * statistics.median(on_ms),
                                 1e3 * statistics.median(off_ms),
                                 100 * statistics.median(rat),
                                 100 * min(rat), 100 * max(rat)))
    con = statistics.median([c for on, c in cpu if on])
    coff = statistics.median([c for on, c in cpu if not on])
    print("  CPU time of the process (its threads, the simulator's "
          "included) per step: %.1f ms on vs %.1f ms off: %+.2f %%" % (
              1e3 * con, 1e3 * coff, 100 * (con / coff - 1)))
    print("  records per step %.0f (%d lost); a start's first two steps "
          "took %+.1f ms beyond the steady step (median)" % (
              statistics.median(recs) / nsteps, lost,
              1e3 * statistics.median(first)))


if __name__ == "__main__":
    if os.environ.get("MSPTI_BENCH_PROFILE_CHILD") != "1":
        sys.exit(reexec())
    sys.exit(main())
