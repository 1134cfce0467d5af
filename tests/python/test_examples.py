"""The examples of examples/python run (quickly) and check themselves."""

import json
import os

import pytest

from conftest import run_python


def example(srcdir, name):
    return os.path.join(srcdir, "examples", "python", name)


def test_top_kernels(srcdir):
    p = run_python([example(srcdir, "top_kernels.py"), "--steps", "3",
                    "--top", "3"])
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "21 kernels launched, 21 seen"
    assert len(lines) == 2 + 3
    assert lines[2].split()[0] == "MatMulGrad"


def test_comm_ratio_4_ranks(srcdir):
    p = run_python([example(srcdir, "comm_ratio.py"), "--ranks", "4",
                    "--steps", "2"], timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    ranks = [l for l in p.stdout.splitlines() if l.startswith("rank ")]
    assert sorted(l.split(":")[0] for l in ranks) == \
        ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert "all ranks: compute" in p.stdout


def test_mstx_ranges(srcdir):
    p = run_python([example(srcdir, "mstx_ranges.py"), "--steps", "4"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4 marks" in p.stdout
    assert "forward" in p.stdout and "DEVICE" in p.stdout


def test_profile_training(srcdir, tmp_path):
    out = tmp_path / "chrome.json"
    p = run_python([example(srcdir, "profile_training.py"), "--steps", "6",
                    "--chrome", str(out)])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "== Op summary" in p.stdout and "Total(ms)" in p.stdout
    assert "# of Calls" in p.stdout and "Self NPU time total" in p.stdout
    with open(out) as f:
        json.load(f)
