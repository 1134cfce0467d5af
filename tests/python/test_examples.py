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


def package_version(builddir):
    with open(os.path.join(builddir, "config.h")) as f:
        for line in f:
            if line.startswith("#define PACKAGE_VERSION "):
                return line.split('"')[1]
    raise AssertionError("no PACKAGE_VERSION in config.h")


def test_package_version(builddir):
    # mspti.__version__ is the release's, as every program's --version.
    p = run_python("import mspti; print(mspti.__version__)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == package_version(builddir)


EXAMPLES = sorted(n for n in os.listdir(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
    "python")) if n.endswith(".py"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_version_and_help(builddir, srcdir, name):
    # Programs that take options answer --version ("NAME VERSION" on
    # stdout, exit 0) and --help, the example workloads included.
    src = open(example(srcdir, name)).read()
    if "import torch" in src:
        pytest.importorskip("torch")
    p = run_python([example(srcdir, name), "--version"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "%s %s\n" % (name, package_version(builddir)), \
        p.stdout + p.stderr
    p = run_python([example(srcdir, name), "--help"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("usage: %s" % name), p.stdout
    assert "--version" in p.stdout
