#!/usr/bin/env python3
"""Slow-rank verdict accuracy: the scenario library through real capture.

Every run is a real npusim-dist job under `msptictl run` against one
private msptid, reported with `msptictl report --json`, and scored
against the scenario's own ground truth (`npusim-dist --truth`).  Prints,
per scenario, fault size and rank count, the verdict's precision and
recall and how often the cause was right; then false positives on
balanced, jittered and rotating-straggler runs, some of them beside a CPU
hog.  Figures only: nothing here fails on accuracy or time; it exits
non-zero only when a run or a report breaks.

Environment: top_builddir (the build tree), BENCH_VERDICT_RUNS (runs per
cell, 2), BENCH_VERDICT_STEPS (8), BENCH_VERDICT_BUDGET_S (wall budget,
240: cells left when it is spent are skipped and counted),
BENCH_VERDICT_QUICK=1 (one fault size, 4 ranks: a smoke run),
BENCH_VERDICT_TIME_SCALE (NPUSIM_TIME_SCALE of the runs, 1),
BENCH_VERDICT_KEEP=DIR (keep the traces of runs whose verdict was wrong),
BENCH_VERDICT_REPORT=PATH (another build's msptictl to report with, to
compare analyses on the same captures).
A run that fails is run once more; a second failure counts as broken.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

B = os.environ.get("top_builddir", ".")
MSPTID = os.path.join(B, "daemon", "msptid")
CTL = os.path.join(B, "client", "msptictl")
REPORT = os.environ.get("BENCH_VERDICT_REPORT", CTL)
DIST = os.path.join(B, "sim", "npusim-dist")
RUNS = int(os.environ.get("BENCH_VERDICT_RUNS", "2"))
STEPS = int(os.environ.get("BENCH_VERDICT_STEPS", "8"))
BUDGET = float(os.environ.get("BENCH_VERDICT_BUDGET_S", "240"))
QUICK = os.environ.get("BENCH_VERDICT_QUICK") == "1"
SCALE = os.environ.get("BENCH_VERDICT_TIME_SCALE", "1")
KEEP = os.environ.get("BENCH_VERDICT_KEEP")

FAULTS = ["slow-compute", "slow-link", "host-bound", "launch-bound",
          "aicpu", "memory-bound"]
SIZES = [20] if QUICK else [3, 5, 10, 20]
RANKS = [4] if QUICK else [2, 4, 8]


class Bench:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="mspti-bench-verdict.")
        self.rt = os.path.join(self.tmp, "run")
        self.prefix = "mspti-bv-%d" % os.getpid()
        self.env = dict(os.environ, NPUSIM_SHM_PREFIX=self.prefix)
        for k in ("NPUSIM_SLOW_RANK", "NPUSIM_SLOW_LINK"):
            self.env.pop(k, None)
        self.env["NPUSIM_TIME_SCALE"] = SCALE
        self.daemon = None
        self.hogs = []
        self.t0 = time.monotonic()
        self.skipped = 0
        self.broken = 0
        self.nrun = 0

    def start(self):
        log = open(os.path.join(self.tmp, "msptid.log"), "w")
        self.daemon = subprocess.Popen(
            [MSPTID, "--foreground", "--runtime-dir", self.rt],
            stdout=log, stderr=log, env=self.env)
        for _ in range(200):
            if os.path.exists(os.path.join(self.rt, "ctl.sock")):
                r = subprocess.run([CTL, "-r", self.rt, "status"],
                                   capture_output=True, env=self.env)
                if r.returncode == 0:
                    return
            if self.daemon.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("msptid did not come up")

    def stop(self):
        self.hog(0)
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        for f in os.listdir("/dev/shm"):
            if f.startswith(self.prefix):
                try:
                    os.unlink(os.path.join("/dev/shm", f))
                except OSError:
                    pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def hog(self, n):
        """n busy-looping processes beside the runs (0: stop them)."""
        while len(self.hogs) > n:
            p = self.hogs.pop()
            p.kill()
            p.wait()
        while len(self.hogs) < n:
            self.hogs.append(subprocess.Popen(
                ["sh", "-c", "while :; do :; done"]))

    def left(self):
        return BUDGET - (time.monotonic() - self.t0)

    def run(self, scenario, ranks, fault=None, slow=None, seed=1,
            jitter=None):
        """One capture; returns (truth, verdict) or None when skipped."""
        if self.left() <= 0:
            self.skipped += 1
            return None
        args = ["--scenario", scenario, "--ranks", str(ranks),
                "--steps", str(STEPS), "--seed", str(seed)]
        if fault is not None:
            args += ["--fault-pct", str(fault)]
        if slow is not None:
            args += ["--slow-rank", str(slow)]
        if jitter is not None:
            args += ["--jitter-pct", str(jitter)]
        truth = json.loads(subprocess.run(
            [DIST] + args + ["--truth"], capture_output=True, check=True,
            env=self.env).stdout)
        self.nrun += 1
        trace = os.path.join(self.tmp, "r%d.mspti" % self.nrun)
        for attempt in (1, 2):
            r = subprocess.run([CTL, "-r", self.rt, "run", "--output",
                                trace, "--", DIST] + args,
                               capture_output=True, env=self.env)
            if r.returncode == 0:
                break
            sys.stderr.write("run %s failed (attempt %d): %s\n" % (
                " ".join(args), attempt, r.stderr.decode()[-600:]))
        if r.returncode != 0:
            self.broken += 1
            return None
        rep = subprocess.run([REPORT, "report", "--json", "--section",
                              "slow_rank", trace], capture_output=True,
                             env=self.env)
        v = None
        if rep.returncode == 0:
            try:
                v = json.loads(rep.stdout)["slow_rank"][0]
            except (ValueError, KeyError, IndexError) as e:
                sys.stderr.write("report output unreadable: %s\n" % e)
                rep.returncode = -1
        want = truth["slow_ranks"]
        if KEEP and v is not None and (
                (want and v["Rank"] not in want) or
                (not want and v["Rank"] >= 0) or
                (v["Rank"] in want and v["Cause"] != truth["cause"])):
            os.makedirs(KEEP, exist_ok=True)
            shutil.copy(trace, os.path.join(KEEP, "%s-%dr-%s-seed%d.mspti" %
                                            (scenario, ranks, fault, seed)))
        try:
            os.unlink(trace)
        except OSError:
            pass
        if rep.returncode != 0:
            self.broken += 1
            sys.stderr.write("report failed: %s\n" % rep.stderr.decode())
            return None
        return truth, v


class Score:
    def __init__(self):
        self.tp = self.fp = self.fn = self.cause = self.runs = 0
        self.named = 0
        self.thr = []

    def add(self, truth, v):
        self.runs += 1
        want = truth["slow_ranks"]
        got = v["Rank"]
        self.thr.append(v["Threshold(%)"])
        if got >= 0:
            self.named += 1
        if got >= 0 and got in want:
            self.tp += 1
            if v["Cause"] == truth["cause"]:
                self.cause += 1
        elif got >= 0:
            self.fp += 1
        if want and got not in want:
            self.fn += 1

    @staticmethod
    def pct(a, b):
        return "%5.0f%%" % (100.0 * a / b) if b else "    -"

    def row(self):
        thr = sorted(self.thr)
        return "%4d %s %s %s %7.2f" % (
            self.runs, self.pct(self.tp, self.tp + self.fp),
            self.pct(self.tp, self.tp + self.fn),
            self.pct(self.cause, self.tp),
            thr[len(thr) // 2] if thr else 0)


def on_term(sig, frame):
    raise SystemExit(128 + sig)


def main():
    # Stopped by a signal, still stop the daemon and the hogs (SIGINT is
    # ignored in a background job of a shell).
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    for f in (MSPTID, CTL, DIST):
        if not os.access(f, os.X_OK):
            print("bench-verdict: %s is not built" % f)
            return 1
    b = Bench()
    try:
        b.start()
        print("Slow-rank verdict accuracy (%d steps per run, %d runs per "
              "cell, NPUSIM_TIME_SCALE %s; fault = extra time on one rank, "
              "%% of its step's modelled compute)" % (STEPS, RUNS, SCALE))
        # The targets first, so a spent budget never skips them.
        key = Score()
        for i in range(4 if QUICK else 20):
            res = b.run("slow-compute", 8, fault=3, slow=(i * 3 + 1) % 8,
                        seed=i + 1)
            if res:
                key.add(*res)
        print("Targets")
        print("  3%% compute-slow rank among 8: precision %s, recall %s, "
              "cause right %s over %d runs (want >= 95%%)" %
              (Score.pct(key.tp, key.tp + key.fp).strip(),
               Score.pct(key.tp, key.tp + key.fn).strip(),
               Score.pct(key.cause, key.tp).strip(), key.runs))
        sys.stdout.flush()
        fp_cases = [
            ("balanced", "balanced", None, None, 0, 10),
            ("balanced + CPU hog", "balanced", None, None, 1, 10),
            ("jitter 5%", "jitter", 5, None, 0, 10),
            ("jitter 5% + CPU hog", "jitter", 5, None, 1, 10),
            ("rotating straggler 20%", "rotating", 20, None, 0, 6),
        ]
        bal = Score()
        named = []
        fp_rows = []
        for name, sc, fault, jit, hogs, nruns in fp_cases:
            b.hog(hogs)
            s = Score()
            for i in range(nruns):
                n = RANKS[i % len(RANKS)]
                res = b.run(sc, n, fault=fault, seed=100 + i, jitter=jit)
                if res:
                    s.add(*res)
                    if sc == "balanced":
                        bal.add(*res)
                    v = res[1]
                    if v["Rank"] >= 0:
                        named.append("    %s, %d ranks: rank %d (%s), "
                                     "%.2f%% of its step over a threshold "
                                     "of %.2f%% (noise %.2f%%)" % (
                                         name, n, v["Rank"], v["Cause"],
                                         v["Share of Step(%)"],
                                         v["Threshold(%)"], v.get("Noise(%)", 0)))
            b.hog(0)
            thr = sorted(s.thr)
            fp_rows.append("  %-28s %4d %8d %7.2f" % (
                name, s.runs, s.named, thr[len(thr) // 2] if thr else 0))
        print("  balanced runs (half beside a CPU hog): %d false positives "
              "in %d (want 0)" % (bal.named, bal.runs))
        print()
        print("False positives: runs with no slow rank injected")
        print("  %-28s %4s %8s %7s" % ("runs", "n", "verdicts", "thr(%)"))
        print("\n".join(fp_rows))
        if named:
            print("  verdicts on runs without a slow rank:")
            print("\n".join(named))
        print()
        sys.stdout.flush()
        print("Per scenario, fault size and rank count")
        print("%-13s %5s %5s %4s %6s %6s %6s %7s" % (
            "scenario", "fault", "ranks", "runs", "prec", "recall",
            "cause", "thr(%)"))
        for sc in FAULTS:
            for size in SIZES:
                for n in RANKS:
                    s = Score()
                    if sc == "slow-compute" and size == 3 and n == 8:
                        s = key
                    else:
                        for i in range(RUNS):
                            res = b.run(sc, n, fault=size,
                                        slow=(i * 5 + n + size) % n,
                                        seed=i + 1)
                            if res:
                                s.add(*res)
                    if s.runs:
                        print("%-13s %4d%% %5d %s" % (sc, size, n,
                                                       s.row()))
                        sys.stdout.flush()
        print()
        print("%d runs in %.1f s; %d skipped (budget %.0f s); %d broken" %
              (b.nrun, time.monotonic() - b.t0, b.skipped, BUDGET,
               b.broken))
    finally:
        b.stop()
    return 1 if b.broken else 0


if __name__ == "__main__":
    sys.exit(main())
